"""`app_mention` everywhere, and plain replies in threads the bot is already in.

The work happens in listener middleware, which Bolt runs *before* it acknowledges an event:
the turn is recorded (its thread joined, its job queued) before Slack hears 200, and a
failure to record it is a 500 that Slack retries (a job that could not be queued is queued
just after, or by the workers' orphan sweep). The listeners themselves have nothing left to do.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_bolt.response import BoltResponse

from bot.process.services import Services

log = logging.getLogger(__name__)

# A plain reply, one also sent to the channel, one with a screenshot: all questions.
QUESTION_SUBTYPES = (None, "thread_broadcast", "file_share")
_ID = re.compile(r"[A-Za-z0-9_-]+")  # Slack's team, channel, user and event ids
_TS = re.compile(r"[0-9]+\.[0-9]+")  # a message ts: seconds.micros


def well_formed(body: dict[str, Any], event: dict[str, Any]) -> bool:
    """The fields a turn is made of, as Slack sends them: anything else (a signed request
    of the wrong shape) would become a turn under a garbage key, or fail as a 500 that
    Slack retries for nothing."""
    optional = (
        (_ID, body.get("team_id")),
        (_ID, event.get("user")),
        (_ID, event.get("user_team")),
        (_ID, body.get("enterprise_id")),
        (_TS, event.get("thread_ts")),
        (_ID, body.get("event_id")),
    )
    return (
        _fullmatch(_ID, event.get("channel"))
        and _fullmatch(_TS, event.get("ts"))
        and all(value is None or _fullmatch(pattern, value) for pattern, value in optional)
        and isinstance(event.get("text", ""), str)
    )


def _fullmatch(pattern: re.Pattern[str], value: object) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


Record = Callable[[dict[str, Any], dict[str, Any], AsyncBoltContext], Awaitable[None]]


def recording(record: Record) -> Callable[..., Awaitable[BoltResponse]]:
    """`record` as listener middleware: run before Bolt acknowledges the event."""

    async def middleware(
        body: dict[str, Any],
        event: dict[str, Any],
        context: AsyncBoltContext,
        next: Callable[[], Awaitable[BoltResponse]],
    ) -> BoltResponse:
        await record(body, event, context)
        return await next()

    return middleware


def register(app: AsyncApp, services: Services) -> None:
    async def deliver(body: dict[str, Any], event: dict[str, Any], mentioned: bool) -> None:
        await services.conversations.on_message(
            team=body.get("team_id", ""),
            channel=event["channel"],
            user=event.get("user", ""),
            text=event.get("text", ""),
            ts=event["ts"],
            thread_ts=event.get("thread_ts"),
            event_id=body.get("event_id"),
            mentioned=mentioned,
            user_team=str(event.get("user_team") or ""),
            enterprise=str(body.get("enterprise_id") or ""),
        )

    async def record_mention(
        body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        if _malformed(body, event):
            return
        await deliver(body, event, mentioned=True)

    channels = services.alerts.policy.channels

    async def record_reply(
        body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        # A top-level message another app or bot posted (not ours): maybe an alert.
        by_app = bool(event.get("bot_id")) or event.get("subtype") == "bot_message"
        ours = event.get("bot_id") == context.bot_id or event.get("user") == context.bot_user_id
        posted_alert = by_app and not ours and not event.get("thread_ts")
        if channels and event.get("channel") in channels and posted_alert:
            if not _malformed(body, event):
                await services.alerts.on_posted(body.get("team_id", ""), event)
            return
        if (
            event.get("subtype") not in QUESTION_SUBTYPES
            or event.get("bot_id")
            or not event.get("thread_ts")
        ):
            return  # edits, joins, bots, and top-level chatter are not questions
        if _malformed(body, event):
            return
        if f"<@{context.bot_user_id}>" not in event.get("text", ""):
            await deliver(body, event, mentioned=False)  # a mention: app_mention carries it

    async def recorded() -> None:
        """Acknowledged by Bolt; the middleware already did the work."""

    app.event("app_mention", middleware=[recording(record_mention)])(recorded)
    app.event("message", middleware=[recording(record_reply)])(recorded)


def _malformed(body: dict[str, Any], event: dict[str, Any]) -> bool:
    if well_formed(body, event):
        return False
    # Acknowledged all the same: Slack sending it again would not make it well formed.
    log.warning("ignored a %s event with malformed fields", event.get("type"))
    return True
