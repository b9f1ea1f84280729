"""The App Home tab: published for the person who opens it."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp

from bot.process.services import Services


def register(app: AsyncApp, services: Services) -> None:
    async def opened(event: dict[str, Any]) -> None:
        services.jobs.adopt_current()
        user = event.get("user")
        if event.get("tab", "home") == "home" and isinstance(user, str) and user:
            await services.home.opened(user)

    app.event("app_home_opened")(opened)
