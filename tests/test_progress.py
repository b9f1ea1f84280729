"""Progress events stream out of a running turn (the bot edits its placeholder with them)."""

import asyncio

from graph.runner import Investigator
from sandbox import GeminiSimulator, Reply


async def test_progress_is_reported_in_order_while_the_turn_runs(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    seen: list[str] = []

    async def record(event: dict[str, object]) -> None:
        seen.append(str(event["type"]))

    gemini.script(
        Reply.call("query_tempo_traces", traceql="{ status = error }"), Reply.text("done")
    )
    await investigator.investigate(thread_id, "why?", "U1", on_progress=record)

    assert seen == [
        "model_started",
        "model_finished",
        "tool_started",
        "tool_finished",
        "model_started",
        "model_finished",
        "verification_started",
        "verification_finished",
        "grounding_started",
        "grounding_finished",
        "claims_checked",
        "final",
    ]


async def test_a_slow_reporter_gets_every_event_before_the_turn_returns(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    seen: list[str] = []

    async def slow(event: dict[str, object]) -> None:
        await asyncio.sleep(0.02)  # a Slack edit
        seen.append(str(event["type"]))

    gemini.script(
        Reply.call("query_tempo_traces", traceql="{ status = error }"), Reply.text("done")
    )
    result = await investigator.investigate(thread_id, "why?", "U1", on_progress=slow)

    assert seen == [str(e["type"]) for e in result.events]
    assert seen[-1] == "final"
