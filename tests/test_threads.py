"""A Slack thread is one LangGraph thread, checkpointed in Redis across restarts."""

from graph.runner import Investigator
from sandbox import GeminiSimulator, Reply
from sandbox.scenarios import Scenario
from tests.conftest import OpenInvestigator


async def test_a_thread_continues_after_a_restart(
    investigator_for: OpenInvestigator,
    gemini: GeminiSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    first_answer = (
        f"payment-api 1.42.0 throws NullPointerException; see {scenario.error_trace_ids[0]}."
    )
    gemini.script(
        Reply.text(first_answer), Reply.text("Roll back payment-api to the previous revision.")
    )
    async with investigator_for() as before_restart:
        await before_restart.investigate(thread_id, "checkout 500s, why?", "U1")
    async with investigator_for() as after_restart:  # a new saver, graph and Redis connection
        result = await after_restart.investigate(thread_id, "what should we do?", "U2")

    follow_up = gemini.requests[1].text()
    assert "checkout 500s, why?" in follow_up
    assert first_answer in follow_up
    assert result.answer == "Roll back payment-api to the previous revision."


async def test_threads_do_not_see_each_other(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(Reply.text("first"), Reply.text("second"))
    await investigator.investigate(thread_id, "question in thread one", "U1")
    await investigator.investigate(thread_id + "-other", "question in thread two", "U1")

    assert "question in thread one" not in gemini.requests[1].text()


async def test_a_new_turn_starts_with_a_fresh_tool_budget(
    investigator_for: OpenInvestigator,
    gemini: GeminiSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    trace = scenario.error_trace_ids[0]
    gemini.script(
        Reply.call("get_trace", trace_id=trace),
        Reply.text("first answer"),
        Reply.call("get_trace", trace_id=trace),
        Reply.text("second answer"),
    )
    async with investigator_for(tool_budget=1) as investigator:
        await investigator.investigate(thread_id, "first", "U1")
        second = await investigator.investigate(thread_id, "second", "U1")

    assert (second.stop_reason, second.tool_calls, second.answer) == (None, 1, "second answer")
