"""Bolt listeners: thin functions that hand Slack payloads to the services in `bot.app`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slack_bolt.async_app import AsyncApp

from bot.listeners import actions, commands, mentions, shortcuts

if TYPE_CHECKING:
    from bot.app import Services


def register_listeners(app: AsyncApp, services: Services) -> None:
    mentions.register(app, services)
    actions.register(app, services)
    commands.register(app, services)
    shortcuts.register(app, services)
