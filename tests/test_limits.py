"""Tool budget, step limit and recursion limit: the turn always ends with a result."""

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import ValidationError

from graph.config import GraphLimits
from graph.runner import InvestigationResult, Investigator
from sandbox import GeminiRequest, Reply
from sandbox.gemini import GeminiSimulator
from sandbox.scenarios import Scenario
from tests.conftest import OpenInvestigator


def _keeps_calling_tools(trace_id: str) -> Callable[[GeminiRequest], Reply]:
    """A model that never stops calling tools, unless tool calls are switched off."""

    def reply(request: GeminiRequest) -> Reply:
        config = request.body.get("toolConfig", {}).get("functionCallingConfig", {})
        if config.get("mode") == "NONE":
            return Reply.text(f"Best guess from what I saw: the deploy; see {trace_id}.")
        return Reply.call("get_trace", trace_id=trace_id)

    return reply


InvestigateLooping = Callable[..., Awaitable[InvestigationResult]]


@pytest.fixture
def investigate_looping(
    investigator_for: OpenInvestigator, gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> InvestigateLooping:
    """Ask once, the model scripted to keep calling tools for `replies` replies; keyword
    arguments set GraphLimits."""

    async def investigate(replies: int, **limits: Any) -> InvestigationResult:
        gemini.script(*[_keeps_calling_tools(scenario.error_trace_ids[0])] * replies)
        async with investigator_for(**limits) as investigator:
            return await investigator.investigate(thread_id, "why?", "U1")

    return investigate


async def test_an_exhausted_tool_budget_forces_an_answer_without_tools(
    investigate_looping: InvestigateLooping, gemini: GeminiSimulator, scenario: Scenario
) -> None:
    result = await investigate_looping(10, tool_budget=2)

    forced = gemini.requests[-1]
    assert result.tool_calls == 2
    assert (result.status, result.stop_reason) == ("answered", "tool_budget")
    assert forced.body["toolConfig"]["functionCallingConfig"]["mode"] == "NONE"
    assert "tool budget for this question is used up" in forced.text()
    assert result.verified_trace_ids == [scenario.error_trace_ids[0]]
    assert any("tool budget" in n for n in result.notices)


async def test_the_step_limit_routes_to_a_final_answer_before_the_recursion_limit(
    investigate_looping: InvestigateLooping,
) -> None:
    result = await investigate_looping(20, recursion_limit=8, tool_budget=50)

    assert (result.status, result.stop_reason) == ("incomplete", "step_limit")
    assert "the answer may be incomplete — narrow the question" in result.notices[0]
    assert "Best guess" in result.answer


async def test_hitting_the_recursion_limit_returns_an_incomplete_result(
    investigate_looping: InvestigateLooping,
) -> None:
    result = await investigate_looping(5, recursion_limit=3)

    assert (result.status, result.stop_reason) == ("incomplete", "recursion_limit")
    assert "Stopped after 3 steps; the answer may be incomplete" in result.notices[-1]
    assert result.events[-1]["type"] == "stopped"


def test_a_recursion_limit_below_3_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValidationError, match=r"recursion_limit\n.*greater than or equal to 3"):
        GraphLimits(recursion_limit=2)


async def test_an_unknown_tool_name_is_answered_to_the_model_not_raised(
    investigator: Investigator,
    gemini: GeminiSimulator,
    thread_id: str,
) -> None:
    gemini.script(Reply.call("kubectl_delete", namespace="prod"), Reply.text("I cannot do that."))
    result = await investigator.investigate(thread_id, "delete prod", "U1")

    assert "kubectl_delete is not a valid tool, try one of [query_tempo_traces" in (
        gemini.requests[1].text()
    )
    assert result.answer == "I cannot do that."


def _graded(
    agent: Callable[[GeminiRequest], Reply], verdict: str
) -> Callable[[GeminiRequest], Reply]:
    """`agent` answers the agent's requests; the grader's get `verdict` on one criterion."""

    def reply(request: GeminiRequest) -> Reply:
        if "SubmitVerdict" in request.tool_names:
            gap = {} if verdict == "satisfied" else {"gap": "name the deploy"}
            criteria = [{"name": "cause stated", "passed": verdict == "satisfied", **gap}]
            return Reply.call("SubmitVerdict", result=verdict, explanation="ok", criteria=criteria)
        return agent(request)

    return reply


async def test_the_step_limit_leaves_room_for_grading_the_forced_answer(
    investigator_for: OpenInvestigator,
    gemini: GeminiSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    # 10 steps: after two tool rounds the agent sees 5 left, as many as agent, tools,
    # force_answer, check_draft and grade would need: a third round would leave grade none.
    gemini.script(*[_graded(_keeps_calling_tools(scenario.error_trace_ids[0]), "satisfied")] * 10)
    async with investigator_for(recursion_limit=10, tool_budget=50) as investigator:
        result = await investigator.investigate(thread_id, "why?", "U1", rubric="- cause stated")

    assert (result.stop_reason, result.tool_calls) == ("step_limit", 2)
    assert (result.rubric_status, result.rubric_passes) == ("satisfied", 1)


async def test_a_grader_revision_the_steps_cannot_fit_ends_grading_instead(
    investigator_for: OpenInvestigator,
    gemini: GeminiSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    replies = _graded(_keeps_calling_tools(scenario.error_trace_ids[0]), "needs_revision")
    gemini.script(*[replies] * 10)
    async with investigator_for(recursion_limit=10, tool_budget=50) as investigator:
        result = await investigator.investigate(thread_id, "why?", "U1", rubric="- cause stated")

    assert result.stop_reason == "step_limit"
    assert (result.rubric_status, result.rubric_passes) == ("max_iterations_reached", 1)
