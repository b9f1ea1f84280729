"""The alert webhooks `tracegate serve` offers when ALERT_WEBHOOK_TOKEN is set:
`POST /alerts/alertmanager` (Alertmanager's webhook receiver, payload version 4) and
`POST /alerts/grafana` (Grafana Alerting's webhook contact point).

Authenticated with `Authorization: Bearer <ALERT_WEBHOOK_TOKEN>` (Alertmanager's
`http_config.authorization`, Grafana's "Authorization Header"): a missing or wrong token is
a 401 and records nothing. A body that is not a notification is a 400 naming the field. The
notification is recorded in Redis before the 200; a failure to record it is a 503, which
both senders retry. What the group then needs (its message, an investigation) is done after
the answer, by this process — or, if it dies first, by any process's reconcile loop.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web

from bot.turn.alert_desk import AlertDesk
from bot.turn.notifications import MAX_BODY_BYTES, PayloadError, Source, parse

log = logging.getLogger(__name__)

RECORD_TIMEOUT_S = 5.0
PATHS: dict[str, Source] = {"/alerts/alertmanager": "alertmanager", "/alerts/grafana": "grafana"}
_CHANNEL = re.compile(r"[A-Z0-9]{2,30}")  # a Slack channel id, as `?channel=` names it

Submit = Callable[[Coroutine[Any, Any, None], str], object]


def alert_routes(desk: AlertDesk, token: str, submit: Submit) -> list[web.RouteDef]:
    """The two routes; `submit(coroutine, name)` runs the group's processing after the 200."""
    expected = f"Bearer {token}".encode()

    async def handle(request: web.Request) -> web.Response:
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            return web.json_response({"error": "missing or wrong bearer token"}, status=401)
        channel = request.query.get("channel")
        if channel is not None and not _CHANNEL.fullmatch(channel):
            return web.json_response(
                {"error": "channel: not a Slack channel id (like C0123ABCD)"}, status=400
            )
        if request.content_length and request.content_length > MAX_BODY_BYTES:
            return web.json_response({"error": "the body is too large"}, status=413)
        try:
            notification = parse(await request.read(), PATHS[request.path])
        except PayloadError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        try:
            # within the senders' patience (Alertmanager's is max(group_interval, 10 s)):
            # a Redis that is failing over answers 503 and the sender tries again
            async with asyncio.timeout(RECORD_TIMEOUT_S):
                gid = await desk.receive(notification, channel)
        except ValueError as exc:  # no channel to post in
            return web.json_response({"error": str(exc)}, status=400)
        except Exception:
            log.exception("an alert notification could not be recorded")
            return web.json_response({"error": "not recorded; send it again"}, status=503)
        submit(desk.process(gid), f"alert group {gid}")
        return web.json_response({"status": "recorded", "group": gid})

    return [web.post(path, handle) for path in PATHS]
