"""`tracegate serve`: the Bolt app over HTTP (aiohttp) or Socket Mode, plus /healthz."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import redis.asyncio as aioredis
from aiohttp import web
from langgraph.checkpoint.base import BaseCheckpointSaver
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp

from bot.app import Services, build_app, build_services
from bot.runtime import open_runtime
from bot.settings import Settings

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 30


@dataclass
class RunningBot:
    app: AsyncApp
    services: Services
    url: str


def health_app(redis: aioredis.Redis, app: web.Application | None = None) -> web.Application:
    """`GET /healthz`: 200 when Redis answers, 503 (with the reason) when it does not."""
    web_app = app or web.Application()

    async def healthz(request: web.Request) -> web.Response:
        try:
            async with asyncio.timeout(2):
                await redis.ping()
        except Exception as exc:
            body = {"status": "unhealthy", "redis": f"unreachable: {type(exc).__name__}"}
            return web.json_response(body, status=503)
        return web.json_response({"status": "ok", "redis": "ok"})

    web_app.router.add_get("/healthz", healthz)
    return web_app


async def _reconcile(services: Services, interval_s: float) -> None:
    """Every RECONCILE_INTERVAL, from start: settle action requests a dead process left
    behind, expire stale proposals, and update their cards."""
    while True:
        try:
            await services.cards.reconcile()
        except Exception:
            log.exception("reconciling action requests failed")
        await asyncio.sleep(interval_s)


@asynccontextmanager
async def running_bot(
    settings: Settings,
    host: str = "0.0.0.0",
    *,
    redis: aioredis.Redis | None = None,
    saver: BaseCheckpointSaver[str] | None = None,
) -> AsyncIterator[RunningBot]:
    """The whole bot, started; stopped (jobs drained) on exit. `redis` and `saver` replace
    REDIS_URL's server (the demo's embedded mode)."""
    settings.check_for_serve()
    async with open_runtime(settings, redis, saver) as runtime:
        services = build_services(settings, runtime, runtime.redis)
        app = build_app(settings, services)
        socket_mode = settings.slack_app_token is not None
        web_app = health_app(
            runtime.redis, None if socket_mode else app.web_app(path="/slack/events")
        )
        runner = web.AppRunner(web_app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, settings.port)
        await site.start()
        server = site._server
        port = server.sockets[0].getsockname()[1] if isinstance(server, asyncio.Server) else 0
        handler = None
        if socket_mode:
            assert settings.slack_app_token is not None
            handler = AsyncSocketModeHandler(app, settings.slack_app_token.get_secret_value())
            await handler.connect_async()  # type: ignore[no-untyped-call]
        sweeper = asyncio.create_task(
            _reconcile(services, settings.reconcile_interval_s), name="reconcile actions"
        )
        log.info(
            "tracegate serving on port %s (%s)", port, "Socket Mode" if socket_mode else "HTTP"
        )
        try:
            yield RunningBot(app, services, f"http://127.0.0.1:{port}")
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            if handler is not None:
                await handler.close_async()  # type: ignore[no-untyped-call]
            await runner.cleanup()
            if not await services.jobs.join(SHUTDOWN_GRACE_S):
                log.warning("stopped with %d answers unfinished", services.jobs.running)


async def serve(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with running_bot(settings):
        await stop.wait()
        log.info("shutting down: finishing answers in progress")


__all__ = ["RunningBot", "health_app", "running_bot", "serve"]
