"""The whole wiring on one screen.

START → agent → tools → agent …
              → force_answer → check_draft
              → check_draft → agent  (the trace guard found cited traces missing, the
                                      grounding check facts no evidence shows, or the
                                      action-claim guard an outcome the records lack,
                                      and revisions are left)
                            → grade  (a rubric is active)
                                     → agent (needs revision) | END
                            → END

The routes are coroutine functions although they never wait: LangGraph runs a plain
function in a thread pool (a hand-over to a thread and back at every step), a coroutine
function in the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from gates.store import ActionStore
from graph.config import GraphLimits
from graph.grader import Grader
from graph.grounding.sources import LiveSources
from graph.nodes.agent import make_agent
from graph.nodes.check_action_claims import make_claim_guard
from graph.nodes.check_draft import make_check_draft
from graph.nodes.check_grounding import make_grounding_guard
from graph.nodes.force_answer import make_force_answer
from graph.nodes.grade import OnEvaluation, make_grade
from graph.nodes.tools import make_tools
from graph.nodes.verify_traces import make_trace_guard
from graph.progress import TurnContext
from graph.state import InvestigationState
from graph.steps import StepBudget
from graph.trace_guard import TraceVerifier

InvestigationGraph = CompiledStateGraph[
    InvestigationState, TurnContext, InvestigationState, InvestigationState
]

# Where each node may go next: the graph is wired from this, and the step accounting
# (how many steps a tool round or a revision needs) is counted from it.
ROUTES: dict[str, tuple[str, ...]] = {
    "agent": ("tools", "force_answer", "check_draft"),
    "tools": ("agent",),
    "force_answer": ("check_draft",),
    "check_draft": ("agent", "grade", END),
    "grade": ("agent", END),
}
STEPS = StepBudget(ROUTES)
AfterAgent = Literal["tools", "force_answer", "check_draft"]


async def after_check(state: InvestigationState) -> Literal["agent", "grade", "__end__"]:
    """Back to the agent when a guard sent the draft back; then grading, if a rubric is
    active and this turn is not graded yet."""
    check = state.get("draft_check")
    if check is not None and check["answer"] is None:
        return "agent"
    if state.get("rubric") and state.get("rubric_status") in (None, "needs_revision"):
        return "grade"
    return "__end__"


async def after_grade(state: InvestigationState) -> Literal["agent", "__end__"]:
    return "agent" if state.get("rubric_status") == "needs_revision" else "__end__"


def build_graph(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    verifier: TraceVerifier,
    grader: Grader,
    checkpointer: BaseCheckpointSaver[str] | None,
    limits: GraphLimits,
    on_evaluation: OnEvaluation | None = None,
    action_records: ActionStore | None = None,
    sources: LiveSources | None = None,
) -> InvestigationGraph:
    builder = StateGraph(InvestigationState, context_schema=TurnContext)
    builder.add_node("agent", make_agent(model, tools, limits))
    builder.add_node("tools", make_tools(tools))
    builder.add_node("force_answer", make_force_answer(model, tools, STEPS, limits))
    builder.add_node(
        "check_draft",
        make_check_draft(
            make_trace_guard(verifier, limits, STEPS),
            make_grounding_guard(sources, limits, STEPS),
            make_claim_guard(action_records, limits, STEPS),
        ),
    )
    builder.add_node("grade", make_grade(grader, limits, STEPS, on_evaluation))

    async def after_agent(state: InvestigationState) -> AfterAgent:
        """Tools while the tool budget and the steps allow them, else a forced answer."""
        last = state["messages"][-1]
        if not (isinstance(last, AIMessage) and last.tool_calls):
            return "check_draft"
        return "force_answer" if STEPS.stop_reason(state, limits.tool_budget) else "tools"

    builder.add_edge(START, "agent")
    choosing: dict[str, Callable[[InvestigationState], Any]] = {  # the nodes that choose
        "agent": after_agent,
        "check_draft": after_check,
        "grade": after_grade,
    }
    for node, ahead in ROUTES.items():
        if node in choosing:
            builder.add_conditional_edges(node, choosing[node], list(ahead))
        else:
            (only,) = ahead
            builder.add_edge(node, only)
    return builder.compile(checkpointer=checkpointer)
