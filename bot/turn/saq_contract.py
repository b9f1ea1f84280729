"""What tracegate relies on in saq beyond its public API, all of it here.

saq's public API has no way to queue a job inside another Redis script, to sweep jobs by
other rules, or to run a worker without its signal handlers and stop it without waiting out
its timers. So this module knows saq's Redis key layout (the names `RedisQueue.namespace`
makes, the commands of its enqueue and dequeue) and how its `Worker` starts (`SIGNALS`, the
tasks its public `upkeep()` returns). tests/test_saq_contract.py holds saq to each of these
and fails when an upgrade changes one; pyproject.toml pins saq to the range it was run on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from saq import Worker
from saq.job import TERMINAL_STATUSES, Job
from saq.queue.redis import RedisQueue
from saq.types import Context


@dataclass(frozen=True)
class QueueKeys:
    """saq's Redis keys of one queue."""

    incomplete: str  # sorted set: every job not finished (queued, scheduled, active)
    queued: str  # list: jobs ready to run, taken from the left by a worker's dequeue
    active: str  # list: jobs a worker took (moved here by dequeue in one command)
    sweep: str  # the sweep's lock: one sweep per `lock` seconds across workers


def queue_keys(queue: RedisQueue) -> QueueKeys:
    return QueueKeys(*(queue.namespace(k) for k in ("incomplete", "queued", "active", "sweep")))


def enqueue_keys(queue: RedisQueue, job: Job) -> tuple[str, str, str, str]:
    """The keys saq's enqueue script writes for `job`, in its order (KEYS[1..4]): the
    incomplete index, the job's record, the queued list, the job's abort marker."""
    keys = queue_keys(queue)
    return (keys.incomplete, job.id, keys.queued, job.abort_id)


async def active_jobs(queue: RedisQueue, lock_s: int) -> list[tuple[Any, Job | None]] | None:
    """For a sweep: the jobs in the active list (None where the record is gone), or None when
    another worker swept less than `lock_s` seconds ago (saq's sweep lock, taken here).
    A job that finished between the two reads is left out: it is no longer active."""
    keys = queue_keys(queue)
    if not await queue.redis.set(keys.sweep, 1, nx=True, ex=lock_s):
        return None
    ids = await queue.redis.lrange(keys.active, 0, -1)
    if not ids:
        return []
    jobs = [queue.deserialize(raw) for raw in await queue.redis.mget(ids)]
    return [
        (job_id, job)
        for job_id, job in zip(ids, jobs, strict=True)
        if job is None or job.status not in TERMINAL_STATUSES
    ]


async def forget_missing(queue: RedisQueue, job_id: Any) -> None:
    """A job id in the active list whose record is gone, dropped as saq's sweep does."""
    keys = queue_keys(queue)
    async with queue.redis.pipeline(transaction=True) as pipe:
        pipe.lrem(keys.active, 0, job_id)
        pipe.zrem(keys.incomplete, job_id)
        await pipe.execute()


class QuietWorker(Worker[Context]):
    """saq's worker without its SIGINT/SIGTERM handlers (the process's own decide when to
    stop), whose timers can be stopped at once (`stop_upkeep`): they have nothing to finish,
    and `Worker.stop` would otherwise wait for each one's sleep to end."""

    SIGNALS = []  # noqa: RUF012 (saq reads it off the instance: self.SIGNALS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.upkeep_tasks: list[asyncio.Task[None]] = []  # set once its timers run

    async def upkeep(self) -> list[asyncio.Task[None]]:
        self.upkeep_tasks = await super().upkeep()
        return self.upkeep_tasks

    def stop_upkeep(self) -> None:
        """No new jobs, and the timers end now (each returns once cancelled after the stop
        event is set)."""
        self.event.set()
        for task in self.upkeep_tasks:
            task.cancel()

    async def stop(self) -> None:
        """saq's stop, without waiting for the timers' sleeps (it waited up to the longest
        timer, 10 s, for timers that had nothing to finish). saq's `start` calls it too, when
        its task is cancelled (Ctrl-C ends the demo that way). A timer's job (a Redis call)
        can swallow one cancellation and go on to its sleep: it is cancelled again there."""
        self.stop_upkeep()
        for _ in range(10):  # bounded: at most about a second
            running = [t for t in self.upkeep_tasks if not t.done()]
            if not running:
                break
            await asyncio.wait(running, timeout=0.1)
            for task in running:
                task.cancel()
        await super().stop()
