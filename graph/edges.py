"""Routing: the only place that decides where the graph goes next.

The routes are coroutine functions although they never wait: LangGraph runs a plain
function in a thread pool (a hand-over to a thread and back at every step), a coroutine
function in the event loop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from langchain_core.messages import AIMessage

from graph.state import InvestigationState
from graph.steps import StepBudget

AfterAgent = Literal["tools", "force_answer", "check_draft"]


def after_agent(
    steps: StepBudget, tool_budget: int
) -> Callable[[InvestigationState], Awaitable[AfterAgent]]:
    """Tools while the tool budget and the steps allow them, else a forced answer."""

    async def route(state: InvestigationState) -> AfterAgent:
        last = state["messages"][-1]
        if not (isinstance(last, AIMessage) and last.tool_calls):
            return "check_draft"
        return "force_answer" if steps.stop_reason(state, tool_budget) else "tools"

    return route


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
