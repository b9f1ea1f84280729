"""`app_mention` everywhere, and plain replies in threads the bot is already in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncApp, AsyncBoltContext

if TYPE_CHECKING:
    from bot.app import Services


def register(app: AsyncApp, services: Services) -> None:
    async def deliver(body: dict[str, Any], event: dict[str, Any], mentioned: bool) -> None:
        await services.conversations.on_message(
            team=str(body.get("team_id", "")),
            channel=event["channel"],
            user=event.get("user", ""),
            text=event.get("text", ""),
            ts=event["ts"],
            thread_ts=event.get("thread_ts"),
            event_id=body.get("event_id"),
            mentioned=mentioned,
        )

    async def on_mention(body: dict[str, Any], event: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        await deliver(body, event, mentioned=True)

    async def on_message(
        body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        services.jobs.adopt_current()
        if event.get("subtype") or event.get("bot_id") or not event.get("thread_ts"):
            return  # edits, joins, bots, and top-level chatter are not questions
        if f"<@{context.bot_user_id}>" in event.get("text", ""):
            return  # a mention: the app_mention event carries it
        await deliver(body, event, mentioned=False)

    app.event("app_mention")(on_mention)
    app.event("message")(on_message)
