"""What happens before Slack hears 200, and what is left until after it (the real server,
signed requests, real Redis; `WORKER_MODE=queue` leaves the turns to workers)."""

import asyncio
import gc
import time

import redis.asyncio as aioredis

from bot.turn.store import turn_id_of
from sandbox import GeminiSimulator, Reply
from sandbox.slack import SlackDriver, SlackSimulator
from tests.slack_fixtures import SECRET, BotFactory

ROOT = "1700000000.000100"


async def test_a_mention_s_turn_is_recorded_and_its_thread_joined_before_the_200(
    bot_for: BotFactory, slack: SlackSimulator
) -> None:
    async with bot_for(worker_mode="queue") as bot:
        driver = SlackDriver(bot.url, SECRET, team="TACK", slack=slack)
        status, _ = await driver.mention("why?", ts=ROOT, event_id="EvAck")

        turn = await bot.services.turns.get(turn_id_of(f"TACK:C1:{ROOT}", ROOT))
        joined = await bot.services.memory.joined("TACK", "C1", ROOT)
        recent = await bot.services.memory.recent_threads("TACK", "C1", 5)

    assert status == 200
    assert turn is not None
    assert (turn.state, turn.text, turn.event_id) == ("queued", "why?", "EvAck")
    assert joined and recent == [ROOT]


async def test_a_job_that_cannot_be_queued_neither_fails_the_ack_nor_loses_the_turn(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator, redis_url: str
) -> None:
    gemini.script(Reply.text("answered all the same"))
    async with bot_for(worker_mode="inline", recovery=10) as bot:
        prefix = bot.services.turns.prefix
        broken = f"saq:{prefix}:turns:incomplete"  # saq's index of jobs, of the wrong type
        redis = aioredis.from_url(redis_url)
        await redis.set(broken, "not a sorted set")
        driver = SlackDriver(bot.url, SECRET, team="TACK", slack=slack)
        status, _ = await driver.mention("why?", ts=ROOT)
        await asyncio.sleep(0.5)  # the job's enqueue fails meanwhile
        await redis.delete(broken)
        await redis.aclose()
        # The workers' sweep finds the unfinished turn without a job and queues it.
        deadline = time.monotonic() + 30
        while [m.text for m in slack.thread("C1", ROOT)] != ["answered all the same"]:
            assert time.monotonic() < deadline, "the turn was never answered"
            await asyncio.sleep(0.1)

    assert status == 200


async def test_the_start_up_heap_is_out_of_the_garbage_collector_s_scans_while_serving(
    bot_for: BotFactory,
) -> None:
    gc.unfreeze()
    async with bot_for(worker_mode="queue"):
        frozen_while_serving = gc.get_freeze_count()
    frozen_after = gc.get_freeze_count()

    assert frozen_while_serving > 10_000  # modules, compiled graphs, clients
    assert frozen_after == 0  # a process that starts the bot again keeps nothing frozen


async def test_a_mention_with_a_lone_surrogate_is_recorded_not_refused(
    bot_for: BotFactory, slack: SlackSimulator
) -> None:
    async with bot_for(worker_mode="queue") as bot:
        driver = SlackDriver(bot.url, SECRET, team="TSUR", slack=slack)
        status, _ = await driver.mention("why \udcff 500s?", ts=ROOT)
        turn = await bot.services.turns.get(turn_id_of(f"TSUR:C1:{ROOT}", ROOT))

    assert status == 200
    assert turn is not None and turn.text == "why ? 500s?"
