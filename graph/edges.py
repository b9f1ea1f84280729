"""Routing: the only place that decides where the graph goes next."""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import AIMessage

from graph.state import InvestigationState, StopReason

# A node that sees N remaining steps can be followed by at most N - 1 more.
# After the agent's turn, force_answer, verify_traces and check_action_claims must fit.
STEPS_TO_FINISH = 5
# A guard's revision needs agent, force_answer, verify_traces and check_action_claims again.
STEPS_FOR_REVISION = 4


def pending_stop_reason(state: InvestigationState) -> StopReason | None:
    """Why the agent's pending tool calls may not run, if they may not."""
    last = state["messages"][-1]
    calls = len(last.tool_calls) if isinstance(last, AIMessage) else 0
    if state.get("tool_calls_used", 0) + calls > state.get("budget", 0):
        return "tool_budget"
    if state["remaining_steps"] <= STEPS_TO_FINISH:
        return "step_limit"
    return None


def room_for_revision(state: InvestigationState, revisions: int, max_revisions: int) -> bool:
    """Whether a guard may send the draft back once more: revisions and steps remain."""
    return revisions < max_revisions and state["remaining_steps"] > STEPS_FOR_REVISION


def after_agent(state: InvestigationState) -> Literal["tools", "force_answer", "verify_traces"]:
    last = state["messages"][-1]
    if not (isinstance(last, AIMessage) and last.tool_calls):
        return "verify_traces"
    return "force_answer" if pending_stop_reason(state) else "tools"


def after_verify(state: InvestigationState) -> Literal["agent", "check_action_claims"]:
    verdict = state.get("trace_verdict")
    return "agent" if verdict and verdict["outcome"] == "revise" else "check_action_claims"


def after_claims(state: InvestigationState) -> Literal["agent", "grade", "__end__"]:
    verdict = state.get("claim_verdict")
    if verdict and verdict["outcome"] == "revise":
        return "agent"
    if state.get("rubric") and state.get("rubric_status") in (None, "needs_revision"):
        return "grade"
    return "__end__"


def after_grade(state: InvestigationState) -> Literal["agent", "__end__"]:
    return "agent" if state.get("rubric_status") == "needs_revision" else "__end__"
