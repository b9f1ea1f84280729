"""The turn queue's sweep on a real Redis: a job a worker is picking up is not mistaken for
a dead worker's job; a job a worker died picking up, or stopped beating, is still swept."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from saq.job import Status

from bot.turn.saq_contract import queue_keys
from bot.turn.worker import TurnJobQueue, turn_queue


@pytest.fixture
async def queue(redis_url: str) -> AsyncIterator[TurnJobQueue]:
    redis = aioredis.from_url(redis_url)
    queue = turn_queue(redis, f"sweep{uuid.uuid4().hex[:8]}")
    assert isinstance(queue, TurnJobQueue)
    yield queue
    await redis.aclose()


async def _sweep(queue: TurnJobQueue) -> list[str]:
    await queue.redis.delete(queue_keys(queue).sweep)  # saq's sweep lock: this test sweeps at will
    return await queue.sweep(lock=60, abort=0.1)


async def _half_picked_up(queue: TurnJobQueue, heartbeat: int) -> str:
    """A job moved to the active list by saq's own dequeue, not yet marked active: where a
    worker is between its two steps (or died between them)."""
    job = await queue.enqueue("answer_turn", key=uuid.uuid4().hex, heartbeat=heartbeat)
    assert job is not None
    picked = await queue.dequeue(timeout=1)
    assert picked is not None and picked.status == Status.QUEUED
    return job.key


async def test_a_job_being_picked_up_is_not_swept(queue: TurnJobQueue) -> None:
    key = await _half_picked_up(queue, heartbeat=30)

    swept = await _sweep(queue)
    job = await queue.job(key)

    assert swept == []
    assert job is not None and job.status == Status.QUEUED
    assert await queue.count("active") == 1 and await queue.count("incomplete") == 1


async def test_a_job_its_worker_died_picking_up_is_swept_after_its_heartbeat(
    queue: TurnJobQueue,
) -> None:
    key = await _half_picked_up(queue, heartbeat=1)

    first = await _sweep(queue)  # seen being picked up
    await asyncio.sleep(1.2)
    second = await _sweep(queue)  # still not started after a heartbeat: its worker is gone
    job = await queue.job(key)

    assert first == []
    assert second == [queue.job_id(key)]
    assert job is not None and job.status == Status.QUEUED  # retried: back in the queue
    assert await queue.count("queued") == 1 and await queue.count("active") == 0


async def test_a_started_job_whose_heartbeat_stopped_is_swept(queue: TurnJobQueue) -> None:
    key = await _half_picked_up(queue, heartbeat=1)
    job = await queue.job(key)
    assert job is not None
    await job.update(status=Status.ACTIVE)  # started, then its worker died
    await asyncio.sleep(1.2)

    swept = await _sweep(queue)

    assert swept == [queue.job_id(key)]
    assert await queue.count("queued") == 1


async def test_a_dead_worker_s_jobs_are_all_back_within_one_abort_wait(
    queue: TurnJobQueue,
) -> None:
    """RECOVERY budgets one abort wait per sweep: a worker that died holding five turns
    gets all five back in one, not five waits in a row (saq's own sweep)."""
    keys = [await _half_picked_up(queue, heartbeat=1) for _ in range(5)]
    for key in keys:
        job = await queue.job(key)
        assert job is not None
        await job.update(status=Status.ACTIVE)  # started, then the worker died
    await asyncio.sleep(1.2)

    started = time.monotonic()
    await queue.redis.delete(queue_keys(queue).sweep)
    swept = await queue.sweep(lock=60, abort=1.0)
    took = time.monotonic() - started

    assert sorted(swept) == sorted(queue.job_id(k) for k in keys)
    assert await queue.count("queued") == 5
    assert took < 3.0  # one abort wait (1 s) and the round trips; one after another: 5 s
