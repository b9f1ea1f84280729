"""Model capacity at the call: the simulator's quota windows and overload as the real client
sees them, the shared limit, quota errors that become waits, the fallback, the budgets."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from langchain_core.messages import HumanMessage
from langchain_google_genai import ChatGoogleGenerativeAI

from gates.cluster import KubernetesCluster
from gates.config import ActionPolicy
from gates.pipeline import build_pipeline
from graph.capacity import (
    BudgetExceeded,
    CallScope,
    CapacityLimits,
    ModelBusy,
    ModelGuard,
    call_scope,
    capacity_reason,
    estimate_tokens,
    retry_delay_s,
)
from graph.config import ModelSpec
from graph.model import make_chat_model
from sandbox import GeminiSimulator, Reply
from tests.conftest import MODEL
from tests.gates_fixtures import APPROVER, SAFE
from tests.proposals import propose_rollback

FALLBACK = "gemini-3.8-flash-lite"


@pytest.fixture
def prefix() -> str:
    return f"cap-{uuid.uuid4().hex[:8]}"


def _plain(gemini: GeminiSimulator, retries: int = 1) -> ChatGoogleGenerativeAI:
    return ChatGoogleGenerativeAI(
        model=MODEL, base_url=gemini.url, google_api_key="k", max_retries=retries
    )


def _guarded(
    model_spec: ModelSpec,
    redis: aioredis.Redis,
    prefix: str,
    setting: str = "LLM_MODEL",
    **limits: object,
) -> tuple[ModelGuard, object]:
    guard = ModelGuard(redis, prefix, CapacityLimits(**limits))  # type: ignore[arg-type]
    return guard, make_chat_model(model_spec, setting, guard, inline=setting == "JUDGE_MODEL")


# --- the simulator, through the real client --------------------------------------------------
async def test_a_spent_request_quota_is_a_429_with_retry_info_the_client_keeps_as_cause(
    gemini: GeminiSimulator,
) -> None:
    gemini.limit(MODEL, rpm=1, window_s=30)
    gemini.script(Reply.text("first"), Reply.text("second"))
    client = _plain(gemini)
    assert (await client.ainvoke("hi")).text == "first"
    with pytest.raises(Exception) as raised:
        await client.ainvoke("again")
    assert type(raised.value).__name__ == "GoogleRateLimitError"
    cause = raised.value.__cause__
    assert getattr(cause, "code", None) == 429
    assert cause.details["error"]["status"] == "RESOURCE_EXHAUSTED"  # type: ignore[union-attr]
    assert capacity_reason(raised.value) == "quota"
    delay = retry_delay_s(raised.value)
    assert delay is not None and 29 <= delay <= 30  # the first request leaves the window then
    assert [r.status for r in gemini.requests] == [200, 429]
    assert gemini.pending == 1  # a refused request consumes no scripted reply


async def test_a_token_quota_refuses_a_request_that_would_pass_it(gemini: GeminiSimulator) -> None:
    gemini.limit(MODEL, tpm=50, window_s=30)
    gemini.script(Reply.text("short"))
    client = _plain(gemini)
    await client.ainvoke("hi")
    with pytest.raises(Exception) as raised:
        await client.ainvoke("x" * 400)
    violation = raised.value.__cause__.details["error"]["details"][0]["violations"][0]  # type: ignore[union-attr]
    assert "InputTokens" in violation["quotaId"]


async def test_an_outage_answers_429_until_it_ends(gemini: GeminiSimulator) -> None:
    gemini.outage(30, retry_delay_s=6)
    gemini.script(Reply.text("back"))
    client = _plain(gemini)
    with pytest.raises(Exception) as raised:
        await client.ainvoke("hi")
    assert retry_delay_s(raised.value) == 6.0
    gemini.outage(0)  # it ends (ended by the test, not by the clock: no race with a slow call)
    assert (await client.ainvoke("hi")).text == "back"


async def test_an_overload_is_a_503_unavailable_with_retry_after(gemini: GeminiSimulator) -> None:
    gemini.outage(5, status=503, retry_delay_s=3)
    with pytest.raises(Exception) as raised:
        await _plain(gemini).ainvoke("hi")
    assert capacity_reason(raised.value) == "overload"
    assert retry_delay_s(raised.value) == 3.0


# --- quota errors wait ----------------------------------------------------------------------
async def test_a_quota_error_is_a_wait_until_the_retry_delay_not_an_sdk_retry(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.outage(30, retry_delay_s=6)
    spec = model_spec.model_copy(update={"max_retries": 2})
    _, model = _guarded(spec, redis_client, prefix)
    before = time.time()
    with pytest.raises(ModelBusy) as busy:
        await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]
    assert busy.value.reason == "quota"
    assert 5.5 <= busy.value.retry_at - before <= 7
    assert len(gemini.requests) == 1  # LLM_MAX_RETRIES=2 did not spend them on the 429


async def test_an_sdk_retry_still_covers_a_500(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.script(Reply.error(500), Reply.text("fine"))
    spec = model_spec.model_copy(update={"max_retries": 2})
    _, model = _guarded(spec, redis_client, prefix)
    assert (await model.ainvoke([HumanMessage("hi")])).text == "fine"  # type: ignore[attr-defined]


async def test_an_overload_without_retry_after_waits_a_default_delay(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.outage(30, status=503)
    _, model = _guarded(model_spec, redis_client, prefix)
    with pytest.raises(ModelBusy) as busy:
        await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]
    assert busy.value.reason == "overload"
    assert busy.value.retry_at > time.time() + 5


@pytest.mark.parametrize("retry_after", [math.inf, 1e300])
async def test_a_retry_after_of_infinity_is_a_wait_of_at_most_a_day_not_an_overflow(
    gemini: GeminiSimulator,
    model_spec: ModelSpec,
    redis_client: aioredis.Redis,
    prefix: str,
    retry_after: float,
) -> None:
    gemini.outage(30, status=503, retry_delay_s=retry_after)  # Retry-After: inf, 1e+300
    _, model = _guarded(model_spec, redis_client, prefix)
    with pytest.raises(ModelBusy) as busy:
        await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]
    assert busy.value.reason == "overload"
    assert 86000 <= busy.value.retry_at - time.time() <= 86400


async def test_the_judge_waits_in_place_for_the_retry_delay(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.outage(30, retry_delay_s=1)
    gemini.script(Reply.text("verdict"))
    _, judge = _guarded(model_spec, redis_client, prefix, "JUDGE_MODEL")

    async def end_the_outage_once_refused() -> None:
        # The outage ends once it has refused the judge (an event, not a 0.5 s window that
        # a slow start of the call could miss); the judge's own wait is the retry delay.
        await gemini.wait_for_request(MODEL, timeout_s=30)
        gemini.outage(0)

    ending = asyncio.create_task(end_the_outage_once_refused())
    started = time.monotonic()
    assert (await judge.ainvoke([HumanMessage("hi")])).text == "verdict"  # type: ignore[attr-defined]
    assert time.monotonic() - started >= 0.9
    await ending
    assert [r.status for r in gemini.requests] == [429, 200]


async def test_the_judges_wait_for_a_full_window_ends_at_model_wait_max_and_fail_mode_decides(
    gemini: GeminiSimulator,
    model_spec: ModelSpec,
    redis_client: aioredis.Redis,
    prefix: str,
    cluster: KubernetesCluster,
) -> None:
    """A window full for 30 s and MODEL_WAIT_MAX=1s: the judge stops waiting within about
    a second and JUDGE_FAIL_MODE=closed refuses, instead of holding the proposal (and the
    turn, its worker slot and the thread's lease) until the window has room."""
    gemini.script(Reply.text("the window's one call"), SAFE)
    limits = {"rpm": 1, "window_s": 30, "wait_max_s": 1}
    guard, agent = _guarded(model_spec, redis_client, prefix, **limits)
    judge = make_chat_model(model_spec, "JUDGE_MODEL", guard, inline=True)
    await _answered(agent, CallScope(thread="earlier"))  # the window is full for 30 s
    pipeline = build_pipeline(
        redis_client,
        cluster,
        ActionPolicy(actions_enabled=True, approvers=frozenset({APPROVER})),
        judge,
        prefix=prefix,
    )
    started = time.monotonic()
    refused = await asyncio.wait_for(propose_rollback(pipeline), timeout=15)
    assert time.monotonic() - started < 5
    assert refused.status == "refused"
    assert refused.judge is not None and not refused.judge.available
    assert "JUDGE_FAIL_MODE=closed" in refused.judge.reason
    assert len(gemini.requests) == 1  # the judge's call never went


# --- the shared limit -----------------------------------------------------------------------
async def test_the_limit_is_shared_by_every_process(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_url: str, prefix: str
) -> None:
    """Two guards on two Redis connections stand for two processes: together they make no
    more than MODEL_RPM calls in the window."""
    gemini.script(*[Reply.text("ok")] * 10)
    first, second = aioredis.from_url(redis_url), aioredis.from_url(redis_url)
    try:
        limits = {"rpm": 3, "window_s": 30, "inline_wait_s": 0}
        _, one = _guarded(model_spec, first, prefix, **limits)
        _, other = _guarded(model_spec, second, prefix, **limits)
        for model in (one, other, one):
            await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]
        for model in (other, one):
            with pytest.raises(ModelBusy) as busy:
                await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]
            assert busy.value.reason == "limit"
            assert 25 <= busy.value.retry_at - time.time() <= 31
    finally:
        await first.aclose()
        await second.aclose()
    assert len(gemini.requests) == 3


async def test_a_short_limiter_wait_is_waited_in_place(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.script(*[Reply.text("ok")] * 3)
    _, model = _guarded(model_spec, redis_client, prefix, rpm=2, window_s=1, inline_wait_s=2)
    started = time.monotonic()
    for _ in range(3):
        await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]
    assert time.monotonic() - started >= 0.9
    assert gemini.max_in_window(1.0) <= 2


async def test_tokens_are_estimated_then_corrected_from_the_usage_metadata(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.script(Reply.text("ok"))
    guard, model = _guarded(model_spec, redis_client, prefix, tpm=100_000, window_s=30)
    await model.ainvoke([HumanMessage("hi " * 100)])  # type: ignore[attr-defined]
    logged = await redis_client.zrange(guard.limiter.key(model_spec.model), 0, -1)
    assert len(logged) == 1
    assert int(logged[0].decode().rsplit(":", 1)[1]) == gemini.requests[0].prompt_tokens


async def test_a_token_limit_makes_a_big_call_wait(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.script(Reply.text("ok"))
    _, model = _guarded(model_spec, redis_client, prefix, tpm=300, window_s=30, inline_wait_s=0)
    await model.ainvoke([HumanMessage("x" * 800)])  # type: ignore[attr-defined]
    with pytest.raises(ModelBusy):
        await model.ainvoke([HumanMessage("x" * 800)])  # type: ignore[attr-defined]
    assert len(gemini.requests) == 1


# --- the fallback ---------------------------------------------------------------------------
async def test_the_fallback_answers_once_the_primary_stays_exhausted(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.outage(30, model=MODEL, retry_delay_s=6)
    gemini.script(Reply.text("from the fallback"), model=FALLBACK)
    _, model = _guarded(
        model_spec,
        redis_client,
        prefix,
        fallback_model=f"google_genai:{FALLBACK}",
        fallback_after_s=0.5,
    )
    scope = CallScope()
    with call_scope(scope):
        with pytest.raises(ModelBusy):  # exhausted since now: not for long enough yet
            await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]
        await asyncio.sleep(0.6)
        answer = await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]
    assert answer.text == "from the fallback"
    assert scope.answered_by == {"agent": f"google_genai:{FALLBACK}"}
    assert [r.model for r in gemini.requests] == [MODEL, MODEL, FALLBACK]


# --- budgets --------------------------------------------------------------------------------
async def test_a_spent_thread_budget_stops_the_next_call(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.script(*[Reply.text("ok")] * 3)
    _, model = _guarded(model_spec, redis_client, prefix, thread_token_budget=60)
    with call_scope(CallScope(thread=f"T:C:{prefix}")):
        await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]
        with pytest.raises(BudgetExceeded) as stopped:
            await model.ainvoke([HumanMessage("x" * 200)])  # type: ignore[attr-defined]
    assert stopped.value.budget == "thread"
    assert len(gemini.requests) == 1
    with call_scope(CallScope(thread=f"T:C:{prefix}-other")):  # another thread's is its own
        await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]


async def test_a_spent_channel_budget_stops_every_thread_of_the_channel(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.script(*[Reply.text("ok")] * 3)
    _, model = _guarded(model_spec, redis_client, prefix, channel_daily_token_budget=60)
    with call_scope(CallScope(thread="a", channel=f"T:{prefix}")):
        await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]
    with call_scope(CallScope(thread="b", channel=f"T:{prefix}")), pytest.raises(BudgetExceeded):
        await model.ainvoke([HumanMessage("x" * 200)])  # type: ignore[attr-defined]


@pytest.mark.parametrize("budget", ["thread", "channel", "automatic"])
async def test_concurrent_calls_share_a_budget_only_as_far_as_it_fits(
    gemini: GeminiSimulator,
    model_spec: ModelSpec,
    redis_client: aioredis.Redis,
    prefix: str,
    budget: str,
) -> None:
    """Eight calls at once against a budget that fits three estimates: three are made, five
    stop before theirs — each reserves its estimate as it checks, so none sees the room the
    others are about to spend."""
    estimate = estimate_tokens([HumanMessage("hi")])
    slow = Reply(parts=({"text": "ok"},), delay_s=0.5)  # all eight check before one answers
    gemini.script(*[slow] * 8)
    setting = {
        "thread": "thread_token_budget",
        "channel": "channel_daily_token_budget",
        "automatic": "automatic_daily_token_budget",
    }[budget]
    _, model = _guarded(model_spec, redis_client, prefix, **{setting: 3 * estimate + 1})
    scope = {"thread": f"T:C:{prefix}", "channel": f"T:{prefix}", "automatic": True}
    outcomes = await asyncio.gather(
        *[_answered(model, CallScope(**{budget: scope[budget]})) for _ in range(8)],
        return_exceptions=True,
    )
    stopped = [o for o in outcomes if isinstance(o, BudgetExceeded)]
    assert len(stopped) == 5 and {s.budget for s in stopped} == {budget}
    assert outcomes.count(None) == 3
    assert len(gemini.requests) == 3
    spent = [int(v) async for v in _counters(redis_client, prefix)]
    # what the three reported (input and output), not their estimates nor the refused ones'
    assert spent == [sum(r.prompt_tokens + 1 for r in gemini.requests)]


async def test_a_failed_call_gives_its_reserved_tokens_back(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.script(Reply.error(400, "bad request"))
    _, model = _guarded(model_spec, redis_client, prefix, channel_daily_token_budget=10_000)
    with pytest.raises(Exception, match="bad request"):
        await _answered(model, CallScope(thread="t", channel=f"T:{prefix}"))
    assert sum([int(v) async for v in _counters(redis_client, prefix)]) == 0


async def _counters(redis: aioredis.Redis, prefix: str) -> AsyncIterator[bytes]:
    async for key in redis.scan_iter(f"{prefix}:tokens:*"):
        yield await redis.get(key)


# --- who goes first ---------------------------------------------------------------------
async def _refused(model: object, scope: CallScope) -> ModelBusy:
    with call_scope(scope), pytest.raises(ModelBusy) as busy:
        await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]
    return busy.value


async def _answered(model: object, scope: CallScope) -> None:
    with call_scope(scope):
        await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]


async def _until(at: float) -> None:
    await asyncio.sleep(max(0.0, at - time.time()) + 0.05)


async def test_a_running_turns_grader_goes_before_a_new_turns_first_call(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.script(Reply.text("first"), Reply.text("graded"), Reply.text("new turn"))
    limits = {"rpm": 1, "window_s": 1, "inline_wait_s": 0}
    guard = ModelGuard(redis_client, prefix, CapacityLimits(**limits))  # type: ignore[arg-type]
    agent = make_chat_model(model_spec, "LLM_MODEL", guard)
    grader = make_chat_model(model_spec, "GRADER_MODEL", guard)
    await _answered(agent, CallScope(thread="earlier"))  # the window is full
    new = await _refused(agent, CallScope(thread="new"))  # asked first …
    graded = await _refused(grader, CallScope(thread="running", under_way=True))
    await _until(max(new.retry_at, graded.retry_at))
    # … but when the window has room for one, the turn under way takes it.
    await _refused(agent, CallScope(thread="new"))
    await _answered(grader, CallScope(thread="running", under_way=True))
    later = await _refused(agent, CallScope(thread="new"))
    await _until(later.retry_at)
    await _answered(agent, CallScope(thread="new"))
    assert [r.status for r in gemini.requests] == [200, 200, 200]  # nothing was refused


async def test_one_threads_follow_ups_queue_behind_another_threads_question(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.script(*[Reply.text("ok")] * 3)
    _, agent = _guarded(model_spec, redis_client, prefix, rpm=1, window_s=1, inline_wait_s=0)
    await _answered(agent, CallScope(thread="busy-thread"))
    other = await _refused(agent, CallScope(thread="quiet-thread"))
    follow_up = await _refused(agent, CallScope(thread="busy-thread"))  # its next question
    await _until(max(other.retry_at, follow_up.retry_at))
    await _refused(agent, CallScope(thread="busy-thread"))  # first to ask again, still second
    await _answered(agent, CallScope(thread="quiet-thread"))


async def test_a_waiter_that_never_comes_back_is_forgotten(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.script(*[Reply.text("ok")] * 2)
    guard, agent = _guarded(model_spec, redis_client, prefix, rpm=1, window_s=1, inline_wait_s=0)
    guard.limiter.WAITER_GRACE_S = 0.5
    await _answered(agent, CallScope(thread="first"))
    gone = await _refused(agent, CallScope(thread="dead-process", under_way=True))
    await _until(gone.retry_at + 0.5)
    await _answered(agent, CallScope(thread="alive"))


async def test_every_capacity_key_expires(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.outage(30, model=MODEL, retry_delay_s=1)
    gemini.script(*[Reply.text("ok")] * 3)
    _, agent = _guarded(
        model_spec,
        redis_client,
        prefix,
        rpm=2,  # the refused call counts: the API may count it too
        window_s=5,
        inline_wait_s=0,
        thread_token_budget=10_000,
        channel_daily_token_budget=10_000,
        fallback_model=f"google_genai:{FALLBACK}",
    )
    seen: dict[str, int] = {}

    async def look() -> None:
        async for raw in redis_client.scan_iter(f"{prefix}:*"):
            seen[raw.decode()] = await redis_client.pttl(raw)

    with pytest.raises(ModelBusy):  # the primary refuses: marked exhausted
        await _answered(agent, CallScope(thread="t", channel="T:C"))
    await look()
    gemini.outage(0)  # over
    await _answered(agent, CallScope(thread="t", channel="T:C"))  # logged, spent
    await _refused(agent, CallScope(thread="u", channel="T:C"))  # waits: ranked
    await look()
    assert {k.split(":")[1] for k in seen} == {"model-rate", "tokens", "model-exhausted"}
    assert {k for k in seen if k.endswith(":waiting")}
    assert not [key for key, ttl in seen.items() if ttl <= 0], seen


async def test_an_alerts_investigation_waits_behind_a_persons_question(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.script(*[Reply.text("ok")] * 3)
    _, agent = _guarded(model_spec, redis_client, prefix, rpm=1, window_s=1, inline_wait_s=0)
    await _answered(agent, CallScope(thread="earlier"))  # the window is full
    alerted = await _refused(agent, CallScope(thread="alert", under_way=True, automatic=True))
    person = await _refused(agent, CallScope(thread="person"))  # asked later …
    await _until(max(alerted.retry_at, person.retry_at))
    # … but the person's question takes the room first, even over an alert's turn under way
    await _refused(agent, CallScope(thread="alert", under_way=True, automatic=True))
    await _answered(agent, CallScope(thread="person"))


async def test_automatic_investigations_stop_at_their_own_daily_budget(
    gemini: GeminiSimulator, model_spec: ModelSpec, redis_client: aioredis.Redis, prefix: str
) -> None:
    gemini.script(*[Reply.text("ok")] * 3)
    _, model = _guarded(model_spec, redis_client, prefix, automatic_daily_token_budget=60)
    with call_scope(CallScope(thread="alert-1", automatic=True)):
        await model.ainvoke([HumanMessage("hi")])  # type: ignore[attr-defined]
    with (
        call_scope(CallScope(thread="alert-2", automatic=True)),
        pytest.raises(BudgetExceeded) as stopped,
    ):
        await model.ainvoke([HumanMessage("x" * 200)])  # type: ignore[attr-defined]
    assert stopped.value.budget == "automatic"
    with call_scope(CallScope(thread="a-person")):  # people's questions are not counted
        await model.ainvoke([HumanMessage("x" * 200)])  # type: ignore[attr-defined]
