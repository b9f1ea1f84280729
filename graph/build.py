"""The whole wiring on one screen.

START → agent → tools → agent …
              → force_answer → verify_traces
              → verify_traces → agent  (cited traces missing, revisions left)
                              → check_action_claims → agent  (claims an action outcome the
                                                              records lack, revisions left)
                                                    → grade  (a rubric is active)
                                                             → agent (needs revision) | END
                                                    → END
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from gates.store import ActionStore
from graph.config import GraphLimits
from graph.edges import after_agent, after_claims, after_grade, after_verify
from graph.grader import Grader
from graph.nodes import (
    make_agent,
    make_check_action_claims,
    make_force_answer,
    make_tools,
    make_verify_traces,
)
from graph.nodes.grade import OnEvaluation, make_grade
from graph.state import InvestigationState
from graph.trace_guard import TraceVerifier

InvestigationGraph = CompiledStateGraph[
    InvestigationState, None, InvestigationState, InvestigationState
]


def build_graph(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    verifier: TraceVerifier,
    grader: Grader,
    checkpointer: BaseCheckpointSaver[str] | None,
    limits: GraphLimits,
    on_evaluation: OnEvaluation | None = None,
    action_records: ActionStore | None = None,
) -> InvestigationGraph:
    builder = StateGraph(InvestigationState)
    builder.add_node("agent", make_agent(model, tools, limits.context_budget_tokens))
    builder.add_node("tools", make_tools(tools))
    builder.add_node("force_answer", make_force_answer(model, tools))
    builder.add_node("verify_traces", make_verify_traces(verifier, limits))
    builder.add_node("check_action_claims", make_check_action_claims(action_records, limits))
    builder.add_node("grade", make_grade(grader, limits, on_evaluation))

    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", after_agent, ["tools", "force_answer", "verify_traces"])
    builder.add_edge("tools", "agent")
    builder.add_edge("force_answer", "verify_traces")
    builder.add_conditional_edges("verify_traces", after_verify, ["agent", "check_action_claims"])
    builder.add_conditional_edges("check_action_claims", after_claims, ["agent", "grade", END])
    builder.add_conditional_edges("grade", after_grade, ["agent", END])
    return builder.compile(checkpointer=checkpointer)
