"""Buttons: Approve, Reject, Steps. Acknowledged at once, then handled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.cards import Click

if TYPE_CHECKING:
    from bot.app import Services


def _click(body: dict[str, Any]) -> tuple[str, str, str, str]:
    action = body["actions"][0]
    channel = body.get("channel", {}).get("id") or body["container"]["channel_id"]
    message_ts = body.get("container", {}).get("message_ts") or body["message"]["ts"]
    return action.get("value", ""), body["user"]["id"], channel, message_ts


def register(app: AsyncApp, services: Services) -> None:
    async def approve(ack: AsyncAck, body: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        await ack()
        await services.cards.approve(*_click(body))

    async def reject(ack: AsyncAck, body: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        await ack()
        await services.cards.reject(*_click(body))

    async def steps(ack: AsyncAck, body: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        await ack()
        correlation_id, user, channel, message_ts = _click(body)
        message = body.get("message") or {}
        root = message.get("thread_ts") or body.get("container", {}).get("thread_ts")
        team = (body.get("team") or {}).get("id") or body["user"].get("team_id", "")
        clicked = Click(str(team), channel, root or message_ts)
        await services.cards.show_steps(correlation_id, user, clicked)

    app.action("approve_action")(approve)
    app.action("reject_action")(reject)
    app.action("show_steps")(steps)
