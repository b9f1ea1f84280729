"""Bolt listeners: thin functions that hand Slack payloads to the services
(`bot.process.services`). Mentions and replies are `mentions`', buttons `actions`'; the
message shortcut, `/rubric` and the App Home tab are here."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from bot.inbound.listeners import actions, mentions
from bot.outbound.home import START_ACTIONS, STOP_ACTIONS
from bot.process.services import Services

log = logging.getLogger(__name__)


def register_listeners(app: AsyncApp, services: Services) -> None:
    mentions.register(app, services)
    actions.register(app, services)

    # `/rubric`. Replies go to the command's response_url, which works in every channel the
    # command can be run in; `chat.postEphemeral` fails where the bot is not a member.
    async def rubric(ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        services.jobs.adopt_current()
        await ack()
        reply = await services.rubric_command.run(
            str(command.get("team_id", "")),
            command["channel_id"],
            command["user_id"],
            command.get("text", ""),
        )
        sent = await respond(response_type="ephemeral", text=reply.text[:3000], blocks=reply.blocks)
        if sent.status_code != 200:
            log.warning("Slack refused the /rubric reply: %s %s", sent.status_code, sent.body)

    app.command("/rubric")(rubric)

    async def investigate_message(ack: AsyncAck, body: dict[str, Any]) -> None:
        """The message shortcut "Investigate with tracegate" (on an alert, say)."""
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

    # The App Home tab: published for the person who opens it; its Stop / Start actions button.
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
        asker = actions.asker_of(body)
        refusal = await services.cards.access.refusal(asker)
        # The button's action id says which, never its value (a payload field like any other).
        value = "stop" if body["actions"][0].get("action_id") == STOP_ACTIONS else "start"
        in_group = await services.cards.approvers.contains(asker.user)
        note = await services.home.switched(asker.user, in_group, value, refusal)
        await services.home.opened(asker.user, note)

    app.action(STOP_ACTIONS)(switched)
    app.action(START_ACTIONS)(switched)
