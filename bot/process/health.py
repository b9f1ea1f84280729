"""The probes and /metrics that `tracegate serve` and `tracegate worker` answer on PORT.

- `/livez`: the process answers. No dependency is checked, so a Redis blip never makes
  Kubernetes restart every pod.
- `/readyz` (also served as `/healthz`, for probes configured with that path): Redis
  answers and is a primary (a replica, or a primary demoted in a failover, takes no writes),
  the checkpoint indexes exist, and Slack's `auth.test` passed once; 503 with the reason
  otherwise.
- `/metrics`: Prometheus text format.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

import redis.asyncio as aioredis
from aiohttp import web
from slack_sdk.web.async_client import AsyncWebClient

from bot.process.metrics import QueueStats, exposition
from bot.process.redis_policy import missing_indexes, not_primary

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 2.0


class Readiness:
    """What `/readyz` checks. `check_indexes=False`: a checkpointer that is not Redis's
    (the demo's embedded store) has no indexes to look for."""

    def __init__(self, redis: aioredis.Redis, *, prefix: str, check_indexes: bool = True) -> None:
        self.redis = redis
        self.prefix = prefix
        self.check_indexes = check_indexes
        self.slack_authenticated = False

    async def authenticate(self, client: AsyncWebClient, retry_s: float = 5.0) -> None:
        """Call `auth.test` until it passes once (a bad token stays unready, with a reason
        in the log, instead of failing every event later)."""
        for attempt in itertools.count():
            try:
                reply = await client.auth_test()
                self.slack_authenticated = True
                log.info(
                    "Slack auth.test passed: bot %s in team %s",
                    reply.get("user_id"),
                    reply.get("team_id"),
                )
                return
            except Exception as exc:
                if attempt == 0:
                    log.warning("Slack auth.test failed (not ready until it passes): %s", exc)
            await asyncio.sleep(retry_s)

    async def problems(self) -> dict[str, str]:
        found: dict[str, str] = {}
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                await self.redis.ping()
                # The demo's embedded store has neither indexes nor a replication role.
                replica = await not_primary(self.redis) if self.check_indexes else None
                indexes = self.check_indexes and not replica
                missing = await missing_indexes(self.redis, self.prefix) if indexes else []
        except Exception as exc:
            found["redis"] = f"unreachable: {type(exc).__name__}"
        else:
            if replica:
                found["redis"] = f"not writable: {replica}"
            if missing:
                found["checkpoint_indexes"] = f"missing: {', '.join(missing)}"
        if not self.slack_authenticated:
            found["slack"] = "auth.test has not passed yet"
        return found


def health_app(readiness: Readiness, queue_stats: QueueStats | None = None) -> web.Application:
    """The probe and metrics routes (`tracegate serve` adds Slack's endpoint in HTTP mode)."""
    web_app = web.Application()

    async def livez(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        problems = await readiness.problems()
        body: dict[str, Any] = {
            "status": "unready" if problems else "ok",
            "redis": "ok",
            "checkpoint_indexes": "ok" if readiness.check_indexes else "not used",
            "slack": "ok",
            **problems,
        }
        return web.json_response(body, status=503 if problems else 200)

    async def metrics(request: web.Request) -> web.Response:
        return await exposition(queue_stats)

    web_app.router.add_get("/livez", livez)
    for path in ("/readyz", "/healthz"):
        web_app.router.add_get(path, readyz)
    web_app.router.add_get("/metrics", metrics)
    return web_app
