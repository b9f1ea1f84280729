"""A long thread stays cheap: bounded model input, small checkpoint storage, and still
resumable and verifiable. Real Redis, the real Gemini client against the simulator."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import redis.asyncio as aioredis
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph.history import DIGEST_MARK, bound_history, digest, split_turns
from graph.runner import Investigator
from graph.state import InvestigationState
from sandbox import GeminiRequest, GeminiSimulator, Reply, TempoSimulator
from sandbox.plays import follow_up_turn
from sandbox.scenarios import Scenario

TURNS = 30
MIB = 1024 * 1024


async def _run_turns(
    investigator: Investigator, gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> list[GeminiRequest]:
    """Run a 30-turn thread; return the first model request of each turn."""
    firsts = []
    for turn in range(1, TURNS + 1):
        gemini.script(*follow_up_turn(scenario, turn))
        before = len(gemini.requests)
        result = await investigator.investigate(thread_id, f"turn {turn}: what now?", "U1")
        assert result.status == "answered", result
        firsts.append(gemini.requests[before])
    return firsts


async def thread_bytes(redis_url: str, thread_id: str) -> int:
    client = aioredis.from_url(redis_url)
    try:
        keys = [k async for k in client.scan_iter(match=f"*{thread_id}*")]
        return sum([await client.memory_usage(k) or 0 for k in keys])
    finally:
        await client.aclose()


def _request_bytes(request: GeminiRequest) -> int:
    return len(json.dumps(request.body))


async def test_a_30_turn_threads_model_input_stays_within_twice_turn_3s(
    investigator: Investigator, gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> None:
    firsts = await _run_turns(investigator, gemini, scenario, thread_id)

    assert _request_bytes(firsts[29]) <= 2 * _request_bytes(firsts[2])
    # The current turn's results are read in full; an earlier turn's only as a digest.
    last_turn = gemini.requests[-1].text()
    assert "matched spans" in last_turn
    assert DIGEST_MARK in firsts[2].text()
    assert "[thread summary]" in firsts[29].text()


async def test_an_id_first_cited_in_turn_1_is_still_known_in_turn_30(
    investigator: Investigator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    first_id = scenario.error_trace_ids[0]
    gemini.script(*follow_up_turn(scenario, 1))
    await investigator.investigate(thread_id, "turn 1", "U1")
    for turn in range(2, TURNS):
        gemini.script(*follow_up_turn(scenario, turn))
        await investigator.investigate(thread_id, f"turn {turn}", "U1")
    asked_before = len(tempo.requests_for(f"/api/v2/traces/{first_id}"))

    gemini.script(Reply.text(f"As in the first turn, trace {first_id} is the failing one."))
    result = await investigator.investigate(thread_id, "turn 30: which trace again?", "U1")

    state = (await investigator.graph.aget_state({"configurable": {"thread_id": thread_id}})).values
    assert state["summarised_turns"] > 0  # turn 1 has left the messages...
    assert not any(m.text == "turn 1" for m in state["messages"])
    assert first_id in state["known_traces"]  # ...but its verified ID has not
    assert result.verified_trace_ids == [first_id]
    assert first_id in result.answer
    assert len(tempo.requests_for(f"/api/v2/traces/{first_id}")) == asked_before


async def test_a_30_turn_thread_keeps_under_1_mib_in_redis_and_a_killed_turn_resumes(
    investigator: Investigator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
    thread_id: str,
    redis_url: str,
) -> None:
    await _run_turns(investigator, gemini, scenario, thread_id)
    assert await thread_bytes(redis_url, thread_id) < 1 * MIB

    # Turn 31 is cut short inside its tool call: the checkpoint that remains resumes it.
    healthy = next(
        t.trace_id for t in scenario.traces if t.trace_id not in scenario.error_trace_ids
    )
    tempo.faults.latency_s = 30
    gemini.script(Reply.call("get_trace", trace_id=healthy))
    turn_id = f"turn-{uuid.uuid4().hex[:8]}"
    running = asyncio.create_task(
        investigator.investigate(thread_id, "turn 31", "U1", turn_id=turn_id)
    )
    await tempo.wait_for_request(f"/api/v2/traces/{healthy}")
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    tempo.faults.latency_s = 0
    model_calls = len(gemini.requests)
    gemini.script(Reply.text(f"Resumed: trace {healthy} is a healthy one."))

    result = await investigator.investigate(thread_id, "turn 31", "U1", turn_id=turn_id)

    assert result.status == "answered"
    assert result.events[0]["type"] == "resumed"
    assert len(gemini.requests) == model_calls + 1  # the tool ran again, the model once
    assert "Resumed" in result.answer
    assert result.verified_trace_ids == [healthy]


def _call(call_id: str, trace_id: str) -> AIMessage:
    call = {"name": "get_trace", "args": {"trace_id": trace_id}, "id": call_id}
    return AIMessage("", tool_calls=[{**call, "type": "tool_call"}], id=f"ai-{call_id}")


def _thread(turns: int, result_chars: int) -> InvestigationState:
    messages: list[HumanMessage | AIMessage | ToolMessage] = []
    for turn in range(turns):
        trace_id = f"{turn:032x}"
        messages += [
            HumanMessage(f"question {turn}", id=f"q{turn}"),
            _call(f"c{turn}", trace_id),
            ToolMessage(
                f"trace {trace_id}: 9 spans\nerror spans (1):\n" + "x" * result_chars,
                tool_call_id=f"c{turn}",
                name="get_trace",
                id=f"t{turn}",
            ),
            AIMessage(f"answer {turn} cites {trace_id}", id=f"a{turn}"),
        ]
    return {"messages": list(messages)}


def test_earlier_turns_tool_results_become_digests_and_the_current_turn_stays_whole() -> None:
    state = _thread(3, 5000)
    history = bound_history(state, budget_tokens=100_000)

    results = [m for m in history.view if isinstance(m, ToolMessage)]
    assert [r.text.startswith(DIGEST_MARK) for r in results] == [True, True, False]
    assert f"{0:032x}" in results[0].text and '"trace_id"' in results[0].text
    assert [u.id for u in history.updates] == ["t0", "t1"]  # replaced in place, by id
    assert history.summary is None


def test_model_turns_are_kept_as_the_client_produced_them() -> None:
    state = _thread(12, 5000)
    history = bound_history(state, budget_tokens=400)

    kept_ai = [m for m in history.view if isinstance(m, AIMessage)]
    originals = {m.id: m for m in state["messages"]}
    assert kept_ai and all(m is originals[m.id] for m in kept_ai)
    # Whole turns leave together: no tool call without its result, no result without its call.
    calls = {c["id"] for m in kept_ai for c in m.tool_calls}
    results = {m.tool_call_id for m in history.view if isinstance(m, ToolMessage)}
    assert calls == results


def test_turns_beyond_the_budget_are_summarised_once_and_the_summary_is_bounded() -> None:
    state = _thread(40, 200)
    history = bound_history(state, budget_tokens=400)
    assert history.summary is not None and history.summarised > 0
    summary_chars = sum(len(line) for line in history.summary)
    assert summary_chars <= 400 * 4 // 4

    again = bound_history(
        {
            "messages": [
                m
                for m in state["messages"]
                if m.id not in {u.id for u in history.updates if u.type == "remove"}
            ],
            "history_summary": history.summary,
            "summarised_turns": history.summarised,
        },
        budget_tokens=400,
    )
    assert again.summary is None  # nothing left to fold: each turn is summarised once


def test_a_digest_names_the_tool_its_arguments_and_its_trace_ids() -> None:
    result = ToolMessage(
        "2 traces match {status=error}:\n- " + "a" * 32 + " checkout\n- " + "b" * 32 + " cart",
        tool_call_id="c1",
        name="query_tempo_traces",
    )
    text = digest(result, {"traceql": "{status=error}"})
    assert "query_tempo_traces" in text and "{status=error}" in text
    assert "a" * 32 in text and "b" * 32 in text


def test_a_turn_opens_with_its_thread_context() -> None:
    messages = [
        HumanMessage("q1"),
        AIMessage("a1"),
        HumanMessage("alert fired", name="thread_context"),
        HumanMessage("q2"),
        HumanMessage("[trace guard] fix it", name="trace_guard"),
        AIMessage("a2"),
    ]
    assert [len(t) for t in split_turns(messages)] == [2, 4]
