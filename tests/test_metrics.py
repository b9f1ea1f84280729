"""/metrics: Prometheus text that parses, and counters that move with what the bot does."""

import asyncio
from typing import Any

import aiohttp
import redis.asyncio as aioredis
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from bot.process.server import RunningBot
from gates.pipeline import ActionPipeline
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.runner import Investigator, open_investigator
from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.scenarios import Scenario
from sandbox.slack import SlackDriver
from tests.proposals import propose_rollback
from tests.shared_redis import PREFIX
from tests.slack_fixtures import SECRET, BotFactory
from tests.test_rubric_grading import ALL_PASS, GRADER, RUBRIC

ROOT = "1700000000.000100"
Sample = tuple[str, frozenset[tuple[str, str]]]


async def _scrape(bot: RunningBot) -> dict[Sample, float]:
    async with aiohttp.ClientSession() as session, session.get(f"{bot.url}/metrics") as response:
        assert response.status == 200
        text = await response.text()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _moved(
    before: dict[Sample, float], after: dict[Sample, float], name: str, **labels: str
) -> float:
    """How much the samples named `name` whose labels include `labels` grew in total."""

    def total(samples: dict[Sample, float]) -> float:
        wanted = set(labels.items())
        return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)

    return total(after) - total(before)


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_mention_moves_the_counters_on_metrics(
    bot: RunningBot, driver: SlackDriver, gemini: GeminiSimulator, scenario: Scenario
) -> None:
    real = scenario.error_trace_ids[0]
    gemini.script(
        Reply.call("query_tempo_traces", traceql="{ status = error }"),
        Reply.text(f"payment-api 1.42.0 fails; see {real}."),
    )
    before = await _scrape(bot)
    await driver.mention("checkout is throwing 500s, why?", ts=ROOT)
    assert await bot.services.jobs.join(15)
    after = await _scrape(bot)

    moved = {
        name: _moved(before, after, name, **labels)
        for name, labels in [
            ("tracegate_slack_events_total", {}),
            ("tracegate_slack_ack_seconds_count", {}),
            ("tracegate_turns_started_total", {}),
            ("tracegate_turns_finished_total", {"status": "answered"}),
            ("tracegate_turn_duration_seconds_count", {"status": "answered"}),
            ("tracegate_model_calls_total", {"role": "agent"}),
            ("tracegate_model_tokens_total", {"role": "agent", "direction": "output"}),
            ("tracegate_tool_calls_total", {"tool": "query_tempo_traces", "outcome": "succeeded"}),
            ("tracegate_trace_guard_total", {"outcome": "found"}),
        ]
    }
    assert moved == {
        "tracegate_slack_events_total": 1,
        "tracegate_slack_ack_seconds_count": 1,
        "tracegate_turns_started_total": 1,
        "tracegate_turns_finished_total": 1,
        "tracegate_turn_duration_seconds_count": 1,
        "tracegate_model_calls_total": 2,
        "tracegate_model_tokens_total": 2,  # the simulator reports 1 output token a reply
        "tracegate_tool_calls_total": 1,
        "tracegate_trace_guard_total": 1,
    }


async def test_a_redelivered_mention_counts_as_deduplicated(
    bot: RunningBot, driver: SlackDriver, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text("one answer"))
    before = await _scrape(bot)
    for retry in range(2):
        await driver.mention("why?", ts=ROOT, event_id="EvTwice", retry=retry)
    assert await bot.services.jobs.join(15)
    after = await _scrape(bot)
    assert _moved(before, after, "tracegate_slack_events_deduplicated_total") == 1


async def test_a_tempo_outage_is_a_failed_tool_call_in_metrics_steps_and_notices(
    investigator: Investigator, gemini: GeminiSimulator, tempo: TempoSimulator, thread_id: str
) -> None:
    tempo.faults.status = 503
    gemini.script(
        Reply.call("query_tempo_traces", traceql="{ status = error }"),
        Reply.text("Tempo is unavailable, so I cannot cite traces."),
    )
    failed = {"tool": "query_tempo_traces", "outcome": "failed"}
    before = _value("tracegate_tool_calls_total", **failed)
    result = await investigator.investigate(thread_id, "why 500s?", "U1")

    assert _value("tracegate_tool_calls_total", **failed) - before == 1
    (finished,) = [e for e in result.events if e["type"] == "tool_finished"]
    assert (finished["status"], finished["outcome"]) == ("error", "failed")
    assert any("Failed this turn: query_tempo_traces" in n for n in result.notices)


async def test_gate_decisions_and_action_request_states_are_counted(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.json({"safe_to_proceed": True, "reason": "matches the evidence"}))
    counted: list[tuple[str, dict[str, Any]]] = [
        ("tracegate_gate_decisions_total", {"gate": "policy", "decision": "allowed"}),
        ("tracegate_gate_decisions_total", {"gate": "judge", "decision": "allowed"}),
        ("tracegate_action_requests_total", {"state": "pending_approval"}),
    ]
    before = [_value(name, **labels) for name, labels in counted]
    request = await propose_rollback(pipeline)
    after = [_value(name, **labels) for name, labels in counted]
    assert request.status == "pending_approval"
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1]


async def test_a_graded_answer_counts_its_verdict_and_the_graders_model_calls(
    model_spec: ModelSpec,
    tempo_spec: TempoSpec,
    redis_client: aioredis.Redis,
    gemini: GeminiSimulator,
    thread_id: str,
) -> None:
    grader = model_spec.model_copy(update={"model": f"google_genai:{GRADER}"})
    gemini.script(Reply.text("payment-api is the cause."))
    gemini.script(ALL_PASS, model=GRADER)
    counted = [
        ("tracegate_rubric_verdicts_total", {"verdict": "satisfied"}),
        ("tracegate_model_calls_total", {"model": f"google_genai:{GRADER}", "role": "grader"}),
    ]
    before = [_value(name, **labels) for name, labels in counted]
    async with open_investigator(
        model_spec, tempo_spec, GraphLimits(), redis_client, prefix=PREFIX, grader_model=grader
    ) as investigator:
        result = await investigator.investigate(thread_id, "why?", "U1", rubric=RUBRIC)
    after = [_value(name, **labels) for name, labels in counted]
    assert result.rubric_status == "satisfied"
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1]


async def test_the_queue_gauges_show_a_waiting_turn(bot_for: BotFactory) -> None:
    async with bot_for(worker_mode="queue") as queued:  # no worker runs: the turn waits
        await SlackDriver(queued.url, SECRET, team="TQUEUE").mention("why?", ts=ROOT)
        await asyncio.sleep(1.1)
        after = await _scrape(queued)
    assert after[("tracegate_queue_depth", frozenset())] == 1
    assert after[("tracegate_queue_oldest_turn_seconds", frozenset())] >= 1
