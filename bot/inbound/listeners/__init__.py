"""Bolt listeners: thin functions that hand Slack payloads to the services
(`bot.process.services`)."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.inbound.listeners import actions, commands, home, mentions, shortcuts
from bot.process.services import Services


def register_listeners(app: AsyncApp, services: Services) -> None:
    for listeners in (mentions, actions, commands, shortcuts, home):
        listeners.register(app, services)
