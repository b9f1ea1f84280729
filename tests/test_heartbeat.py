"""A turn's heartbeat stops when its turn ends, even when a Redis call swallowed the stop.

Seen under load in `test_model_waits` (thirty questions over two workers): a turn that gave
its slot back for model capacity stopped its heartbeat while the beat's `job.update()` was
in flight; the call swallowed the cancellation, the beat went on to its next sleep, and the
turn waited for it for good: no answer, no retry (the beat kept the job looking alive)."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace

from bot.turn.timing import WorkerTiming
from bot.turn.worker import _Heartbeat


class _SwallowingJob:
    """A saq job whose first update swallows a cancellation, as a Redis call in flight
    can; later ones are slow."""

    def __init__(self) -> None:
        self.updating = asyncio.Event()
        self.updates = 0

    async def update(self) -> None:
        self.updates += 1
        self.updating.set()
        if self.updates > 1:
            await asyncio.sleep(3600)
        with contextlib.suppress(asyncio.CancelledError):  # swallowed: back to the beat
            await asyncio.sleep(3600)


async def test_a_turn_ends_when_its_heartbeat_swallowed_the_stop_in_a_redis_call() -> None:
    job = _SwallowingJob()
    runner = SimpleNamespace(timing=WorkerTiming(recovery_budget_s=10), store=None)
    beat = _Heartbeat(runner, job, "T1:C1:1.0", "T1:C1:1.0@1.0")  # type: ignore[arg-type]

    async def turn() -> None:
        async with beat.running():
            await job.updating.wait()  # the turn ends while the beat is in its Redis call

    running = asyncio.create_task(turn())
    # Bounded: a beat that went on beating holds its turn for good (left pending then).
    done, _ = await asyncio.wait({running}, timeout=10)
    assert running in done, "the turn still waits for its heartbeat"
    assert job.updates == 1
