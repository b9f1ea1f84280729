"""Approved actions are executed by the workers, not by the process that talks to Slack.

`serve` authorises a click and wins the compare-and-set to `approved` (Redis only), then
queues the execution here; a worker re-runs the rule gates on fresh state and makes the
write (gates/pipeline.py `execute`). So in WORKER_MODE=queue the internet-facing `serve`
makes no Kubernetes call at all, and only the workers' ServiceAccount may write
(deploy/kubernetes/target-namespace/role.yaml).

Exactly once, whatever fails: the write happens only after the transition approved →
executing, a compare-and-set. A job retried after its worker died finds the request past
`approved` and only reports it; an approval whose job is lost (its `serve` died before
queueing it) stays `approved` until the reconciler aborts it at ACTION_LEASE — nothing was
sent, and the card says so.

Where there is no Redis server to queue on (the demo's embedded store), or in a process that
runs turns itself (WORKER_MODE=inline), the execution is a task of this process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import redis.asyncio as aioredis
from saq.queue.redis import RedisQueue
from saq.types import Context

from bot.process.jobs import Jobs
from bot.turn.saq_contract import QuietWorker

EXECUTE = "execute_action"
CONCURRENCY = 4  # executions (and the rollouts they follow) one worker runs at a time
HEARTBEAT_S = 10  # a dead worker's job is retried after this (and saq's sweep)

ExecuteAction = Callable[[str, str], Coroutine[object, object, None]]  # request id, approver


def action_queue(redis: aioredis.Redis, prefix: str) -> RedisQueue:
    return RedisQueue(redis, name=f"{prefix}:actions")


@dataclass(eq=False)
class Executions:
    """Hands approved requests to whoever executes them: the workers' queue, or, with no
    queue, a task of this process."""

    queue: RedisQueue | None
    jobs: Jobs
    run: ExecuteAction | None = field(default=None, init=False)  # set by whoever executes here

    async def submit(self, request_id: str, approver: str) -> None:
        if self.queue is not None:
            await self.queue.enqueue(
                EXECUTE,
                key=f"execute:{request_id}",  # a repeated submit queues nothing new
                request_id=request_id,
                approver=approver,
                timeout=0,  # bounded by KUBE_TIMEOUT and ROLLOUT_WATCH_TIMEOUT, not the queue
                heartbeat=HEARTBEAT_S,
                retries=3,  # a retry after a crash only reports what the first try did
                ttl=3600,
            )
            return
        if self.run is None:
            raise RuntimeError("no executor in this process and no queue to hand it to")
        self.jobs.submit(self.run(request_id, approver), f"execute {request_id}")


@asynccontextmanager
async def running_executor(queue: RedisQueue, execute: ExecuteAction) -> AsyncIterator[None]:
    """A saq worker executing approved actions in this process until the block exits."""

    async def job(ctx: Context, *, request_id: str, approver: str) -> None:
        await execute(request_id, approver)

    worker = QuietWorker(
        queue,
        functions=[(EXECUTE, job)],
        concurrency=CONCURRENCY,
        timers={"sweep": 5, "abort": 1, "schedule": 1, "worker_info": 10},
        dequeue_timeout=1,
        shutdown_grace_period_s=10,
        cancellation_hard_deadline_s=3,
    )
    task = asyncio.create_task(worker.start(), name="action executor")
    try:
        yield
    finally:
        await worker.stop()  # no new jobs; timers have nothing to finish
        with contextlib.suppress(asyncio.CancelledError):
            await task
