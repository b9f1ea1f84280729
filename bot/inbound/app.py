"""Building the Bolt app: its client, error handler and listeners, around the services."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.response import BoltResponse

from bot.inbound.listeners import register_listeners
from bot.process.services import Services
from bot.process.settings import Settings

log = logging.getLogger(__name__)


def build_app(settings: Settings, services: Services) -> AsyncApp:
    secret = settings.slack.signing_secret
    socket_mode = settings.slack.app_token is not None
    app = AsyncApp(
        client=services.client,
        signing_secret=secret.get_secret_value() if secret else "",
        # Socket Mode is authenticated by the app token; there are no signatures to check.
        request_verification_enabled=not socket_mode,
        logger=log,
        # Bolt's default for a request no listener takes is a 404, which Slack retries.
        raise_error_for_unhandled_request=True,
    )
    app.error(_on_error)
    register_listeners(app, services)
    return app


async def _on_error(error: Exception, body: dict[str, Any]) -> BoltResponse | None:
    """A signed request for nothing we handle (an unknown action id, interaction or event
    type) is acknowledged and logged; a failing listener is logged and stays a 500."""
    if isinstance(error, BoltUnhandledRequestError):
        actions = [a.get("action_id") for a in body.get("actions") or [] if isinstance(a, dict)]
        event = body.get("event") if isinstance(body.get("event"), dict) else {}
        log.warning(
            "ignored a Slack request no listener handles: type=%s event=%s actions=%s",
            body.get("type") or body.get("command"),
            (event or {}).get("type"),
            actions,
        )
        return BoltResponse(status=200, body="")
    log.error("a Slack listener failed: %s", error, exc_info=error)
    return None
