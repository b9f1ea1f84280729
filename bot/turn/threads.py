"""What the bot remembers about Slack threads, in Redis so every replica shares it.

- event dedupe: Slack redelivers an event (same `event_id`) when it saw no 200 in 3 s;
- threads the bot is in (replies there continue the conversation without a mention), joined
  when a turn is recorded there, in the same round trip (`bot.turn.store`);
- each channel's recent threads (for `/rubric status` without a permalink);
- the channel's rubric (`/rubric set`);
- a run's steps with the thread they belong to (for the Steps button).

(Turns, their per-thread order and leases are in `bot.turn.store`; where an approval card was
posted is stored with its request.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from gates.store import as_text

DEDUPE_TTL_S = 3600  # Slack retries for about 5 minutes; keep a margin
# A channel's rubric is kept while the channel is in use: each answer there renews it.
RUBRIC_TTL_S = 90 * 24 * 3600
RECENT_THREADS_KEPT = 50


def thread_key(team: str, channel: str, thread_ts: str) -> str:
    return f"{team}:{channel}:{thread_ts}"


def membership_key(prefix: str, team: str, channel: str, thread_ts: str) -> str:
    """Set while the bot is in the thread: recording a turn there sets it (`bot.turn.store`)."""
    return f"{prefix}:thread:{thread_key(team, channel, thread_ts)}"


def recent_threads_key(prefix: str, team: str, channel: str) -> str:
    """The channel's latest RECENT_THREADS_KEPT threads the bot is in, by their ts."""
    return f"{prefix}:channel:{team}:{channel}:threads"


def in_channel(key: str, team: str, channel: str) -> bool:
    """Whether a thread key is of a thread in this channel."""
    return key.startswith(f"{team}:{channel}:")


@dataclass(eq=False)
class ThreadMemory:
    redis: aioredis.Redis
    ttl_s: int
    prefix: str = "tracegate"

    async def first_delivery(self, event_id: str) -> bool:
        """True the first time an event id is seen by any replica."""
        key = f"{self.prefix}:event:{event_id}"
        return bool(await self.redis.set(key, "1", nx=True, ex=DEDUPE_TTL_S))

    async def joined(self, team: str, channel: str, thread_ts: str) -> bool:
        """Whether the bot is in the thread (a turn was recorded there)."""
        return bool(await self.redis.exists(membership_key(self.prefix, team, channel, thread_ts)))

    async def recent_threads(self, team: str, channel: str, limit: int) -> list[str]:
        index = recent_threads_key(self.prefix, team, channel)
        return [as_text(ts) for ts in await self.redis.zrevrange(index, 0, limit - 1)]

    # --- channel rubric ---------------------------------------------------------------------
    async def channel_rubric(self, team: str, channel: str) -> str | None:
        """The channel's rubric; reading it (every answer does) keeps it RUBRIC_TTL_S more."""
        value = await self.redis.getex(f"{self.prefix}:rubric:{team}:{channel}", ex=RUBRIC_TTL_S)
        return as_text(value) if value is not None else None

    async def set_channel_rubric(self, team: str, channel: str, rubric: str | None) -> None:
        key = f"{self.prefix}:rubric:{team}:{channel}"
        if rubric:
            await self.redis.set(key, rubric, ex=RUBRIC_TTL_S)
        else:
            await self.redis.delete(key)

    # --- steps and cards ---------------------------------------------------------------------
    async def save_steps(
        self, thread: str, correlation_id: str, events: list[dict[str, Any]]
    ) -> None:
        saved = json.dumps({"thread": thread, "events": events}, default=str)
        await self.redis.set(f"{self.prefix}:steps:{correlation_id}", saved, ex=self.ttl_s)

    async def add_steps(self, correlation_id: str, events: list[dict[str, Any]]) -> None:
        """Events that came after the answer (its charts) added to its run's steps."""
        saved = await self.steps(correlation_id)
        if saved is not None:
            thread, earlier = saved
            await self.save_steps(thread, correlation_id, [*earlier, *events])

    async def steps(self, correlation_id: str) -> tuple[str, list[dict[str, Any]]] | None:
        """(the thread key of the answer, its run's events), while they are kept."""
        raw = await self.redis.get(f"{self.prefix}:steps:{correlation_id}")
        if raw is None:
            return None
        saved = json.loads(raw)
        return saved["thread"], saved["events"]
