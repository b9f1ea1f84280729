"""A run saq aborts as stuck is an attempt: MAX_ATTEMPTS bounds a turn whose runs keep
stalling their worker, as it bounds one whose runs crash it. Only a worker that is stopping
hands its turn back uncounted. Real processes (queue mode), real Redis, the Slack and Gemini
simulators; the stall is a real one (SIGSTOP past the job's heartbeat)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable

import redis.asyncio as aioredis
from saq.job import Status

from bot.turn.worker import turn_queue
from sandbox import GeminiSimulator, Reply
from sandbox.fleet import Fleet
from sandbox.slack import SlackMessage, SlackSimulator
from tests.fleet_fixtures import ANSWER, driver_for, requests_reach
from tests.gates_fixtures import until

GAVE_UP = "I could not answer this after 1 attempts"


async def _job_status_becomes(
    redis_url: str, prefix: str, turn_id: str, status: Status, timeout_s: float = 30
) -> None:
    """Until the turn's saq job has `status` (bounded), read through saq's own queue."""
    redis = aioredis.from_url(redis_url)
    queue = turn_queue(redis, prefix)

    async def reached() -> bool:
        job = await queue.job(turn_id)
        return job is not None and job.status == status

    try:
        await until(reached, f"the job of {turn_id} to become {status}", timeout_s)
    finally:
        await redis.aclose()


async def test_a_run_aborted_as_stuck_counts_as_an_attempt(
    fleet_for: Callable[..., Fleet], slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    """MAX_ATTEMPTS=1. The one run stalls (its worker stopped past the job's heartbeat);
    the other worker's sweep aborts the job; the stalled worker wakes while the abort is
    pending and cancels the run as saq's abort asks. That run was the turn's attempt: the
    next run gives the turn up, it does not answer (as after a crash)."""
    gemini.script(
        Reply(parts=({"text": "The stalled run's answer."},), delay_s=60),  # never read
        Reply.text(ANSWER),  # a run after the stalled one: it must not get this far
    )
    fleet = fleet_for(WORKER_MODE="queue", MAX_ATTEMPTS="1")
    serve, stalled = fleet.serve(), fleet.worker()
    await asyncio.gather(serve.ready(), stalled.ready())
    driver = driver_for(serve.url)
    root = slack.new_ts()
    assert (await driver.mention("checkout 500s, why?", ts=root))[0] == 200
    turn_id = f"{driver.team}:C1:{root}@{root}"
    await requests_reach(gemini, 1)  # the run waits for the model

    stalled.signal(signal.SIGSTOP)
    sweeper = fleet.worker()
    await sweeper.ready()
    env = fleet.env
    await _job_status_becomes(env["REDIS_URL"], env["REDIS_PREFIX"], turn_id, Status.ABORTING)
    stalled.signal(signal.SIGCONT)  # within the sweep's abort wait: the abort is seen

    thread = await _ended(slack, root, fleet)
    assert any(GAVE_UP in m.text for m in thread), [m.text for m in thread]
    assert not any(ANSWER in m.text for m in thread)
    assert len(gemini.requests) == 1


async def _ended(slack: SlackSimulator, root: str, fleet: Fleet) -> list[SlackMessage]:
    """The thread once the turn ended either way: given up, or answered."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        thread = slack.thread("C1", root)
        if any(GAVE_UP in m.text or ANSWER in m.text for m in thread):
            return thread
        await asyncio.sleep(0.1)
    raise AssertionError(f"the turn did not end within 60s\n{fleet.logs()}")


async def test_a_turn_a_stopping_worker_hands_back_is_not_counted(
    fleet_for: Callable[..., Fleet], slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    """The other side: MAX_ATTEMPTS=1, the worker stopped (SIGTERM) mid-turn past its
    SHUTDOWN_GRACE hands the turn back; that run is not an attempt, and another worker
    answers."""
    gemini.script(
        Reply(parts=({"text": "The stopped run's answer."},), delay_s=60),  # never read
        Reply.text(ANSWER),
    )
    fleet = fleet_for(WORKER_MODE="queue", MAX_ATTEMPTS="1", SHUTDOWN_GRACE="2")
    serve, leaving = fleet.serve(), fleet.worker()
    await asyncio.gather(serve.ready(), leaving.ready())
    driver = driver_for(serve.url)
    root = slack.new_ts()
    assert (await driver.mention("checkout 500s, why?", ts=root))[0] == 200
    await requests_reach(gemini, 1)
    staying = fleet.worker()
    await staying.ready()

    leaving.signal(signal.SIGTERM)
    assert await leaving.exited(15) == 0

    thread = await _ended(slack, root, fleet)
    assert any(ANSWER in m.text for m in thread), [m.text for m in thread]
    assert not any(GAVE_UP in m.text for m in thread)
