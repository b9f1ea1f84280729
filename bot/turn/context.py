"""The incident thread as evidence: what was posted before a question that the
investigation has not seen yet.

`conversations.replies` is read page by page (oldest first, as Slack returns it) from the
thread's watermark (the newest message already handed over) up to the question itself. The
bot's own messages and earlier questions (already turns of the thread) are left out. Of the
rest, the thread's first message (usually the alert) and then the newest ones are kept, within
THREAD_CONTEXT_MESSAGES and THREAD_CONTEXT_CHARS.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound.posts import pages
from bot.turn.alerts import message_text, read_alert
from bot.turn.store import Turn, TurnStore
from gates.store import as_text
from graph.context import ContextMessage, ThreadContext

log = logging.getLogger(__name__)

PAGE = 200  # Slack recommends at most 200 per page
MAX_PAGES = 10  # a 2,000-message thread; beyond that the oldest replies are not read
MAX_MESSAGE_CHARS = 2000

# The watermark moves to ARGV[1] unless it is there or further already.
_FORWARD = """
local current = tonumber(redis.call('GET', KEYS[1]) or '')  -- nil: none, or not a ts
if current and current >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
"""


@dataclass(eq=False)
class ThreadReader:
    client: AsyncWebClient
    redis: aioredis.Redis
    turns: TurnStore
    max_messages: int  # THREAD_CONTEXT_MESSAGES
    max_chars: int  # THREAD_CONTEXT_CHARS
    ttl_s: int
    prefix: str = "tracegate"
    _bot: tuple[str, str] | None = field(default=None, init=False)  # our user id and bot id

    def __post_init__(self) -> None:
        self._forward = self.redis.register_script(_FORWARD)

    def _watermark(self, thread: str) -> str:
        return f"{self.prefix}:context-seen:{thread}"

    async def unseen(self, turn: Turn, *, include: str | None = None) -> ThreadContext:
        """What the thread holds before `turn` that no earlier turn handed over. `include`
        (a message ts) is kept even if the watermark passed it (a message shortcut's target).
        Slack failing is not the turn failing: the question is answered without context."""
        if self.max_messages == 0:
            return ThreadContext()
        try:
            raw = await self._read(turn)
        except SlackApiError as exc:
            log.warning("cannot read thread %s for context: %s", turn.thread, exc)
            return ThreadContext()
        watermark = _ts(await self.redis.get(self._watermark(turn.thread)))
        if self._bot is None:
            me = await self.client.auth_test()
            self._bot = (str(me.get("user_id", "")), str(me.get("bot_id", "")))
        ours = {i for i in self._bot if i}
        candidates = [
            m
            for m in raw
            if (float(m["ts"]) > watermark or m["ts"] == include)
            and m.get("user") not in ours
            and m.get("bot_id") not in ours
        ]
        asked = await self.turns.recorded(turn.thread, [m["ts"] for m in candidates])
        candidates = [m for m in candidates if m["ts"] not in asked]
        return self._bounded(candidates, root=turn.root)

    async def mark_seen(self, turn: Turn) -> None:
        """Everything before `turn` has been handed over (call once the answer is stored).
        Only forward, in one step: a late turn of the thread must not make context be read
        twice."""
        await self._forward(keys=[self._watermark(turn.thread)], args=[turn.ts, self.ttl_s])

    async def _read(self, turn: Turn) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        first = await self.client.conversations_replies(
            channel=turn.channel, ts=turn.root, latest=turn.ts, inclusive=False, limit=PAGE
        )
        async for page in pages(first, MAX_PAGES):
            messages += [m for m in page.get("messages") or [] if float(m["ts"]) < float(turn.ts)]
        unique = {m["ts"]: m for m in messages}  # the parent comes with every page
        return sorted(unique.values(), key=lambda m: float(m["ts"]))

    def _bounded(self, raw: list[dict[str, Any]], root: str) -> ThreadContext:
        """The root message first, then the newest, within the limits; oldest first."""
        ordered = sorted(raw, key=lambda m: (m["ts"] != root, -float(m["ts"])))
        kept: list[ContextMessage] = []
        alerts = []
        budget = self.max_chars
        for m in ordered:
            if len(kept) >= self.max_messages:
                break
            author = author_of(m)
            at = _at(m["ts"])
            text = message_text(m)[:MAX_MESSAGE_CHARS]
            cost = len(text) + len(author) + 40
            if not text or cost > budget:
                continue
            budget -= cost
            kept.append(ContextMessage(at=at, author=author, text=text))
            alert = read_alert(text, author, at)
            if alert is not None:
                alerts.append(alert)
        kept.sort(key=lambda c: c.at)
        alerts.sort(key=lambda a: a.starts_at or datetime.max.replace(tzinfo=UTC))
        context = ThreadContext(alerts=alerts, messages=kept, omitted=len(raw) - len(kept))
        # The markers and alert lines count too: drop the oldest replies until it all fits.
        while len(context.render()) > self.max_chars and len(context.messages) > 1:
            drop = 1 if context.messages[0].at == _at(root) else 0
            context.messages.pop(drop)
            context.omitted += 1
        return context


def _at(ts: str) -> datetime:
    return datetime.fromtimestamp(float(ts), UTC)


def author_of(message: dict[str, Any]) -> str:
    if message.get("bot_id") or message.get("subtype") == "bot_message":
        name = message.get("username") or (message.get("bot_profile") or {}).get("name")
        return f"app {name or message.get('bot_id')}"
    return f"person {message.get('user') or 'unknown'}"


def _ts(stored: bytes | str | None) -> float:
    """A stored watermark; 0 (nothing seen) when missing or not a ts."""
    try:
        return float(as_text(stored)) if stored is not None else 0.0
    except ValueError:
        return 0.0
