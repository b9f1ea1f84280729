"""`/rubric`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.rubric_command import as_kwargs

if TYPE_CHECKING:
    from bot.app import Services


def register(app: AsyncApp, services: Services) -> None:
    async def rubric(ack: AsyncAck, command: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        await ack()
        reply = await services.rubric_command.run(
            str(command.get("team_id", "")), command["channel_id"], command.get("text", "")
        )
        await services.client.chat_postEphemeral(
            channel=command["channel_id"], user=command["user_id"], **as_kwargs(reply)
        )

    app.command("/rubric")(rubric)
