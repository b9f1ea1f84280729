"""Slack's HTTP endpoint (`/slack/events`): the body read and parsed once, by Bolt's own
request, then Bolt's dispatch (signature check, listeners, ack) and Bolt's aiohttp response.

In place of `AsyncApp.web_app()`, which would parse every body twice here (once to tell a
malformed one from a valid one, once in Bolt) under two middlewares: the ack of each
mention is the 200 Slack waits for, and a burst of them shares one event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier

from bot.metrics import ACK_SECONDS, EVENTS_RECEIVED

log = logging.getLogger(__name__)

SLACK_PATH = "/slack/events"


def slack_endpoint(
    app: AsyncApp, signing_secret: str
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The POST handler for SLACK_PATH. A signed body that is not a JSON object, or a form
    whose `payload` is not one, is the sender's mistake: 400 (Bolt would fail on it with a
    500, which Slack retries). Unsigned, it is refused as Bolt refuses any unsigned
    request: 401."""
    verifier = SignatureVerifier(signing_secret)

    async def refuse(raw: bytes, request: web.Request) -> web.Response:
        if not verifier.is_valid_request(raw, dict(request.headers)):
            return web.json_response({"error": "invalid request"}, status=401)
        log.warning("refused a malformed %s body on %s", request.content_type, request.path)
        return web.json_response({"error": "malformed request body"}, status=400)

    async def handle(request: web.Request) -> web.Response:
        # Bolt acknowledges a Slack request by answering it: the answer's delay is the ack.
        EVENTS_RECEIVED.inc()
        started = time.perf_counter()
        try:
            raw = await request.read()
            try:
                bolt_request = AsyncBoltRequest(
                    body=raw.decode(),
                    query=request.query_string,
                    headers=request.headers,  # type: ignore[arg-type]
                )
            # Bolt's parse fails on invalid JSON or bytes that are not UTF-8 (ValueError),
            # its context building on a body that is not an object.
            except (ValueError, AttributeError, TypeError):
                return await refuse(raw, request)
            if not isinstance(bolt_request.body, dict):
                return await refuse(raw, request)
            return await to_aiohttp_response(await app.async_dispatch(bolt_request))
        finally:
            ACK_SECONDS.observe(time.perf_counter() - started)

    return handle


__all__ = ["SLACK_PATH", "slack_endpoint"]
