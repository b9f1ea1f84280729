"""The circuit breaker's failure streak follows the order executions ended, not the order
they were counted: a reconciler counts a dead executor's execution late (real Redis; the
default threshold, 3 consecutive failures)."""

from __future__ import annotations

import time

import pytest

from gates.breaker import GLOBAL
from gates.model import ActionRequest
from gates.pipeline import ActionPipeline

TARGET = "shop/payment-api"


async def _count(pipeline: ActionPipeline, *executions: tuple[str, bool, float]) -> None:
    """Count (id, succeeded, ended at) in the order given."""
    for request_id, succeeded, ended in executions:
        await pipeline.breaker.record(TARGET, succeeded, request_id, ended)


async def test_a_failure_counted_late_does_not_open_a_breaker_a_newer_success_closed(
    pipeline: ActionPipeline,
) -> None:
    t = time.time() - 60
    # Ended F0, S1, F2, F3: two failures since the last success. F0's executor died, so
    # the reconciler counts it last.
    await _count(pipeline, ("S1", True, t + 1), ("F2", False, t + 2), ("F3", False, t + 3))
    await _count(pipeline, ("F0", False, t))

    state = await pipeline.breaker.state(TARGET)
    assert (state.open, state.consecutive_failures) == (False, 2)


async def test_a_success_counted_late_does_not_hide_the_failures_that_followed_it(
    pipeline: ActionPipeline,
) -> None:
    t = time.time() - 60
    # Ended S0, F1, F2, F3: three consecutive failures. S0 is counted late, between them.
    await _count(pipeline, ("F1", False, t + 1), ("F2", False, t + 2), ("S0", True, t))
    await _count(pipeline, ("F3", False, t + 3))

    state = await pipeline.breaker.state(TARGET)
    assert (state.open, state.consecutive_failures) == (True, 3)


async def test_a_success_counted_late_does_not_close_a_breaker_its_failures_opened(
    pipeline: ActionPipeline,
) -> None:
    """Only an approver closes a breaker: a success that ended among the failures that
    opened it, counted afterwards, shortens the streak and leaves the breaker open."""
    t = time.time() - 60
    await _count(pipeline, ("F1", False, t + 1), ("F2", False, t + 2), ("F3", False, t + 3))
    await _count(pipeline, ("S", True, t + 2.5))

    state = await pipeline.breaker.state(TARGET)
    assert (state.open, state.consecutive_failures) == (True, 1)


async def test_failures_that_ended_before_a_reset_do_not_reopen_the_breaker(
    pipeline: ActionPipeline,
) -> None:
    t = time.time() - 60
    await _count(pipeline, *((f"F{i}", False, t + i) for i in range(3)))
    opened = await pipeline.breaker.state(GLOBAL)
    await pipeline.breaker.reset(GLOBAL)
    await _count(pipeline, *((f"F{i}", False, t + i) for i in range(3, 6)))  # counted late

    state = await pipeline.breaker.state(GLOBAL)
    assert opened.open
    assert (state.open, state.consecutive_failures) == (False, 0)


async def test_failures_that_ended_after_a_reset_open_it_again(pipeline: ActionPipeline) -> None:
    await _count(pipeline, *((f"F{i}", False, time.time() - 60 + i) for i in range(3)))
    await pipeline.breaker.reset(TARGET)
    await _count(pipeline, *((f"G{i}", False, time.time() + i) for i in range(3)))

    state = await pipeline.breaker.state(TARGET)
    assert (state.open, state.consecutive_failures) == (True, 3)


async def test_failures_stamped_by_a_host_whose_clock_runs_ahead_do_not_reopen_a_reset(
    pipeline: ActionPipeline,
) -> None:
    """End times are Redis's clock (the transition's mark), as the reset's: a host's own
    clock, 5 s ahead here, does not decide which side of the reset an execution ended."""
    ended = [await _failed(pipeline, f"svc-{i}") for i in range(3)]
    await pipeline.breaker.reset(GLOBAL)
    for request in ended:  # counted late, by a host whose clock runs 5 s ahead
        await pipeline.count(request, at=time.time() + 5)

    state = await pipeline.breaker.state(GLOBAL)
    assert (state.open, state.consecutive_failures) == (False, 0)


async def _failed(pipeline: ActionPipeline, deployment: str) -> ActionRequest:
    """A real execution that failed; its executor died before counting it."""
    request = ActionRequest(
        action="scale",
        namespace="shop",
        deployment=deployment,
        replicas=2,
        thread_key=f"T1:C1:{deployment}",
        requester="U1",
    )
    await pipeline.store.create(request)
    for status in ("pending_approval", "approved", "executing", "failed"):
        request = await pipeline.store.transition(request.id, status, "test")
    return request


async def _redis_now(pipeline: ActionPipeline) -> float:
    seconds, micros = await pipeline.store.redis.time()
    return seconds + micros / 1e6


async def test_the_rate_window_keeps_an_execution_when_the_host_clock_runs_past_it(
    pipeline: ActionPipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries are scored on Redis's clock, so the window is trimmed by Redis's clock: a host
    whose clock runs a whole window ahead of Redis still sees an execution that just ended."""
    request = await _failed(pipeline, "svc-ahead")
    await pipeline.count(request)
    window = pipeline.breaker.policy.breaker_window_s
    ahead = time.time() + window + 60
    monkeypatch.setattr(time, "time", lambda: ahead)

    assert (await pipeline.breaker.state("shop/svc-ahead")).recent_executions == 1


async def test_the_rate_window_forgets_an_old_execution_when_the_host_clock_lags(
    pipeline: ActionPipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An execution that ended more than a window ago on Redis's clock is out of the window,
    however far behind the host's clock is."""
    window = pipeline.breaker.policy.breaker_window_s
    await pipeline.breaker.record(TARGET, True, "old", await _redis_now(pipeline) - window - 5)
    behind = time.time() - 2 * window
    monkeypatch.setattr(time, "time", lambda: behind)

    assert (await pipeline.breaker.state(TARGET)).recent_executions == 0


async def test_an_execution_counted_without_an_end_time_is_stamped_by_redis(
    pipeline: ActionPipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A count with no end mark and no `at` ends 'now' on Redis's clock, not the host's."""
    monkeypatch.setattr(time, "time", lambda: 1_000.0)  # a host clock decades behind
    before = await _redis_now(pipeline)
    await pipeline.breaker.record(TARGET, True, "bare")

    window = f"{pipeline.breaker.prefix}:executions:{TARGET}"
    stamped = await pipeline.store.redis.zscore(window, "bare")
    assert stamped is not None and stamped >= before - 1
