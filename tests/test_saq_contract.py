"""saq, held to what bot/turn/saq_contract.py relies on beyond its public API (real Redis).
Each test names the assumption; a saq upgrade that changes one fails here, not in production.
pyproject.toml pins saq to the range these were run on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from saq import Queue
from saq.job import Job, Status
from saq.queue.redis import RedisQueue

from bot.turn.saq_contract import QuietWorker, active_jobs, enqueue_keys, queue_keys


def _key() -> str:
    """A job key no other test uses: saq's abort marker is `saq:abort:<key>`, the same key
    in every queue of a Redis (tests side by side share one)."""
    return f"k-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def queue(redis_url: str) -> AsyncIterator[RedisQueue]:
    redis = aioredis.from_url(redis_url)
    queue = Queue.from_url(redis_url, name=f"contract{uuid.uuid4().hex[:8]}")
    assert isinstance(queue, RedisQueue)
    yield queue
    await queue.disconnect()
    await redis.aclose()


async def test_enqueue_writes_the_record_the_incomplete_index_and_the_queued_list(
    queue: RedisQueue,
) -> None:
    """The keys the turn record script queues a job with, written as saq's enqueue does."""
    job = await queue.enqueue("f", key=_key(), heartbeat=3)
    assert job is not None
    incomplete, record, queued, abort = enqueue_keys(queue, job)

    assert await queue.redis.zscore(incomplete, record) == job.scheduled == 0
    assert await queue.redis.lrange(queued, 0, -1) == [record.encode()]
    assert queue.deserialize(await queue.redis.get(record)) == job
    # An abort marker (a sweep aborting the job) refuses its key, as the record script does.
    marked = Job(function="f", key=_key(), queue=queue)
    await queue.redis.set(enqueue_keys(queue, marked)[3], "swept")
    assert await queue.enqueue("f", key=marked.key) is None
    assert abort == job.abort_id


async def test_dequeue_moves_a_job_from_the_queued_list_to_the_active_list(
    queue: RedisQueue,
) -> None:
    job = await queue.enqueue("f", key=_key())
    assert job is not None
    keys = queue_keys(queue)

    taken = await queue.dequeue(timeout=1)

    assert taken is not None and taken.status == Status.QUEUED  # marked active only later
    assert await queue.redis.lrange(keys.active, 0, -1) == [job.id.encode()]
    assert await queue.redis.llen(keys.queued) == 0


async def test_saq_s_sweep_and_ours_share_one_lock(queue: RedisQueue) -> None:
    job = await queue.enqueue("f", key=_key())
    assert job is not None
    await queue.dequeue(timeout=1)

    mine = await active_jobs(queue, lock_s=60)  # takes the lock
    theirs = await RedisQueue.sweep(queue, lock=60, abort=0.1)  # saq's own: locked out
    await queue.redis.delete(queue_keys(queue).sweep)
    after = await RedisQueue.sweep(queue, lock=60, abort=0.1)  # saq's own, lock free
    locked_out = await active_jobs(queue, lock_s=60)

    assert mine is not None and [job_id for job_id, _ in mine] == [job.id.encode()]
    assert theirs == []
    assert after == [job.id]  # still queued in the active list: swept
    assert locked_out is None


async def _timers_running(worker: QuietWorker) -> None:
    """Until the worker's timers run (the tasks its `upkeep()` returned are kept): its job
    slots start next."""
    async with asyncio.timeout(5):
        while not worker.upkeep_tasks:  # noqa: ASYNC110 (saq's start sets no event for it)
            await asyncio.sleep(0.01)


async def test_a_worker_with_no_signals_leaves_the_process_s_handlers_alone(
    queue: RedisQueue,
) -> None:
    """saq's Worker.start installs a handler for each of `SIGNALS`; QuietWorker has none, so
    a SIGTERM reaches the process's own handler, not the worker's stop event."""
    loop = asyncio.get_running_loop()
    ours = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, ours.set)
    timers = {"sweep": 1, "worker_info": 1, "abort": 1, "schedule": 1}  # quick to stop
    worker = QuietWorker(queue, functions=[], concurrency=1, dequeue_timeout=0.1, timers=timers)
    started = asyncio.create_task(worker.start())
    try:
        await _timers_running(worker)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(ours.wait(), 5)
        assert not worker.event.is_set()
    finally:
        worker.event.set()
        await asyncio.wait_for(asyncio.gather(started, return_exceptions=True), 30)
        loop.remove_signal_handler(signal.SIGTERM)


async def test_a_worker_s_timers_are_the_tasks_upkeep_returns(queue: RedisQueue) -> None:
    """start() runs the timers `upkeep()` returns among the tasks `stop()` waits for (up to
    its grace period): ending those is how a stopping worker does not wait out their sleeps
    (here a sweep every 600 s, and a grace of 600 s)."""
    worker = QuietWorker(
        queue,
        functions=[],
        concurrency=2,
        dequeue_timeout=0.1,
        timers={"sweep": 600},
        shutdown_grace_period_s=600,
    )
    started = asyncio.create_task(worker.start())
    await _timers_running(worker)
    await asyncio.sleep(0)  # start() creates the slots' tasks right after the timers
    timers = list(worker.upkeep_tasks)
    held = set(worker.tasks)

    worker.stop_upkeep()
    await asyncio.wait_for(worker.stop(), 30)  # bounded: a timer left running hangs it
    await asyncio.gather(started, return_exceptions=True)

    assert timers and set(timers) <= held
    assert len(held - set(timers)) == 2  # one task per slot: the jobs a stop lets finish
    assert all(task.done() for task in timers)


class _SwallowingTimer(QuietWorker):
    """A timer (saq's abort check) whose job swallows a cancellation, as a Redis call in
    flight can."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_timer = asyncio.Event()

    async def abort(self, abort_threshold: float) -> None:
        self.in_timer.set()
        with contextlib.suppress(asyncio.CancelledError):  # swallowed: on to its sleep
            await asyncio.sleep(3600)


async def test_stop_ends_a_timer_whose_job_swallowed_the_cancellation(
    queue: RedisQueue,
) -> None:
    """Cancelled by the task that runs it (Ctrl-C ends the demo that way), saq's start()
    calls stop() itself; a timer that swallowed the cancel used to be waited out (its sleep:
    here 600 s; the demo's longest, 10 s, made Ctrl-C take that long)."""
    worker = _SwallowingTimer(
        queue, functions=[], concurrency=1, dequeue_timeout=0.1, timers={"abort": 600}
    )
    started = asyncio.create_task(worker.start())
    await asyncio.wait_for(worker.in_timer.wait(), 5)

    started.cancel()
    # Bounded: a timer left sleeping hangs it (the grace period is saq's default, 30 s).
    await asyncio.wait_for(asyncio.gather(started, return_exceptions=True), 20)

    assert all(task.done() for task in worker.upkeep_tasks)
