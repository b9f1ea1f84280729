"""A run whose thread another run took over writes nothing more, and stops at once: its fence
refuses the next side effect, and its heartbeat, at its next beat, cancels it in the middle
of whatever it awaits (a model call, a tool). Real Redis, the real `TurnStore` and
`TurnRunner`; the turn's work is a stand-in that waits, then writes behind its fence."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from saq.types import Context

from bot.turn.store import Turn, TurnStore, turn_id_of
from bot.turn.timing import WorkerTiming
from bot.turn.worker import LeaseLost, TurnRunner, turn_queue
from graph.checkpoint import Fence

TIMING = WorkerTiming(recovery_budget_s=10)  # a beat every second
ROOT = "1700000000.000100"
THREAD = f"T1:C1:{ROOT}"


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    yield client
    await client.aclose()


async def _recorded(store: TurnStore) -> Turn:
    turn = Turn(
        id=turn_id_of(THREAD, ROOT),
        thread=THREAD,
        team="T1",
        channel="C1",
        root=ROOT,
        ts=ROOT,
        user="U1",
        text="why?",
        event_id="Ev1",
    )
    assert await store.record(turn) == "recorded"
    return turn


async def _prepare(_: Turn) -> None:
    return None  # the placeholder: cosmetic, not under test


async def test_a_run_whose_lease_another_run_took_stops_in_the_middle_of_its_call(
    redis: aioredis.Redis,
) -> None:
    prefix = f"lease{uuid.uuid4().hex[:8]}"
    store = TurnStore(redis, 3600, prefix)
    turn = await _recorded(store)
    calling = asyncio.Event()

    async def run_turn(current: Turn, fence: Fence) -> None:
        calling.set()
        await asyncio.Event().wait()  # a model call that never answers: only a cancel ends it

    runner = TurnRunner(store, turn_queue(redis, prefix), run_turn, _prepare, TIMING)
    run = asyncio.create_task(runner.answer_turn(Context(), turn_id=turn.id))  # type: ignore[typeddict-item]
    await asyncio.wait_for(calling.wait(), 10)

    # Another worker took the thread over (this one was paused past its lease).
    await redis.set(f"{prefix}:lease:{THREAD}", "another run", px=10_000)
    # Bounded: a run that waits for its call to return is left pending here.
    done, _ = await asyncio.wait({run}, timeout=15)
    run.cancel()  # a no-op once it stopped

    assert run in done, "the run still waits for its call"
    assert isinstance(run.exception(), LeaseLost)  # an error saq retries, not a cancellation
    assert await redis.get(f"{prefix}:lease:{THREAD}") == b"another run"


async def test_a_run_whose_lease_another_run_took_writes_nothing_before_its_heartbeat_knows(
    redis: aioredis.Redis,
) -> None:
    """The fence, on its own: the lease is taken between two beats (a minute apart here),
    and the run's next side effect comes before the next beat."""
    prefix = f"lease{uuid.uuid4().hex[:8]}"
    store = TurnStore(redis, 3600, prefix)
    turn = await _recorded(store)
    calling, answered = asyncio.Event(), asyncio.Event()
    wrote: list[str] = []

    async def run_turn(current: Turn, fence: Fence) -> None:
        calling.set()
        await answered.wait()  # the model call, answered once the lease is gone
        await fence()
        wrote.append("answer")

    slow_beats = WorkerTiming(recovery_budget_s=600)
    runner = TurnRunner(store, turn_queue(redis, prefix), run_turn, _prepare, slow_beats)
    run = asyncio.create_task(runner.answer_turn(Context(), turn_id=turn.id))  # type: ignore[typeddict-item]
    await asyncio.wait_for(calling.wait(), 10)

    await redis.set(f"{prefix}:lease:{THREAD}", "another run", px=10_000)
    answered.set()
    done, _ = await asyncio.wait({run}, timeout=10)
    run.cancel()  # a no-op once it stopped

    assert run in done, "the run did not end"
    assert isinstance(run.exception(), LeaseLost)
    assert wrote == []
