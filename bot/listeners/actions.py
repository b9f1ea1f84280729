"""Buttons: Approve, Reject, Reset breaker, Steps. Acknowledged at once, then handled."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.cards import Click
from bot.services import Services


def _click(body: dict[str, Any]) -> tuple[str, str, str, str]:
    """(value, user, channel, message ts) of the message the button is on: its container."""
    action = body["actions"][0]
    container = body.get("container") or {}
    channel = container.get("channel_id") or body.get("channel", {}).get("id", "")
    message_ts = container.get("message_ts") or body.get("message", {}).get("ts", "")
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

    async def reset_breaker(ack: AsyncAck, body: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        await ack()
        await services.cards.reset_breaker(*_click(body))

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
    app.action("reset_breaker")(reset_breaker)
    app.action("show_steps")(steps)
