"""Model capacity in a turn: a refused call unwinds the turn, which resumes from its checkpoint
without repeating work; budgets end a turn with a message; the result names the model that
answered. The investigator is wired as the bot wires it (a `ModelGuard` on real Redis)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from graph.capacity import CapacityLimits, ModelBusy, ModelGuard
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.runner import Investigator, open_investigator
from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.scenarios import Scenario
from tests.conftest import MODEL
from tests.shared_redis import PREFIX
from tests.verdicts import verdict

GRADER = "gemini-grader"
FALLBACK = "gemini-3.8-flash-lite"
RUBRIC = "- cause stated"
# No checkable fact (service, version, …) in it: a grounding check has nothing to send back.
ANSWER = "No fault was found in the evidence gathered so far."
PASSED = verdict("satisfied", ("cause stated", True, None))

Open = Callable[..., AbstractAsyncContextManager[Investigator]]


@pytest.fixture
def prefix() -> str:
    return f"capturn-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def guarded(
    model_spec: ModelSpec,
    tempo_spec: TempoSpec,
    redis_url: str,
    redis_client: aioredis.Redis,
    prefix: str,
) -> Open:
    def open_with(**limits: object) -> AbstractAsyncContextManager[Investigator]:
        guard = ModelGuard(redis_client, prefix, CapacityLimits(**limits))  # type: ignore[arg-type]
        return open_investigator(
            model_spec,
            tempo_spec,
            GraphLimits(),
            redis_client,
            prefix=PREFIX,
            grader_model=model_spec.model_copy(update={"model": f"google_genai:{GRADER}"}),
            guard=guard,
        )

    return open_with


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_refused_call_unwinds_the_turn_and_the_next_run_repeats_no_work(
    guarded: Open,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    trace = scenario.error_trace_ids[0]
    gemini.script(Reply.call("get_trace", trace_id=trace), Reply.quota(6), Reply.text(ANSWER))
    turn = f"{thread_id}@1"
    async with guarded() as investigator:
        before = time.time()
        with pytest.raises(ModelBusy) as busy:
            await investigator.investigate(
                thread_id, "why?", "U1", turn_id=turn, wait_until=time.time() + 600
            )
        assert 5 <= busy.value.retry_at - before <= 8
        fetched = len(tempo.requests_for("/api/v2/traces"))
        result = await investigator.investigate(
            thread_id, "why?", "U1", turn_id=turn, wait_until=time.time() + 600
        )
    assert result.status == "answered" and ANSWER in result.answer
    assert [r.status for r in gemini.requests] == [200, 429, 200]  # the first call not repeated
    assert fetched == 1 and len(tempo.requests_for("/api/v2/traces")) == 1  # nor the tool call
    assert result.model == f"google_genai:{MODEL}"


async def test_a_refused_grader_call_waits_it_is_not_a_grader_error(
    guarded: Open, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(Reply.text(ANSWER))
    gemini.script(Reply.quota(6), PASSED, model=GRADER)
    turn = f"{thread_id}@1"
    async with guarded() as investigator:
        with pytest.raises(ModelBusy):
            await investigator.investigate(
                thread_id, "why?", "U1", rubric=RUBRIC, turn_id=turn, wait_until=time.time() + 60
            )
        result = await investigator.investigate(
            thread_id, "why?", "U1", rubric=RUBRIC, turn_id=turn, wait_until=time.time() + 60
        )
    assert result.rubric_status == "satisfied"
    agent_calls = [r for r in gemini.requests if r.model == MODEL]
    assert len(agent_calls) == 1  # the answer was not drafted again


async def test_past_its_wait_the_turn_ends_saying_it_was_the_quota(
    guarded: Open, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(Reply.quota(30))
    async with guarded() as investigator:
        result = await investigator.investigate(
            thread_id, "why?", "U1", turn_id=f"{thread_id}@1", wait_until=time.time() + 10
        )
    assert result.status == "failed"
    assert "quota" in result.answer and "MODEL_WAIT_MAX" in result.answer


async def test_a_spent_thread_budget_ends_the_turn_with_a_message_and_shows_on_metrics(
    guarded: Open,
    gemini: GeminiSimulator,
    thread_id: str,
    redis_client: aioredis.Redis,
    prefix: str,
) -> None:
    gemini.script(Reply.text(ANSWER), Reply.text("never asked"))
    stops = _sample("tracegate_token_budget_stops_total", budget="thread")
    async with guarded(thread_token_budget=1_000_000) as investigator:
        first = await investigator.investigate(thread_id, "why?", "U1")
    spent = int(await redis_client.get(f"{prefix}:tokens:thread:{thread_id}") or 0)
    assert first.status == "answered" and spent > 0
    # The same thread under a budget the next call would pass.
    async with guarded(thread_token_budget=spent + 50) as investigator:
        second = await investigator.investigate(thread_id, "and what changed?", "U1")
    assert second.status == "incomplete" and second.stop_reason == "token_budget"
    assert "THREAD_TOKEN_BUDGET" in second.answer and not second.notices  # said once
    assert len(gemini.requests) == 1  # stopped before the call, not after it
    assert _sample("tracegate_token_budget_stops_total", budget="thread") == stops + 1


async def test_the_result_names_the_fallback_model_when_it_answered(
    guarded: Open, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.outage(60, model=MODEL, retry_delay_s=6)
    gemini.script(Reply.text(ANSWER), model=FALLBACK)
    fallback = f"google_genai:{FALLBACK}"
    uses = _sample(
        "tracegate_model_fallback_total",
        model=f"google_genai:{MODEL}",
        fallback=fallback,
        role="agent",
    )
    async with guarded(fallback_model=fallback, fallback_after_s=0) as investigator:
        result = await investigator.investigate(
            thread_id, "why?", "U1", wait_until=time.time() + 60
        )
    assert result.status == "answered" and result.model == fallback
    assert (
        _sample(
            "tracegate_model_fallback_total",
            model=f"google_genai:{MODEL}",
            fallback=fallback,
            role="agent",
        )
        == uses + 1
    )
    assert (
        _sample("tracegate_model_tokens_total", model=fallback, role="agent", direction="input") > 0
    )
