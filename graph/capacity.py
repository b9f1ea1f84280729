"""Model capacity: one limit for every process, and quota errors that wait instead of failing.

Every model call (agent, grader, judge) goes through `ModelGuard.call`:

1. **Budgets.** A turn whose thread or channel has spent its token budget stops
   (`BudgetExceeded`) before the call is made. The call's estimate is reserved as it is
   checked (one step: concurrent turns cannot overspend) and corrected to its usage after.
2. **The shared limit.** Requests and input tokens per window, per model, taken from one
   Redis log that every `serve` and `worker` shares (`_ACQUIRE`, a sliding window on Redis's
   clock). The call's input tokens are estimated before it and corrected from the response's
   usage metadata after it. A short wait is waited in place; a longer one is a `ModelBusy`.
3. **Quota and overload errors** (`429 RESOURCE_EXHAUSTED`, `503 UNAVAILABLE`) are read for
   the delay the API asks for (`RetryInfo.retryDelay` in the error's details, or
   `Retry-After`) and become a `ModelBusy` with the time of the next try — never a failure.
   The SDK's own retries skip these two codes: they back off in seconds and ignore the delay.
   Once a model has been exhausted for `fallback_after_s`, the fallback model answers.

A `ModelBusy` unwinds the turn: the bot hands the turn back to the queue for the next try
and it resumes from its checkpoint (the interrupted super-step runs again). The judge
cannot unwind (it runs inside an action proposal), so it waits in place (`inline`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import redis.asyncio as aioredis
from langchain_core.messages import BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatResult
from pydantic import Field, field_validator

from gates.config import NOT_A_SETTING, Seconds, SettingsGroup
from graph.metrics import (
    BUDGET_STOPS,
    FALLBACK_USES,
    LIMITER_DELAY,
    QUOTA_ERRORS,
)

log = logging.getLogger(__name__)

Reason = Literal["quota", "overload", "limit"]
Budget = Literal["thread", "channel", "automatic"]
# What the SDK may still retry by itself: not 429 and 503, which wait for their delay here.
SDK_RETRIED_STATUSES = (408, 500, 502, 504)
_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")  # a google.protobuf.Duration in JSON
# The longest delay believed: `Retry-After: inf` (or 1e300) would overflow the next try's
# time; a day is past MODEL_WAIT_MAX's maximum, so such a turn ends saying it waited.
MAX_RETRY_DELAY_S = 86400.0


class CapacityLimits(SettingsGroup):
    """The shared limit and the waiting policy (MODEL_* settings)."""

    rpm: int = Field(
        default=0,
        ge=0,
        description=(
            "Model requests per `MODEL_RATE_WINDOW`, per model, for all `serve` and `worker` "
            "processes together (one limit in Redis), taken before every agent, grader and judge "
            "call. Set it a little under the model's quota. `0`: no limit."
        ),
    )
    tpm: int = Field(
        default=0,
        ge=0,
        description=(
            "Input tokens per `MODEL_RATE_WINDOW`, per model, shared the same way; a call's "
            "tokens are estimated (4 characters a token) before it and corrected from the "
            "response's usage after it. `0`: no limit."
        ),
    )
    window_s: Seconds = Field(
        default=60.0,
        ge=1,
        le=3600,
        validation_alias="MODEL_RATE_WINDOW",
        description=(
            "The window of `MODEL_RPM` / `MODEL_TPM` (the API's quotas are per minute; a call "
            "counts in it for a further 2 %, at least 0.5 s, as the API sees it a moment after it "
            "is sent)."
        ),
    )
    wait_max_s: Seconds = Field(
        default=600.0,
        ge=0,
        le=86400,
        validation_alias="MODEL_WAIT_MAX",
        description=(
            "How long a turn waits for model capacity (a 429 or 503 from the API, or the shared "
            'limit), counted from its first wait. While it waits its placeholder says "Waiting '
            'for model capacity — next try at HH:MM:SS UTC" and its worker slot is free for other '
            "threads; it then resumes from its checkpoint. Past it the turn ends with a message "
            "saying it was the model's quota and what to do."
        ),
    )
    # A wait this short is waited holding the worker slot; longer ones hand the turn back.
    inline_wait_s: float = Field(default=2.0, ge=0, json_schema_extra=NOT_A_SETTING)
    fallback_model: str | None = Field(
        default=None,
        validation_alias="LLM_FALLBACK_MODEL",
        description=(
            "`provider:model` answering when the primary model stays exhausted (429/503) for "
            "`MODEL_FALLBACK_AFTER`; the result records the model that answered (`model`)."
        ),
    )
    fallback_after_s: Seconds = Field(
        default=60.0,
        ge=0,
        le=3600,
        validation_alias="MODEL_FALLBACK_AFTER",
        description=(
            "How long the primary must have been exhausted (since its first quota or overload "
            "error, across processes) before the fallback answers."
        ),
    )
    thread_token_budget: int = Field(
        default=0,
        ge=0,
        validation_alias="THREAD_TOKEN_BUDGET",
        description=(
            "Tokens (input and output, all roles) one thread may spend over its life; a turn that "
            "would exceed it stops before its next model call with a message (not an error), ⚠️. "
            "`0`: no budget."
        ),
    )
    channel_daily_token_budget: int = Field(
        default=0,
        ge=0,
        validation_alias="CHANNEL_DAILY_TOKEN_BUDGET",
        description="Tokens one channel may spend per UTC day, the same way. `0`: no budget.",
    )
    automatic_daily_token_budget: int = Field(
        default=2_000_000,
        ge=0,
        validation_alias="AUTO_INVESTIGATION_DAILY_TOKEN_BUDGET",
        description=(
            "Tokens automatic investigations may spend per UTC day, all channels together "
            "(people's questions are not counted). `0`: no budget of their own."
        ),
    )

    @field_validator("fallback_model")
    @classmethod
    def _fallback_model(cls, value: str | None) -> str | None:
        if value and not value.startswith("google_genai:"):
            raise ValueError(f"{value!r} is not of the form google_genai:<model>")
        return value or None


class ModelBusy(Exception):
    """The model has no capacity now: try again at `retry_at` (epoch seconds)."""

    def __init__(self, model: str, retry_at: float, reason: Reason) -> None:
        self.model, self.retry_at, self.reason = model, retry_at, reason
        at = datetime.fromtimestamp(retry_at, UTC).strftime("%H:%M:%S")
        super().__init__(f"{model}: {reason}; next try at {at} UTC")


class BudgetExceeded(Exception):
    """A token budget is spent: the turn ends with a message, not an error."""

    def __init__(self, budget: Budget, limit: int, spent: int) -> None:
        self.budget, self.limit, self.spent = budget, limit, spent
        super().__init__(f"{budget} token budget {limit} spent ({spent})")


# --- reading the API's errors --------------------------------------------------------------
def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def capacity_reason(exc: BaseException) -> Reason | None:
    """'quota' for a 429 / RESOURCE_EXHAUSTED, 'overload' for a 503 / UNAVAILABLE, in the
    exception or what it was raised from (langchain-google-genai keeps the SDK's error as
    `__cause__`); None for anything else."""
    for error in _chain(exc):
        code, status = getattr(error, "code", None), getattr(error, "status", None)
        if code == 429 or status == "RESOURCE_EXHAUSTED":
            return "quota"
        if code == 503 or status == "UNAVAILABLE":
            return "overload"
    return None


def retry_delay_s(exc: BaseException) -> float | None:
    """The delay the API asked for: `RetryInfo.retryDelay` in the error's details, else the
    response's `Retry-After` (seconds); None when it named none."""
    for error in _chain(exc):
        details = getattr(error, "details", None)
        body = details.get("error", details) if isinstance(details, dict) else {}
        for detail in body.get("details") or [] if isinstance(body, dict) else []:
            if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
                found = _DELAY.match(str(detail.get("retryDelay", "")))
                if found:
                    return min(float(found[1]), MAX_RETRY_DELAY_S)
        headers = getattr(getattr(error, "response", None), "headers", None)
        if headers is not None:
            value = headers.get("retry-after") or headers.get("Retry-After")
            if value is not None:
                try:
                    delay = float(value)
                except ValueError:  # an HTTP date: rare from this API
                    continue
                if not math.isnan(delay):  # else not seconds: the default delay applies
                    return min(max(0.0, delay), MAX_RETRY_DELAY_S)
    return None


# --- the turn a call belongs to ------------------------------------------------------------
@dataclass
class CallScope:
    """What the guard knows of the turn making the calls (set by the runner)."""

    thread: str | None = None
    channel: str | None = None  # the channel's daily budget is counted under this key
    under_way: bool = False  # a call of this turn was made (or it resumed): it goes first
    automatic: bool = False  # no one asked (an alert did): it goes after people's calls
    calls: int = 0  # calls answered in this run
    answered_by: dict[str, str] = field(default_factory=dict)  # role → the model that answered


_SCOPE: ContextVar[CallScope | None] = ContextVar("tracegate_call_scope", default=None)


@contextmanager
def call_scope(scope: CallScope) -> Iterator[CallScope]:
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def estimate_tokens(messages: list[BaseMessage], extra: object = None) -> int:
    """About 4 characters a token over what is sent: the messages as langchain-core
    estimates them, and the tool declarations (in the provider's own form: serialised)."""
    declared = math.ceil(len(json.dumps(extra, default=str)) / 4) if extra else 0
    return max(1, count_tokens_approximately(messages) + declared)


# --- the shared limit ----------------------------------------------------------------------
# KEYS[1]: the model's log, a sorted set of calls granted in the window (member
# "<call id>:<input tokens>", score: Redis's time in ms). KEYS[2]: the calls waiting for the
# model, by rank; KEYS[3]: when each waiter is forgotten if it does not come back.
# ARGV: window ms, rpm, tpm, call id, estimated tokens, waiter, class (0: a call of a turn
# under way, 1: a new turn's first call, 2: an automatic investigation's call), grace ms.
#
# A call goes when the window has room for it *and* for every waiter ranked before it (each
# counted as one request and as this call's tokens): a turn under way (its grader, its judge,
# its next agent step) before any new turn's first call; within a class, first come first
# served — and since a thread runs one turn at a time, a thread has at most one waiter, so
# one thread's follow-ups queue behind the others' questions instead of starving them. A
# refused call is told when its place in the window frees, keeps its rank (the first one it
# got) while it waits away, and is forgotten `grace` after that time if it does not come
# back (a dead process). A call bigger than the whole TPM is granted into an empty window.
# The log keeps only the window (trimmed every call, expires with it): at most RPM entries.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window, rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tokens, waiter = tonumber(ARGV[5]), ARGV[6]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
if #gone > 0 then
    redis.call('ZREM', KEYS[2], unpack(gone))
    redis.call('ZREM', KEYS[3], unpack(gone))
end
local rank = redis.call('ZSCORE', KEYS[2], waiter)
-- in microseconds since 2020 (a class is 1e15 of them, ~31 years), so that two calls
-- refused in the same millisecond still keep the order they came in
local arrived = (tonumber(t[1]) - 1577836800) * 1000000 + tonumber(t[2])
rank = rank and tonumber(rank) or (tonumber(ARGV[7]) * 1e15 + arrived)
local ahead = redis.call('ZCOUNT', KEYS[2], '-inf', '(' .. string.format('%d', rank))
local log = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local n = #log / 2
local function frees(i)  -- when the i-th oldest call (1-based) leaves the window
    if i > n then return window end
    return tonumber(log[2 * i]) + window - now
end
local wait = 0
if rpm > 0 and n + ahead >= rpm then
    wait = frees(n + ahead - rpm + 1)
end
if tpm > 0 and n > 0 then
    local used = 0
    for i = 1, n do used = used + tonumber(string.match(log[2 * i - 1], ':(%d+)$')) end
    local needed = used + tokens * (ahead + 1) - tpm
    if needed > 0 then
        local freed, fits = 0, frees(n + 1)
        for i = 1, n do
            freed = freed + tonumber(string.match(log[2 * i - 1], ':(%d+)$'))
            if freed >= needed then
                fits = frees(i)
                break
            end
        end
        wait = math.max(wait, fits)
    end
end
if wait > 0 then
    redis.call('ZADD', KEYS[2], 'NX', rank, waiter)
    redis.call('ZADD', KEYS[3], now + wait + tonumber(ARGV[8]), waiter)
    redis.call('PEXPIRE', KEYS[2], window + wait + tonumber(ARGV[8]))
    redis.call('PEXPIRE', KEYS[3], window + wait + tonumber(ARGV[8]))
    return {0, wait}
end
redis.call('ZREM', KEYS[2], waiter)
redis.call('ZREM', KEYS[3], waiter)
redis.call('ZADD', KEYS[1], now, ARGV[4] .. ':' .. ARGV[5])
redis.call('PEXPIRE', KEYS[1], window)
return {1, 0}
"""

# A granted call's tokens corrected from the response (same place in the window).
_CORRECT = """
local at = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not at then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], at, ARGV[2])
return 1
"""


# Who goes first when calls wait for the window: a turn under way, then a new turn's first
# call, then calls of investigations no one asked for (an alert's), whatever their stage.
FIRST, NEW, LATER = 0, 1, 2


class SharedLimiter:
    """Requests and input tokens per window per model, for every process at once."""

    # Counted in the window a little longer than the API counts it: a call reaches the API
    # some time after its grant, and that time varies (a new connection, a busy process).
    MARGIN = 0.02
    MARGIN_MIN_S = 0.5
    # A waiter handed back to the queue comes back about when it was told (saq's scheduler,
    # a worker slot, the thread's lease); one not back this long after is forgotten.
    WAITER_GRACE_S = 10.0

    def __init__(self, redis: aioredis.Redis, prefix: str, limits: CapacityLimits) -> None:
        self.redis, self.prefix, self.limits = redis, prefix, limits
        self._acquire = redis.register_script(_ACQUIRE)
        self._correct = redis.register_script(_CORRECT)

    def key(self, model: str) -> str:
        # One key per model, the same in every process: that is what makes the limit shared.
        return f"{self.prefix}:model-rate:{model}"

    async def try_acquire(
        self, model: str, call_id: str, tokens: int, waiter: str = "", rank: int = 1
    ) -> float:
        """0 when the call may go now (and is logged); else seconds until its place in the
        window frees (`waiter` keeps its place meanwhile: one id per turn and call)."""
        window_s = self.limits.window_s
        window_ms = int((window_s + max(window_s * self.MARGIN, self.MARGIN_MIN_S)) * 1000)
        keys = [self.key(model), f"{self.key(model)}:waiting", f"{self.key(model)}:waiting-until"]
        granted, wait_ms = await self._acquire(
            keys=keys,
            args=[
                window_ms,
                self.limits.rpm,
                self.limits.tpm,
                call_id,
                tokens,
                waiter or call_id,
                rank,
                int(self.WAITER_GRACE_S * 1000),
            ],
        )
        return 0.0 if int(granted) else max(0.001, int(wait_ms) / 1000)

    async def correct(self, model: str, call_id: str, estimated: int, actual: int) -> None:
        if actual != estimated:
            await self._correct(
                keys=[self.key(model)], args=[f"{call_id}:{estimated}", f"{call_id}:{actual}"]
            )


# --- budgets -------------------------------------------------------------------------------
# KEYS: the call's budget counters. ARGV[1]: its estimated tokens; then each key's limit and
# TTL (s). All or nothing, in one step: the estimate is reserved in every budget when it fits
# all of them, else in none, and the first it does not fit is named (1-based) with its spend.
# Checked and spent apart, concurrent turns would each see room and together overspend.
_RESERVE = """
local tokens = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
    local used = tonumber(redis.call('GET', key) or '0')
    if used + tokens > tonumber(ARGV[2 * i]) then return {i, used} end
end
for i, key in ipairs(KEYS) do
    redis.call('INCRBY', key, tokens)
    redis.call('EXPIRE', key, ARGV[2 * i + 1])
end
return {0, 0}
"""


# --- the guard -----------------------------------------------------------------------------
class ModelGuard:
    """The shared limit, the budgets and the quota handling around each model call."""

    def __init__(
        self,
        redis: aioredis.Redis,
        prefix: str,
        limits: CapacityLimits,
        thread_ttl_s: int = 7 * 86400,
    ) -> None:
        self.redis, self.prefix, self.limits = redis, prefix, limits
        self.limiter = SharedLimiter(redis, prefix, limits)
        self.thread_ttl_s = thread_ttl_s
        self._reserve = redis.register_script(_RESERVE)

    # Tokens spent per thread (kept as long as the thread's checkpoint) and per channel per
    # UTC day (two days); a call that would go past a budget stops before it is made. A call
    # reserves its estimate first and is corrected to what it spent after (nothing, failed).
    async def _reserve_budgets(self, scope: CallScope, estimated: int) -> list[str]:
        """Hold `estimated` tokens in every budget of the call, or raise `BudgetExceeded`
        (holding nothing) when it would take one past its limit. Returns the budgets' keys
        (those of the day the call was made)."""
        keys: list[tuple[Budget, str, int, int]] = []  # (budget, key, limit, TTL in s)
        day = datetime.now(UTC).strftime("%Y%m%d")
        if self.limits.thread_token_budget and scope.thread:
            key = f"{self.prefix}:tokens:thread:{scope.thread}"
            keys.append(("thread", key, self.limits.thread_token_budget, self.thread_ttl_s))
        if self.limits.channel_daily_token_budget and scope.channel:
            key = f"{self.prefix}:tokens:channel:{scope.channel}:{day}"
            keys.append(("channel", key, self.limits.channel_daily_token_budget, 2 * 86400))
        if self.limits.automatic_daily_token_budget and scope.automatic:
            key = f"{self.prefix}:tokens:automatic:{day}"
            keys.append(("automatic", key, self.limits.automatic_daily_token_budget, 2 * 86400))
        if not keys:
            return []
        args = [estimated, *(n for _, _, limit, ttl in keys for n in (limit, ttl))]
        over, used = await self._reserve(keys=[key for _, key, _, _ in keys], args=args)
        if int(over):
            budget, _, limit, _ = keys[int(over) - 1]
            BUDGET_STOPS.labels(budget).inc()
            raise BudgetExceeded(budget, limit, int(used))
        return [key for _, key, _, _ in keys]

    async def _settle(self, held: list[str], reserved: int, spent: int) -> None:
        """Correct the `reserved` tokens `held` in those budgets to what the call spent
        (0: it failed)."""
        change = max(0, spent) - reserved
        if not held or not change:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in held:
                pipe.incrby(key, change)
            await pipe.execute()

    def _exhausted_key(self, model: str) -> str:
        return f"{self.prefix}:model-exhausted:{model}"

    async def call(
        self,
        model: str,
        role: str,
        messages: list[BaseMessage],
        extra: object,
        generate: Callable[[str], Awaitable[ChatResult]],
        *,
        fallback: str | None = None,
        inline: bool = False,
    ) -> ChatResult:
        """One model call through the budgets, the shared limit and the quota handling.

        `generate(model)` makes the call with that model (the primary, or `fallback`).
        `inline`: quota waits are waited in place (up to MODEL_WAIT_MAX), never raised.
        """
        scope = _SCOPE.get() or CallScope()
        estimated = estimate_tokens(messages, extra)
        held = await self._reserve_budgets(scope, estimated)

        async def take_capacity(name: str, call_id: str) -> None:
            """Wait for the shared limit: in place when short (or `inline`, up to
            MODEL_WAIT_MAX from the call's start), else `ModelBusy`."""
            if not (self.limits.rpm or self.limits.tpm):  # no shared limit
                return
            # One waiter per turn and call: a turn handed back keeps its place when it returns.
            waiter = f"{scope.thread}#{scope.calls}" if scope.thread else call_id
            waited = 0.0
            while True:
                first = scope.under_way or role != "agent"  # a turn under way: grader, judge, agent
                rank = LATER if scope.automatic else FIRST if first else NEW
                wait = await self.limiter.try_acquire(name, call_id, estimated, waiter, rank)
                if not wait:
                    if waited:
                        LIMITER_DELAY.labels(name, role).observe(waited)
                    return
                # Inline (the judge) waits in place, but not past MODEL_WAIT_MAX: then its
                # caller decides (JUDGE_FAIL_MODE), instead of the window holding the turn.
                retry_at = time.time() + wait
                too_long = (
                    retry_at - started > self.limits.wait_max_s
                    if inline
                    else waited + wait > self.limits.inline_wait_s
                )
                if too_long:
                    LIMITER_DELAY.labels(name, role).observe(waited + wait)
                    raise ModelBusy(name, retry_at, "limit")
                await asyncio.sleep(wait)
                waited += wait

        async def answered() -> tuple[ChatResult, str, str]:
            """The call through the shared limit and the quota handling: the result, the model
            that answered and the call's id in the limiter's log."""
            current = model
            while True:
                call_id = uuid.uuid4().hex[:16]
                try:
                    await take_capacity(current, call_id)
                    result = await generate(current)
                except ModelBusy:  # the shared limit's: inline, waited for up to MODEL_WAIT_MAX
                    raise
                except Exception as exc:
                    reason = capacity_reason(exc)
                    if reason is None:
                        raise
                    QUOTA_ERRORS.labels(current, reason).inc()
                    delay = retry_delay_s(exc)
                    retry_at = time.time() + (delay if delay is not None else 10.0)
                    if current == model and fallback and await self._exhausted_long(model):
                        log.warning(
                            "%s exhausted for MODEL_FALLBACK_AFTER; asking %s", model, fallback
                        )
                        FALLBACK_USES.labels(model, fallback, role).inc()
                        current = fallback
                        continue
                    log.info(
                        "model %s: %s (%s); next try in %.1fs",
                        current,
                        reason,
                        getattr(exc, "status", None) or type(exc).__name__,
                        retry_at - time.time(),
                    )
                    if inline and retry_at - started <= self.limits.wait_max_s:
                        await asyncio.sleep(max(0.0, retry_at - time.time()))
                        continue
                    raise ModelBusy(current, retry_at, reason) from exc
                break
            if fallback and current == model:  # the primary answers: no longer exhausted
                await self.redis.delete(self._exhausted_key(model))
            return result, current, call_id

        started = time.time()  # MODEL_WAIT_MAX counts from here
        try:
            result, current, call_id = await answered()
        except BaseException:  # a call that failed (or was cancelled) spent nothing
            await self._settle(held, estimated, 0)
            raise
        scope.under_way = True
        scope.calls += 1
        scope.answered_by[role] = current
        for generation in result.generations:  # the tokens the response reported
            usage = getattr(getattr(generation, "message", None), "usage_metadata", None)
            if usage:
                sent = int(usage.get("input_tokens", 0))
                spent = sent + int(usage.get("output_tokens", 0))
                await self.limiter.correct(current, call_id, estimated, sent)
                await self._settle(held, estimated, spent)
                break
        return result

    async def _exhausted_long(self, model: str) -> bool:
        """Mark the model exhausted (from its first error on) and say whether it has been for
        MODEL_FALLBACK_AFTER. The mark lives while errors keep coming (a window past the
        last) and goes with the first answer."""
        key = self._exhausted_key(model)
        now = time.time()
        ttl_ms = int(max(self.limits.window_s, self.limits.fallback_after_s) * 2000) + 1000
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(key, repr(now), nx=True)
            pipe.pexpire(key, ttl_ms)
            pipe.get(key)
            *_, since = await pipe.execute()
        return now - float(since or now) >= self.limits.fallback_after_s


def wait_text(retry_at: float) -> str:
    """What a waiting turn's placeholder says."""
    at = datetime.fromtimestamp(retry_at, UTC).strftime("%H:%M:%S")
    return f":hourglass_flowing_sand: Waiting for model capacity — next try at {at} UTC"
