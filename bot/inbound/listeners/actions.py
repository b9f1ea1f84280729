"""Buttons: Approve, Reject, Reset breaker, Steps, 👍/👎 (and the "what was wrong?" form).
Acknowledged at once, then handled."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.outbound.blocks import FEEDBACK_ACTION, REASON_ACTION, REASON_BLOCK, REASON_CALLBACK
from bot.outbound.cards import Click
from bot.process.services import Services
from bot.turn.access import Asker


def _click(body: dict[str, Any]) -> tuple[str, str, str, str]:
    """(value, user, channel, message ts) of the message the button is on: its container."""
    action = body["actions"][0]
    container = body.get("container") or {}
    channel = container.get("channel_id") or body.get("channel", {}).get("id", "")
    message_ts = container.get("message_ts") or body.get("message", {}).get("ts", "")
    return action.get("value", ""), body["user"]["id"], channel, message_ts


def _in_thread(body: dict[str, Any]) -> tuple[str, str, Click]:
    """(value, user, where) of a click: the thread of the message the button is on."""
    value, user, channel, message_ts = _click(body)
    message = body.get("message") or {}
    root = message.get("thread_ts") or body.get("container", {}).get("thread_ts")
    team = (body.get("team") or {}).get("id") or body["user"].get("team_id", "")
    return value, user, Click(str(team), channel, root or message_ts)


def asker_of(body: dict[str, Any]) -> Asker:
    """Who clicked: their own workspace (`user.team_id`, another company's for a Slack
    Connect user), the installation's (`team.id`) and its Enterprise org."""
    user = body["user"]
    team = str((body.get("team") or {}).get("id") or "")
    enterprise = str((body.get("enterprise") or {}).get("id") or "")
    return Asker(user["id"], team, str(user.get("team_id") or ""), enterprise)


Handler = Callable[[str, Asker, str, str], Awaitable[None]]  # value, clicker, channel, ts


def _on_click(services: Services, handle: Handler) -> Callable[..., Awaitable[None]]:
    async def clicked(ack: AsyncAck, body: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        await ack()
        value, _, channel, message_ts = _click(body)
        await handle(value, asker_of(body), channel, message_ts)

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
        await services.cards.show_steps(*_in_thread(body))  # value: the answer's correlation id

    app.action("show_steps")(steps)

    async def feedback(ack: AsyncAck, body: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        await ack()
        await services.feedback.clicked(*_in_thread(body), body.get("trigger_id"))

    app.action(FEEDBACK_ACTION)(feedback)

    async def reason(ack: AsyncAck, body: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        await ack()
        view = body.get("view") or {}
        values = (view.get("state") or {}).get("values") or {}
        text = ((values.get(REASON_BLOCK) or {}).get(REASON_ACTION) or {}).get("value") or ""
        correlation_id = str(view.get("private_metadata") or "")
        await services.feedback.explained(body["user"]["id"], correlation_id, str(text))

    app.view(REASON_CALLBACK)(reason)
