"""Turns run as jobs of saq, a Redis job queue; any process with a worker may run them.

One job per turn, keyed by the turn id (a redelivery enqueues nothing new). A job waits until
its turn is the head of its thread's queue and it holds the thread's lease, runs the turn,
and leaves the queue: one turn at a time per thread, in arrival order, whichever replica
received the messages and whichever worker runs them. Waiting jobs never take a worker's
last slot (a job that would gives it back and is run again a second later), so a thread's
head turn, its job back in the queue after a crash or a wait for the model, always runs.

Liveness, in one place each (docs/architecture.md, "How a turn stays alive, and who takes
it over"): a heartbeat touches the job and renews the lease while it waits or runs; the
queue's sweep (`TurnJobQueue`) is the only thing that decides a turn is abandoned — a job
whose heartbeat stopped, or an unfinished turn without a job — and puts its job back in the
queue, where the next free worker takes it; the lease's fence keeps a run that was taken
over from writing. On SIGTERM a worker takes no new jobs, lets the running turn finish
within SHUTDOWN_GRACE, and hands the rest back to the queue (saq retries a cancelled job)
uncounted; a run saq aborts as stuck counts as an attempt, as a crash.

Why saq: a dead worker's turn is taken up again after HEARTBEAT + SWEEP seconds, whatever
the job's length (arq only retries after its largest job timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from saq import Queue, Worker
from saq.job import Job, Status
from saq.queue.redis import RedisQueue
from saq.types import Context
from saq.utils import now as saq_now

from bot.process.metrics import MODEL_WAITS
from bot.turn.saq_contract import QuietWorker, active_jobs, enqueue_keys, forget_missing
from bot.turn.store import QueuedJob, Turn, TurnStore
from bot.turn.timing import SlotGivenBack, WaitingForModel
from bot.turn.timing import WorkerTiming as WorkerTiming  # where conversation and tests find it
from gates.store import as_text
from graph.capacity import ModelBusy
from graph.checkpoint import Fence, Superseded

log = logging.getLogger(__name__)

JOB_FUNCTION = "answer_turn"
POLL_S = 0.2  # how often a waiting job looks at its thread's queue
WAITER_RETRY_S = 1.0  # a waiting job with no slot to spare is run again after this
RETRY_DELAY_S = 0.5  # a job retried by saq (a hand-back, a crash) runs again after this


RunTurn = Callable[[Turn, Fence], Awaitable[None]]
Prepare = Callable[[Turn], Awaitable[None]]


class HandBack(Exception):
    """This worker is stopping: the job goes back to the queue (saq retries it)."""


class WaitingForThread(SlotGivenBack):
    """The turn waits behind its thread's head, and every other slot of this worker already
    holds a waiting job: this one gives its slot back, so that a head turn whose job is
    queued behind it (retried after a crash or a wait for the model) finds a slot."""


class LeaseLost(Superseded):
    """Another worker holds the thread now: this run must change nothing more (its
    checkpoint writes included: the graph's saver awaits the same fence)."""


class TurnJobQueue(RedisQueue):
    """saq's Redis queue whose sweep is the one place a turn is found abandoned (see
    docs/architecture.md, "How a turn stays alive, and who takes it over"). A sweep — one
    at a time across workers, under saq's sweep lock — has two rules:

    1. A job in the active list whose heartbeat stopped (its worker died or stalled) is
       aborted and retried, as saq sweeps it, with one race closed and one wait shortened.
       The race: a worker moves a job to the active list and marks it active two round
       trips later; a sweep in between took it for a dead worker's job and retried it (a
       fresh turn cancelled, run again, an attempt counted for nothing). Here a job still
       marked queued in the active list is swept only once it has been seen so for its
       heartbeat, the first sighting kept in Redis so whichever worker sweeps next knows
       it. The wait: the jobs of one sweep are given their abort wait side by side.
    2. An unfinished turn without a live job (`orphans`: `TurnRunner.requeue_orphans`,
       set by the worker) is queued again."""

    def __init__(self, redis: aioredis.Redis, name: str) -> None:
        super().__init__(redis, name=name)
        self._pickups = self.namespace("pickups")
        self.orphans: Callable[[], Awaitable[int]] | None = None

    async def sweep(self, lock: int = 60, abort: float = 5.0) -> list[str]:
        jobs = await active_jobs(self, lock)
        if jobs is None:
            return []  # another worker swept less than `lock` seconds ago
        swept = await self._sweep_stopped(jobs, abort) if jobs else []
        if self.orphans is not None:
            try:
                await self.orphans()
            except Exception:  # a Redis blip: the next sweep tries again
                log.warning("re-queueing orphaned turns failed", exc_info=True)
        return swept

    async def _sweep_stopped(self, jobs: list[tuple[Any, Job | None]], abort: float) -> list[str]:
        """Rule 1: the active jobs whose heartbeat stopped, aborted and retried."""
        picking = await self._picking_up([(i, j) for i, j in jobs if j is not None])
        swept = []
        dead: list[Job] = []
        for job_id, job in jobs:
            if job is None:  # its record is gone: drop it, as saq does
                await forget_missing(self, job_id)
                swept.append(job_id)
            elif job_id not in picking and (job.status != Status.ACTIVE or job.stuck):
                swept.append(job_id)
                dead.append(job)
        # Each is asked to abort and given `abort` seconds to do so — all at once, not one
        # after another as saq does: a dead worker's 30 turns are back in one abort wait,
        # within RECOVERY, not 30 of them.
        await asyncio.gather(*(self._abort_and_retry(job, abort) for job in dead))
        if swept:
            log.info("swept %d job(s) of %s", len(swept), self.name)
        return [as_text(job_id) for job_id in swept]

    async def _abort_and_retry(self, job: Job, abort: float) -> None:
        await self.abort(job, error=self.swept_error_message)
        with contextlib.suppress(asyncio.TimeoutError):
            await job.refresh(abort)
        if job.retryable:
            await self.retry(job, error=self.swept_error_message)
        else:
            await self.finish(job, Status.ABORTED, error=self.swept_error_message)

    async def _picking_up(self, jobs: list[tuple[bytes, Job]]) -> set[bytes]:
        """The jobs that are still being picked up (see the class); forgets the rest."""
        now_ms = saq_now()
        queued = [(job_id, job) for job_id, job in jobs if job.status == Status.QUEUED]
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id, _ in queued:
                pipe.hsetnx(self._pickups, job_id, now_ms)
                pipe.hget(self._pickups, job_id)
            pipe.hkeys(self._pickups)
            *seen, known = await pipe.execute()
        first_seen = {job_id: int(at) for (job_id, _), at in zip(queued, seen[1::2], strict=True)}
        picking = {
            job_id
            for job_id, job in queued
            if now_ms - first_seen[job_id] < (job.heartbeat or 0) * 1000
        }
        gone = [k for k in known if k not in picking]
        async with self.redis.pipeline(transaction=False) as pipe:
            if gone:
                pipe.hdel(self._pickups, *gone)
            pipe.expire(self._pickups, 3600)
            await pipe.execute()
        return picking


def turn_queue(redis: aioredis.Redis, prefix: str) -> RedisQueue:
    return TurnJobQueue(redis, name=f"{prefix}:turns")


class InProcessQueue:
    """For the demo's embedded store only (no Redis server: nothing survives the process
    anyway): each job is an asyncio task of this process."""

    def __init__(self) -> None:
        self.runner: TurnRunner | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}

    async def enqueue(self, function: str, *, key: str, turn_id: str, **_: Any) -> bool | None:
        if self.runner is None or key in self._tasks:
            return None
        job = self.runner.answer_turn(Context(), turn_id=turn_id)  # type: ignore[typeddict-item]
        task = asyncio.create_task(job, name=key)
        self._tasks[key] = task
        task.add_done_callback(lambda done: self._tasks.pop(key, None))
        return True

    async def count(self, kind: str) -> int:
        return len(self._tasks)


TurnQueue = Queue | InProcessQueue


def _job_options(heartbeat_s: int) -> dict[str, Any]:
    return {
        "timeout": 0,  # an investigation's length is bounded by the graph, not the queue
        "heartbeat": heartbeat_s,
        "retries": 1000,  # hand-backs are not failures; MAX_ATTEMPTS counts real runs
        "retry_delay": RETRY_DELAY_S,
        "ttl": 3600,
    }


async def enqueue_turn(queue: TurnQueue, turn_id: str, timing: WorkerTiming) -> bool:
    """Queue the job for a recorded turn; a no-op (False) while one is queued or running."""
    job = await queue.enqueue(
        JOB_FUNCTION, key=turn_id, turn_id=turn_id, **_job_options(timing.heartbeat_s)
    )
    return job is not None


def job_for_record(queue: TurnQueue, turn_id: str, timing: WorkerTiming) -> QueuedJob | None:
    """The turn's job as saq's `enqueue` would queue it, for the record step to queue in the
    same round trip (`TurnStore.record`); None for the demo's in-process queue. saq's keys
    and commands for it: bot.turn.saq_contract."""
    if not isinstance(queue, RedisQueue):
        return None
    job = Job(
        function=JOB_FUNCTION,
        kwargs={"turn_id": turn_id},
        key=turn_id,
        queue=queue,
        queued=saq_now(),
        status=Status.QUEUED,
        **_job_options(timing.heartbeat_s),
    )
    return QueuedJob(keys=enqueue_keys(queue, job), payload=queue.serialize(job))


@dataclass(eq=False)
class TurnRunner:
    """The saq job for one turn: wait for the thread, then run the turn under its lease."""

    store: TurnStore
    queue: TurnQueue
    run_turn: RunTurn  # investigate and deliver (the bot's conversation logic)
    prepare: Prepare  # what a turn shows while it waits (its placeholder)
    timing: WorkerTiming
    stopping: bool = field(default=False, init=False)
    # jobs of this process waiting in a worker slot for their thread
    waiting: int = field(default=0, init=False)

    async def answer_turn(self, ctx: Context, *, turn_id: str) -> None:
        """The job: one turn, from its placeholder to its delivered answer.

        A turn the model has no capacity for gives its worker slot back: its job is retried
        by saq at the model's next try (the job's retry delay; saq's own scheduling, so any
        worker may take it), and the turn resumes from its checkpoint then. The demo's
        in-process queue has no scheduler: its task waits instead."""
        job = ctx.get("job")
        if job is not None and job.retry_delay != RETRY_DELAY_S:
            job.retry_delay = RETRY_DELAY_S  # a wait's delay is not a crash's (saved at a beat)
        while True:
            try:
                await self._answer_turn(job, turn_id)
                return
            except WaitingForThread:
                assert job is not None  # only saq's jobs hold slots
                job.retry_delay = WAITER_RETRY_S
                job.retry_backoff = False
                job.attempts -= 1  # not a try: saq's retries are for crashes and waits
                job.meta["waited"] = True
                log.debug("turn %s gives its slot back while it waits for its thread", turn_id)
                raise
            except ModelBusy as busy:
                delay = max(0.0, busy.retry_at - time.time())
                MODEL_WAITS.labels(busy.reason).observe(delay)
                log.info("turn %s waits %.1fs for model capacity (%s)", turn_id, delay, busy)
                if job is None:
                    await asyncio.sleep(delay)
                    continue
                job.retry_delay = max(delay, 0.01)
                job.retry_backoff = False
                raise WaitingForModel(str(busy)) from None

    async def _answer_turn(self, job: Job | None, turn_id: str) -> None:
        turn = await self.store.get(turn_id)
        if turn is None:  # evicted or lost with Redis: it must not block its thread
            await self.store.drop(turn_id)
            log.error("turn %s has no record left; dropped from its thread", turn_id)
            return
        if turn.state == "done":
            return
        beat = _Heartbeat(self, job, turn.thread, turn.id)
        async with beat.running():
            # A job that gave its slot back while it waited has shown its placeholder.
            if not (turn.placeholder_ts and job is not None and job.meta.get("waited")):
                try:
                    await self.prepare(turn)
                except Exception:  # a placeholder is cosmetic; the answer is what matters
                    log.exception("could not post the placeholder of %s", turn_id)
            if not await self._wait_for_thread(turn, beat, job is not None):
                return
            try:
                await self._run_holding(turn, beat)
            finally:
                token, beat.token = beat.token, None
                if token is not None:
                    await self.store.release(turn.thread, token)

    async def _wait_for_thread(self, turn: Turn, beat: _Heartbeat, in_slot: bool) -> bool:
        """Wait until the turn heads its thread's queue and the lease is ours. A job in a
        worker slot (`in_slot`) waits there only while another slot of this worker is left
        to jobs that do not wait; else it gives its slot back (WaitingForThread)."""
        token = uuid.uuid4().hex
        waiting = False
        try:
            while True:
                if self.stopping:
                    raise HandBack("this worker is stopping; another one takes the turn")
                outcome, head = await self.store.take_thread(turn, token, self.timing.lease_s)
                if outcome == 0:
                    return False  # finished by another run of this job
                if outcome == 1:
                    beat.token = token
                    return True
                if head not in (None, turn.id) and not await self.store.exists(head):
                    await self.store.drop(head)  # a head without a record would wedge it
                    log.error("turn %s has no record left; dropped from its thread", head)
                    continue
                if not waiting:
                    if in_slot and self.waiting >= self.timing.concurrency - 1:
                        raise WaitingForThread(f"{turn.id} waits behind {head}")
                    self.waiting, waiting = self.waiting + 1, True
                await asyncio.sleep(POLL_S)
        finally:
            if waiting:
                self.waiting -= 1

    async def requeue_orphans(self) -> int:
        """The sweep's second rule (TurnJobQueue): queue a job for every unfinished turn
        that has none alive; returns how many.

        A job can be lost between the queue's own steps (a worker killed while its sweep
        moves a job, an enqueue that failed or never ran after the turn was recorded). The
        turn record is the truth. Cheap in the common case: two round trips for all the
        unfinished turns (their states, their jobs), then an enqueue for each turn whose job
        is not running with a fresh heartbeat (gone, finished, left aborting by a dead
        worker, or queued or stuck: a no-op while saq still has it, which rule 1 handles).
        """
        if not isinstance(self.queue, Queue):
            return 0  # the demo's in-process queue: nothing survives the process anyway
        settled = time.time() - self.timing.sweep_s  # leave fresh turns to their receiver
        turn_ids = await self.store.unfinished(recorded_before=settled)
        if not turn_ids:
            return 0
        states = await self.store.states(turn_ids)
        jobs = await self.queue.jobs(turn_ids)
        requeued = 0
        for turn_id, state, job in zip(turn_ids, states, jobs, strict=True):
            if state is None or state == "done":
                await self.store.forget_unfinished(turn_id)
            elif job is not None and job.status == Status.ACTIVE and not job.stuck:
                continue  # running, its heartbeat fresh: a worker holds it
            elif await enqueue_turn(self.queue, turn_id, self.timing):
                log.warning("turn %s had lost its job; queued it again", turn_id)
                requeued += 1
        return requeued

    async def _run_holding(self, turn: Turn, beat: _Heartbeat) -> None:
        current = await self.store.start(turn.id)
        if current is None:  # done meanwhile, or its record is gone
            return

        async def fence() -> None:
            """Before every side effect: is the thread still ours?"""
            if beat.lost or not await self.store.holds(turn.thread, beat.token or ""):
                beat.lost = True
                raise LeaseLost(f"another worker holds {turn.thread}")

        try:
            await self.run_turn(current, fence)
        except ModelBusy:
            await self.store.handed_back(turn.id)  # waiting is not a failed attempt
            raise
        except asyncio.CancelledError:
            if not beat.lost:
                # Only a stopping worker hands a turn back uncounted. Cancelled otherwise,
                # saq aborted the job as stuck (no heartbeat past its limit: the run stalled
                # its worker): that run was an attempt, as a crash is, or MAX_ATTEMPTS would
                # never bound a turn that stalls every run.
                if self.stopping:
                    await self.store.handed_back(turn.id)
                    log.info("handed %s back to the queue", turn.id)
                else:
                    log.warning("the run of %s was aborted as stuck; counted", turn.id)
                raise
            # Our own heartbeat stopped the run: an error (not a cancellation) makes saq
            # retry the job, which then finds the turn taken care of. The task ends with it:
            # only its clean-up (the lease's release) runs after, so the cancellation is
            # not taken back.
            raise LeaseLost(f"another worker holds {turn.thread}") from None


class _Heartbeat:
    """Touches the saq job (so a sweep knows it is alive) and renews the thread's lease."""

    def __init__(self, runner: TurnRunner, job: Any, thread: str, turn_id: str) -> None:
        self.runner, self.job, self.thread, self.turn_id = runner, job, thread, turn_id
        self.token: str | None = None
        self.lost = False

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        owner = asyncio.current_task()
        beat = asyncio.create_task(self._beat(owner), name=f"heartbeat {self.thread}")
        try:
            yield
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat

    async def _beat(self, owner: asyncio.Task[Any] | None) -> None:
        timing = self.runner.timing
        interval = min(timing.lease_s / 3, timing.heartbeat_s / 3)
        me = asyncio.current_task()
        while True:
            # Stopped while a Redis call was in flight, the call can swallow the cancel
            # (seen under load: the heartbeat went on beating, and the turn that stopped
            # it waited for it forever). The stop is still asked for: honour it here.
            if me is not None and me.cancelling():
                raise asyncio.CancelledError
            await asyncio.sleep(interval)
            try:
                if self.job is not None:
                    await self.job.update()
                if self.token is None:
                    continue
                renewed = await self.runner.store.renew(
                    self.thread, self.token, timing.lease_s, self.turn_id
                )
                if renewed == 2:
                    log.warning(
                        "the lease of %s was gone (Redis lost data?); taken again", self.thread
                    )
                if not renewed:
                    self.lost = True
                    log.warning(
                        "another worker took the lease of %s (or finished its turn); stopping",
                        self.thread,
                    )
                    if owner is not None:
                        owner.cancel()  # stop at once: every later side effect would be stale
                    return
            except asyncio.CancelledError:
                raise
            except Exception:  # a Redis blip: the next beat tries again
                log.warning("heartbeat of %s failed", self.thread, exc_info=True)


@asynccontextmanager
async def running_worker(
    runner: TurnRunner, timing: WorkerTiming
) -> AsyncIterator[Worker[Context]]:
    """A saq worker running turns in this process until the block exits (then: graceful)."""
    if not isinstance(runner.queue, TurnJobQueue):
        raise TypeError("a turn worker needs the Redis job queue")
    runner.queue.orphans = runner.requeue_orphans  # its sweep's second rule
    worker = QuietWorker(  # its signal handlers are the process's own
        runner.queue,
        functions=[(JOB_FUNCTION, runner.answer_turn)],
        concurrency=timing.concurrency,
        timers={"sweep": timing.sweep_s, "abort": 1, "schedule": 1, "worker_info": 10},
        dequeue_timeout=1,  # idle slots notice a stop within a second
        shutdown_grace_period_s=int(timing.shutdown_grace_s),
        cancellation_hard_deadline_s=3,
    )
    task = asyncio.create_task(worker.start(), name="turn worker")
    try:
        yield worker
    finally:
        runner.stopping = True
        started = time.monotonic()
        await worker.stop()  # no new jobs; timers (sweep, stats) have nothing to finish
        with contextlib.suppress(asyncio.CancelledError):
            await task
        log.info("turn worker stopped in %.1fs", time.monotonic() - started)
