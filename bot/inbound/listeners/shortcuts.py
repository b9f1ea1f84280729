"""The message shortcut "Investigate with tracegate" (on an alert, say)."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.process.services import Services


def register(app: AsyncApp, services: Services) -> None:
    async def investigate_message(ack: AsyncAck, body: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        # Recorded (durable) before the ack: a failure here is an error Slack shows.
        await services.conversations.on_shortcut(
            team=str((body.get("team") or {}).get("id", "")),
            channel=body["channel"]["id"],
            user=body["user"]["id"],
            message=body["message"],
            user_team=str(body["user"].get("team_id") or ""),
            enterprise=str((body.get("enterprise") or {}).get("id") or ""),
        )
        await ack()

    app.shortcut("investigate_message")(investigate_message)
