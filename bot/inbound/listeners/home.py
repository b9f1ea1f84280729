"""The App Home tab: published for the person who opens it; its Stop / Start actions button."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.inbound.listeners.actions import asker_of
from bot.outbound.home import START_ACTIONS, STOP_ACTIONS
from bot.process.services import Services


def register(app: AsyncApp, services: Services) -> None:
    async def opened(event: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        user = event.get("user")
        if event.get("tab", "home") == "home" and isinstance(user, str) and user:
            await services.home.opened(user)

    app.event("app_home_opened")(opened)

    async def switched(ack: AsyncAck, body: dict[str, Any]) -> None:
        """Stop or start all actions (Slack asked the approver to confirm first)."""
        services.jobs.adopt_current()
        await ack()
        asker = asker_of(body)
        refusal = await services.cards.access.refusal(asker)
        # The button's action id says which, never its value (a payload field like any other).
        value = "stop" if body["actions"][0].get("action_id") == STOP_ACTIONS else "start"
        in_group = await services.cards.approvers.contains(asker.user)
        note = await services.home.switched(asker.user, in_group, value, refusal)
        await services.home.opened(asker.user, note)

    app.action(STOP_ACTIONS)(switched)
    app.action(START_ACTIONS)(switched)
