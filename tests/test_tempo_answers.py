"""What Tempo (or something in front of it) answers that is not Tempo's JSON, or a search
Tempo refuses: a failed tool call or an unverified ID, never a failed turn."""

import time

import httpx
from prometheus_client import REGISTRY

from graph.runner import Investigator
from graph.trace_guard import UNVERIFIED_MARK
from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.scenarios import Scenario


async def test_a_sign_in_page_answered_with_200_marks_cited_ids_unverified(
    investigator: Investigator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    cited = scenario.error_trace_ids[3]
    tempo.faults.html_page = True
    gemini.script(Reply.text(f"Probably a bad deploy; see {cited}."))
    result = await investigator.investigate(thread_id, "why?", "U1")

    assert result.status == "answered"
    assert result.unverified_trace_ids == [cited]
    assert f"{cited}{UNVERIFIED_MARK}" in result.answer


async def test_a_sign_in_page_makes_the_tool_call_fail_and_the_turn_go_on(
    investigator: Investigator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    tempo.faults.html_page = True
    gemini.script(
        Reply.call("get_trace", trace_id=scenario.error_trace_ids[0]),
        Reply.text("Tempo could not be read."),
    )
    result = await investigator.investigate(thread_id, "why?", "U1")

    assert result.status == "answered"
    (finished,) = [e for e in result.events if e["type"] == "tool_finished"]
    assert finished["outcome"] == "failed"
    tool_result = gemini.requests[1].text()
    assert "not Tempo's JSON (text/html" in tool_result


async def test_a_search_wider_than_tempo_allows_comes_back_as_tempo_words_it(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(
        Reply.call("query_tempo_traces", traceql="{ status = error }", since_minutes_ago=20000),
        Reply.text("The window was too wide."),
    )
    await investigator.investigate(thread_id, "why?", "U1")

    assert "range specified by start and end exceeds 168h0m0s" in gemini.requests[1].text()


async def test_the_tempo_simulator_refuses_fractional_seconds_as_tempo_does(
    tempo: TempoSimulator,
) -> None:
    now = time.time()
    async with httpx.AsyncClient(base_url=tempo.url) as client:
        fractional = await client.get("/api/search", params={"start": now - 60, "end": now})
        whole = await client.get("/api/search", params={"start": int(now) - 60, "end": int(now)})
    assert (fractional.status_code, whole.status_code) == (400, 200)
    assert "invalid start" in fractional.text


async def test_a_tool_name_the_model_made_up_is_counted_under_one_label(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(Reply.call("drop_database", reason="x"), Reply.text("No such tool."))
    before = REGISTRY.get_sample_value(
        "tracegate_tool_calls_total", {"tool": "unknown", "outcome": "failed"}
    )
    await investigator.investigate(thread_id, "why?", "U1")

    after = REGISTRY.get_sample_value(
        "tracegate_tool_calls_total", {"tool": "unknown", "outcome": "failed"}
    )
    assert (after or 0) - (before or 0) == 1
    invented = {"tool": "drop_database", "outcome": "failed"}
    assert REGISTRY.get_sample_value("tracegate_tool_calls_total", invented) is None
