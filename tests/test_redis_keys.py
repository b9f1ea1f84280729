"""Every key the bot writes to Redis expires, or is one of a few named, capped keys."""

from __future__ import annotations

import asyncio
import fnmatch

import redis.asyncio as aioredis

from bot.process.server import RunningBot
from sandbox import GeminiRequest, GeminiSimulator, Reply
from sandbox.slack import SlackDriver, SlackSimulator
from tests.gates_fixtures import APPROVER, SAFE
from tests.proposals import SCALE_UP

ROOT = "1700000000.000100"
SATISFIED = Reply.call(
    "SubmitVerdict",
    result="satisfied",
    explanation="ok",
    criteria=[{"name": "cause stated", "passed": True}],
)

# Keys without a TTL on purpose, each bounded by a cap (docs/operating.md § Redis keys).
CAPPED = [
    "{prefix}:audit",  # a stream trimmed to AUDIT_MAXLEN entries
    "{prefix}:audit:head",  # one key: the chain's newest entry
    "{prefix}:audit:checkpoint",  # one key: the last entry trimmed
    "{prefix}:actions:stopped",  # one key: the runtime stop, until an approver starts actions
    # saq's queue while jobs are unfinished: its lists hold only waiting and running jobs,
    # and a job's key gets saq's TTL when the job finishes.
    "saq:{prefix}:turns:queued",
    "saq:{prefix}:turns:active",
    "saq:{prefix}:turns:incomplete",
    "saq:job:{prefix}:turns:*",
    "saq:{prefix}:actions:queued",  # the executions queue, as the turns'
    "saq:{prefix}:actions:active",
    "saq:{prefix}:actions:incomplete",
    "saq:job:{prefix}:actions:*",
]


async def _keys_without_ttl(
    redis: aioredis.Redis, prefix: str, team: str, *, settled: bool = True
) -> list[str]:
    """This bot's keys that neither expire nor match a named exception: its own (under its
    prefix) and, once work has settled, the libraries' (checkpoints and queue jobs name the
    test's team; the checkpointer sets its TTL just after writing, so not mid-turn)."""
    allowed = [p.format(prefix=prefix) for p in CAPPED]
    found = []
    async for raw in redis.scan_iter(count=1000):
        key = raw.decode()
        if not (key.startswith(f"{prefix}:") or (settled and (prefix in key or team in key))):
            continue
        if await redis.ttl(key) == -1 and not any(fnmatch.fnmatchcase(key, p) for p in allowed):
            found.append(key)
    return sorted(found)


async def test_a_burst_of_traffic_leaves_no_key_without_a_ttl_but_the_capped_ones(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    redis_client: aioredis.Redis,
) -> None:
    turn_running = asyncio.Event()

    def answering(request: GeminiRequest) -> Reply:
        turn_running.set()  # the reply's turn is queued, leased and recorded meanwhile
        return Reply(parts=({"text": "It is saturated."},), delay_s=1.0)

    gemini.script(
        SCALE_UP,
        SAFE,
        Reply.text("Proposed a scale-up; it needs approval."),
        SATISFIED,
        answering,
        SATISFIED,
    )
    prefix = bot.services.memory.prefix
    await driver.slash("/rubric", "set cause stated", user=APPROVER)
    assert await bot.services.jobs.join(15)
    after_the_rubric_is_set = await _keys_without_ttl(redis_client, prefix, driver.team)
    await driver.mention("scale up?", ts=ROOT)
    assert await bot.services.jobs.join(15)
    await driver.reply("why?", ts="1700000100.000100", thread_ts=ROOT)
    await asyncio.wait_for(turn_running.wait(), 10)
    during_a_turn = await _keys_without_ttl(redis_client, prefix, driver.team, settled=False)
    assert await bot.services.jobs.join(15)
    with_a_pending_card = await _keys_without_ttl(redis_client, prefix, driver.team)

    answer, card, *_ = slack.thread("C1", ROOT)
    approve = next(b for b in card.blocks if b["type"] == "actions")["elements"][0]
    await driver.click(
        "approve_action", approve["value"], user=APPROVER, channel="C1", message_ts=card.ts
    )
    steps = answer.blocks[-1]["elements"][0]
    await driver.click(
        "show_steps", steps["value"], user=APPROVER, channel="C1", message_ts=answer.ts
    )
    assert await bot.services.jobs.join(15)
    after_the_click = await _keys_without_ttl(redis_client, prefix, driver.team)

    found = {
        "after the rubric is set": after_the_rubric_is_set,
        "during a turn": during_a_turn,
        "with a pending card": with_a_pending_card,
        "after the click": after_the_click,
    }
    assert {moment: keys for moment, keys in found.items() if keys} == {}
