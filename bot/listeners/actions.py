"""Buttons: Approve, Reject, Reset breaker, Steps. Acknowledged at once, then handled."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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


Handler = Callable[[str, str, str, str], Awaitable[None]]  # value, user, channel, message ts


def _on_click(services: Services, handle: Handler) -> Callable[..., Awaitable[None]]:
    async def clicked(ack: AsyncAck, body: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        await ack()
        await handle(*_click(body))

    return clicked


def register(app: AsyncApp, services: Services) -> None:
    cards = services.cards
    clicks = {
        "approve_action": cards.approve,
        "reject_action": cards.reject,
        "reset_breaker": cards.reset_breaker,
    }
    for action_id, handle in clicks.items():
        app.action(action_id)(_on_click(services, handle))

    async def steps(ack: AsyncAck, body: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        await ack()
        correlation_id, user, channel, message_ts = _click(body)
        message = body.get("message") or {}
        root = message.get("thread_ts") or body.get("container", {}).get("thread_ts")
        team = (body.get("team") or {}).get("id") or body["user"].get("team_id", "")
        clicked = Click(str(team), channel, root or message_ts)
        await services.cards.show_steps(correlation_id, user, clicked)

    app.action("show_steps")(steps)
