"""A run cut short (a restart, a cancelled task) never leaves its thread unusable."""

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph.messages import INTERRUPTED, close_dangling_tool_calls
from graph.runner import Investigator
from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.scenarios import Scenario


def test_a_tool_call_left_without_a_result_is_answered_as_interrupted() -> None:
    call = {"name": "get_trace", "args": {"trace_id": "ab"}, "id": "c1", "type": "tool_call"}
    history = [HumanMessage("why?"), AIMessage("", tool_calls=[call]), HumanMessage("and now?")]
    closed = close_dangling_tool_calls(history)
    assert isinstance(closed[2], ToolMessage)
    assert (closed[2].tool_call_id, closed[2].content) == ("c1", INTERRUPTED)
    assert closed[3] == history[2]


def test_the_latest_turns_pending_calls_are_left_to_run() -> None:
    call = {"name": "get_trace", "args": {}, "id": "c1", "type": "tool_call"}
    history = [HumanMessage("why?"), AIMessage("", tool_calls=[call])]
    assert close_dangling_tool_calls(history) == history


async def test_a_turn_cancelled_inside_a_tool_does_not_break_the_next_one(
    investigator: Investigator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    tempo.faults.latency_s = 30
    gemini.script(Reply.call("get_trace", trace_id=scenario.error_trace_ids[0]))
    running = asyncio.create_task(investigator.investigate(thread_id, "first", "U1"))
    await tempo.wait_for_request("/api/v2/traces/")
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    tempo.faults.latency_s = 0
    gemini.script(Reply.text("second answer"))
    result = await investigator.investigate(thread_id, "second", "U1")

    assert result.answer == "second answer"
    assert INTERRUPTED in gemini.requests[-1].text()
