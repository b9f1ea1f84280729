"""`tracegate serve`: the Bolt app over HTTP (aiohttp) or Socket Mode; `tracegate worker`:
the queue's turns. Both answer the probes and /metrics on PORT (`bot.process.health`)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import redis.asyncio as aioredis
from aiohttp import web
from langgraph.checkpoint.base import BaseCheckpointSaver
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

from bot.inbound.alert_hooks import alert_routes
from bot.inbound.app import build_app
from bot.inbound.http import SLACK_PATH, slack_endpoint
from bot.process.health import Readiness, health_app
from bot.process.logs import log_startup
from bot.process.metrics import QueueStats
from bot.process.runtime import open_runtime
from bot.process.services import Services, build_services
from bot.process.settings import Settings
from bot.turn.executions import running_executor
from bot.turn.worker import running_worker

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 10  # for listener work (clicks, commands) after the turns have stopped


@dataclass
class RunningBot:
    services: Services
    url: str


def _queue_stats(services: Services) -> QueueStats:
    async def stats() -> tuple[int, float | None]:
        return await services.runner.queue.count("queued"), await services.turns.oldest_unfinished()

    return stats


async def _listen(web_app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve `web_app` on host:port (0: any free port); the runner, and the port it got."""
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner, int(runner.addresses[0][1])


@contextlib.contextmanager
def startup_heap_frozen() -> Iterator[None]:
    """Everything alive after start-up (modules, compiled graphs, clients) is moved out of
    the garbage collector's reach while the block runs: its full collections then scan only
    what requests and turns create. Otherwise each one walks the whole import-time heap
    (hundreds of thousands of objects of LangChain, LangGraph, pydantic): a pause of tens to
    hundreds of milliseconds amid Slack's acks and the workers' turns. On exit the heap is
    the collector's again (a process that starts the bot twice, as the tests do, leaks
    nothing).

    The first start of a process collects before it freezes, so no import-time garbage is
    kept for the process's life. A later start (the tests start the bot hundreds of times
    in one process) freezes as it finds the heap: whatever garbage that holds is collected
    after the block, and a full collection of a test process's heap costs about 0.3 s."""
    global _heap_collected
    if not _heap_collected:
        gc.collect()
        _heap_collected = True
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


_heap_collected = False


async def _reconcile(services: Services, settings: Settings, stop: asyncio.Event) -> None:
    """Every RECONCILE_INTERVAL, from start until `stop`: settle action requests a dead
    process left behind, expire stale proposals, and update their cards."""
    while not stop.is_set():
        try:
            await services.cards.reconcile()
        except Exception:
            log.exception("reconciling action requests failed")
        try:
            await services.alerts.finish_pending()
        except Exception:
            log.exception("finishing alert groups left pending failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), settings.kubernetes.reconcile_interval)


def _executing(services: Services) -> AbstractAsyncContextManager[None]:
    """This process executes approved actions from the queue (a worker, or an inline
    `serve`); without actions configured there is nothing to execute."""
    queue = services.executions.queue
    if queue is None or services.cards.actions is None:
        return contextlib.nullcontext()
    return running_executor(queue, services.cards.execute)


@asynccontextmanager
async def running_bot(
    settings: Settings,
    host: str = "0.0.0.0",
    *,
    redis: aioredis.Redis | None = None,
    saver: BaseCheckpointSaver[str] | None = None,
) -> AsyncIterator[RunningBot]:
    """The whole bot, started; stopped gracefully on exit. `redis` and `saver` replace
    REDIS_URL's server (the demo's embedded mode).

    In WORKER_MODE=inline this process also runs turns; in queue mode `tracegate worker`
    processes do. On exit: intake stops first, then running turns get SHUTDOWN_GRACE to
    finish before the rest are handed back to the queue.
    """
    settings.check_for_serve()
    async with open_runtime(settings, redis, saver) as runtime:
        embedded = saver is not None
        services = build_services(settings, runtime, in_process=embedded)
        app = build_app(settings, services)
        socket_mode = settings.slack.app_token is not None
        readiness = Readiness(
            runtime.redis, prefix=settings.redis.prefix, check_indexes=not embedded
        )
        web_app = health_app(readiness, queue_stats=_queue_stats(services))
        if not socket_mode:
            secret = settings.slack.signing_secret
            assert secret is not None  # check_for_serve demands it in HTTP mode
            endpoint = slack_endpoint(app, secret.get_secret_value())
            web_app.router.add_route("*", SLACK_PATH, endpoint)  # counted; 405 unless POST
        if settings.alerts.webhook_token is not None:  # else the routes do not exist (404)
            token = settings.alerts.webhook_token.get_secret_value()
            web_app.add_routes(alert_routes(services.alerts, token, services.jobs.submit))
        runner, port = await _listen(web_app, host, settings.slack.port)
        async with AsyncExitStack() as stack:
            stack.enter_context(startup_heap_frozen())
            inline = settings.turns.worker_mode == "inline"
            if inline and not embedded:
                await stack.enter_async_context(running_worker(services.runner, settings.worker))
                await stack.enter_async_context(_executing(services))
            stopping = asyncio.Event()
            background: list[asyncio.Task[None]] = []
            # In WORKER_MODE=queue the workers reconcile: settling an execution reads the
            # cluster (and fences a stalled write), and `serve` makes no Kubernetes call.
            if inline or embedded:
                reconciling = _reconcile(services, settings, stopping)
                background.append(asyncio.create_task(reconciling, name="reconcile actions"))
            authenticating = readiness.authenticate(services.client)
            background.append(asyncio.create_task(authenticating, name="slack auth"))
            handler = None
            if socket_mode:
                assert settings.slack.app_token is not None
                handler = AsyncSocketModeHandler(app, settings.slack.app_token.get_secret_value())
                # In the background: a Slack that cannot be reached must not block a stop.
                connecting = handler.connect_async()  # type: ignore[no-untyped-call]
                background.append(asyncio.create_task(connecting, name="socket mode"))
            log_startup(
                settings,
                f"serving on port {port} ({'Socket Mode' if socket_mode else 'HTTP'}, "
                f"WORKER_MODE={settings.turns.worker_mode}; a dead worker's turns resume within "
                f"{settings.worker.recovery_s:.0f}s)",
            )
            try:
                yield RunningBot(services, f"http://127.0.0.1:{port}")
            finally:
                stopping.set()
                for task in background:
                    task.cancel()
                # Bounded: a library that swallows a cancellation must not hold up a stop.
                await asyncio.wait(background, timeout=5)
                if handler is not None:
                    with contextlib.suppress(Exception):
                        await handler.close_async()  # type: ignore[no-untyped-call]
                await runner.cleanup()  # no new events; the worker then stops (graceful)
        if not await services.jobs.join(SHUTDOWN_GRACE_S, turns=False):
            log.warning("stopped with %d listener jobs unfinished", services.jobs.running)


async def run_worker(settings: Settings, host: str = "0.0.0.0") -> None:
    """`tracegate worker`: run turns from the queue until SIGINT/SIGTERM."""
    settings.check_for_serve(worker=True)
    stop = _stop_on_signals()
    async with open_runtime(settings) as runtime:
        services = build_services(settings, runtime)
        timing = settings.worker
        readiness = Readiness(runtime.redis, prefix=settings.redis.prefix)
        runner, port = await _listen(
            health_app(readiness, queue_stats=_queue_stats(services)), host, settings.slack.port
        )
        reconciling = asyncio.Event()
        background = [
            asyncio.create_task(
                _reconcile(services, settings, reconciling), name="reconcile actions"
            ),
            asyncio.create_task(readiness.authenticate(services.client), name="slack auth"),
        ]
        try:
            with startup_heap_frozen():
                async with running_worker(services.runner, timing), _executing(services):
                    log_startup(
                        settings,
                        f"worker running {timing.concurrency} turns at a time (probes and /metrics "
                        f"on port {port}; a dead worker's turns resume within "
                        f"{timing.recovery_s:.0f}s)",
                    )
                    await stop.wait()
                    log.info("shutting down: finishing the running turns (SHUTDOWN_GRACE)")
                    reconciling.set()
                    for task in background:
                        task.cancel()
                    await asyncio.wait(background, timeout=5)
        finally:
            await runner.cleanup()


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def serve(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM."""
    stop = _stop_on_signals()
    async with running_bot(settings):
        await stop.wait()
        log.info("shutting down: no new events; finishing the running turns (SHUTDOWN_GRACE)")
