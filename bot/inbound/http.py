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

from bot.process.metrics import ACK_SECONDS, EVENTS_RECEIVED

log = logging.getLogger(__name__)

SLACK_PATH = "/slack/events"
TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"


def slack_endpoint(
    app: AsyncApp, signing_secret: str
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The handler for SLACK_PATH (every method is counted; only POST is served). A signed
    body Bolt cannot take — not a JSON object, a form whose `payload` is not one, an
    `event` that is not an object — is the sender's mistake: 400 (Bolt would fail on it
    with a 500, which Slack retries). Unsigned, it is refused as Bolt refuses any unsigned
    request: 401; so is a request whose timestamp header is not a number, and a body that
    is not UTF-8 (slack_sdk's signature check reads the body as text)."""
    verifier = SignatureVerifier(signing_secret)

    def signed(raw: bytes, request: web.Request) -> bool:
        try:
            return verifier.is_valid_request(raw, dict(request.headers))
        except (ValueError, TypeError):  # a body that is not UTF-8, say
            return False

    async def refuse(raw: bytes, request: web.Request) -> web.Response:
        if not signed(raw, request):
            return web.json_response({"error": "invalid request"}, status=401)
        log.warning("refused a malformed %s body on %s", request.content_type, request.path)
        return web.json_response({"error": "malformed request body"}, status=400)

    async def handle(request: web.Request) -> web.Response:
        # Bolt acknowledges a Slack request by answering it: the answer's delay is the ack.
        EVENTS_RECEIVED.inc()
        started = time.perf_counter()
        try:
            if request.method != "POST":
                raise web.HTTPMethodNotAllowed(request.method, ["POST"])
            raw = await request.read()
            timestamp = request.headers.get(TIMESTAMP_HEADER)
            if timestamp is not None and not timestamp.isdigit():
                return web.json_response({"error": "invalid request"}, status=401)
            try:
                bolt_request = AsyncBoltRequest(
                    body=raw.decode(),
                    query=request.query_string,
                    headers=request.headers,  # type: ignore[arg-type]
                )
            # Bolt's parse fails on invalid JSON or bytes that are not UTF-8, its context
            # building on a body of the wrong shape (a list, a string where an object goes,
            # nesting deeper than Python recurses): whatever it raises, the body is refused.
            except Exception:
                return await refuse(raw, request)
            body = bolt_request.body
            if not isinstance(body, dict) or not isinstance(body.get("event", {}), dict):
                return await refuse(raw, request)
            return await to_aiohttp_response(await app.async_dispatch(bolt_request))
        finally:
            ACK_SECONDS.observe(time.perf_counter() - started)

    return handle
