"""A run whose thread another run took over stops at once: its heartbeat finds the lease
someone else's and cancels it in the middle of whatever it awaits (a model call, a tool),
instead of letting it go on until its next side effect's fence. Real Redis, the real
`TurnStore` and `TurnRunner`; the turn's work is a call that never returns."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from saq.types import Context

from bot.turn.store import Turn, TurnStore, turn_id_of
from bot.turn.timing import WorkerTiming
from bot.turn.worker import Fence, LeaseLost, TurnRunner, turn_queue

TIMING = WorkerTiming(recovery_budget_s=10)  # a beat every second


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    yield client
    await client.aclose()


async def test_a_run_whose_lease_another_run_took_stops_in_the_middle_of_its_call(
    redis: aioredis.Redis,
) -> None:
    prefix = f"lease{uuid.uuid4().hex[:8]}"
    store = TurnStore(redis, 3600, prefix)
    thread = "T1:C1:1700000000.000100"
    turn = Turn(
        id=turn_id_of(thread, "1700000000.000100"),
        thread=thread,
        team="T1",
        channel="C1",
        root="1700000000.000100",
        ts="1700000000.000100",
        user="U1",
        text="why?",
        event_id="Ev1",
    )
    assert await store.record(turn) == "recorded"
    calling = asyncio.Event()
    wrote: list[str] = []

    async def run_turn(current: Turn, fence: Fence) -> None:
        calling.set()
        await asyncio.Event().wait()  # a model call that has not answered yet
        await fence()
        wrote.append("answer")

    async def prepare(_: Turn) -> None:
        return None

    runner = TurnRunner(store, turn_queue(redis, prefix), run_turn, prepare, TIMING)
    run = asyncio.create_task(runner.answer_turn(Context(), turn_id=turn.id))  # type: ignore[typeddict-item]
    await asyncio.wait_for(calling.wait(), 10)

    # Another worker took the thread over (this one was paused past its lease).
    await redis.set(f"{prefix}:lease:{thread}", "another run", px=10_000)
    # Bounded: a run that waits for its call to return is left pending here.
    done, _ = await asyncio.wait({run}, timeout=15)
    run.cancel()  # a no-op once it stopped

    assert run in done, "the run still waits for its call"
    assert isinstance(run.exception(), LeaseLost)  # an error saq retries, not a cancellation
    assert wrote == []
    assert await redis.get(f"{prefix}:lease:{thread}") == b"another run"
