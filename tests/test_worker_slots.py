"""Jobs waiting for their thread never take every worker slot: a thread's head turn, its job
retried (a wait for model capacity, a crash), still gets a slot when more of the thread's
turns wait than the worker has slots (WORKER_CONCURRENCY). Real `tracegate` process, real
Redis, the Slack and Gemini simulators."""

from __future__ import annotations

import redis.asyncio as aioredis

from bot.turn.worker import turn_queue
from sandbox import GeminiSimulator, Reply
from sandbox.slack import SlackSimulator
from tests.fleet_fixtures import answered, driver_for, requests_reach, serving
from tests.gates_fixtures import until

ANSWERS = [f"Answer {n}: payment-api throws after the deploy." for n in (1, 2, 3)]


async def test_the_head_turn_gets_a_slot_when_waiters_fill_the_worker(
    slack: SlackSimulator, gemini: GeminiSimulator, fleet_for
) -> None:
    """Two slots, three turns in one thread. The head's model call is refused (429, retry in
    3 s): its job goes back to the queue and its slot to the next job. The two later turns
    wait for the head in both slots; the head's job, back in the queue, must still run."""
    gemini.script(
        Reply(status=429, error_message="3", delay_s=1.0),  # answered after 2 and 3 queue
        *(Reply.text(answer) for answer in ANSWERS),
    )
    fleet = fleet_for(WORKER_CONCURRENCY="2")
    serve = await serving(fleet)
    driver = driver_for(serve.url)
    root = slack.new_ts()
    assert (await driver.mention("checkout 500s, why?", ts=root))[0] == 200
    await requests_reach(gemini, 1)  # the head runs; its refusal is on its way
    later = [slack.new_ts(), slack.new_ts()]
    for question, ts in zip(("and since when?", "which deploy?"), later, strict=True):
        status, _ = await driver.mention(question, ts=ts, thread_ts=root)
        assert status == 200

    thread = await answered(slack, root, ANSWERS[2], fleet, timeout_s=60)

    texts = [m.text for m in thread]
    assert all(any(answer in text for text in texts) for answer in ANSWERS), texts
    # A slot given back is logged as a wait, not as saq's "Error processing job" …
    assert "Error processing job" not in serve.log()
    # … and spends none of the job's saq retries: each waiter's job ran once, as saq counts.
    redis = aioredis.from_url(fleet.env["REDIS_URL"])
    queue = turn_queue(redis, fleet.env["REDIS_PREFIX"])
    jobs = await queue.jobs(f"{driver.team}:C1:{root}@{ts}" for ts in later)
    await redis.aclose()
    assert [job.attempts if job else None for job in jobs] == [1, 1]

    # … and shows its placeholder (and its 👀) once, not at every return.
    def taken() -> list[int]:
        stamps = [c.args.get("timestamp") for c in slack.calls_to("reactions.add")]
        return [stamps.count(ts) for ts in later]

    # The outcome's reaction is added after the answer is delivered: waited for, bounded.
    await until(lambda: min(taken()) >= 2, "the outcome reactions", 10)
    assert taken() == [2, 2]  # 👀 once, then the outcome's
