"""`/rubric`. Replies go to the command's response_url, which works in every channel the
command can be run in; `chat.postEphemeral` fails where the bot is not a member."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from bot.process.services import Services

log = logging.getLogger(__name__)


def register(app: AsyncApp, services: Services) -> None:
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
