"""Every key the bot writes to Redis expires, or is one of a few named, capped keys."""

from __future__ import annotations

import fnmatch

import redis.asyncio as aioredis

from bot.server import RunningBot
from sandbox import GeminiSimulator, Reply
from sandbox.slack import SlackDriver, SlackSimulator
from tests.gates_fixtures import APPROVER, SAFE

ROOT = "1700000000.000100"
SATISFIED = Reply.call(
    "SubmitVerdict",
    result="satisfied",
    explanation="ok",
    criteria=[{"name": "cause stated", "passed": True}],
)

# Keys without a TTL on purpose, each bounded by a cap (README § Redis keys).
CAPPED = [
    "{prefix}:audit",  # a stream trimmed to AUDIT_MAXLEN entries
]
# gates/ families that still lack a TTL; another branch is giving them one. Empty this
# list once that work is merged: the test then holds gates/ to the same rule.
GATES_FAMILIES_PENDING = [
    "{prefix}:actions:thread:*",
    "{prefix}:breaker:executions:*",
    "{prefix}:breaker:state:*",
]


async def _keys_without_ttl(redis: aioredis.Redis, prefix: str, team: str) -> list[str]:
    """This bot's keys (its prefix; checkpoints and queue jobs name the test's team) that
    neither expire nor match a named exception."""
    allowed = [p.format(prefix=prefix) for p in CAPPED + GATES_FAMILIES_PENDING]
    found = []
    async for raw in redis.scan_iter(count=1000):
        key = raw.decode()
        if prefix not in key and team not in key:
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
    gemini.script(
        Reply.call(
            "propose_action",
            action="scale",
            namespace="shop",
            deployment="payment-api",
            replicas=6,
            reason="saturation",
        ),
        SAFE,
        Reply.text("Proposed a scale-up; it needs approval."),
        SATISFIED,
        Reply.text("It is saturated."),
        SATISFIED,
    )
    prefix = bot.services.memory.prefix
    await driver.slash("/rubric", "set cause stated", user=APPROVER)
    await driver.mention("scale up?", ts=ROOT)
    assert await bot.services.jobs.join(15)
    await driver.reply("why?", ts="1700000100.000100", thread_ts=ROOT)
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

    assert (with_a_pending_card, after_the_click) == ([], [])
