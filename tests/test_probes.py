"""The probes: /livez checks nothing but the process, /readyz (and /healthz) check Redis, the
checkpoint indexes and Slack auth; `tracegate worker` answers them too."""

import asyncio
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp import web
from slack_sdk.web.async_client import AsyncWebClient

from bot.process.health import Readiness, health_app
from bot.process.server import RunningBot
from sandbox import GeminiSimulator, TempoSimulator
from sandbox.fleet import ROOT, free_port
from sandbox.slack import SlackSimulator
from tests.redis_fixtures import wait_for
from tests.shared_redis import PREFIX

STARTUP_BOUND_S = 90.0

ALL_OK = {"status": "ok", "redis": "ok", "checkpoint_indexes": "ok", "slack": "ok"}


async def _get(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        if response.content_type == "application/json":
            return response.status, await response.json()
        return response.status, await response.text()


@pytest.fixture
async def probes_of() -> AsyncIterator[Any]:
    """Serve `health_app(readiness)` on a free port; yields a function that starts one."""
    runners: list[web.AppRunner] = []

    async def start(readiness: Readiness) -> str:
        runner = web.AppRunner(health_app(readiness))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()


async def _readyz_over(probes_of: Any, client: aioredis.Redis) -> tuple[int, Any]:
    """/readyz of probes checking Redis through `client` (closed after), Slack's auth.test
    taken as passed."""
    readiness = Readiness(client, prefix=PREFIX)
    readiness.slack_authenticated = True
    url = await probes_of(readiness)
    try:
        return await _get(f"{url}/readyz")
    finally:
        await client.aclose()


async def _ready(bot: RunningBot) -> tuple[int, Any]:
    for _ in range(50):
        status, body = await _get(f"{bot.url}/readyz")
        if status == 200:
            break
        await asyncio.sleep(0.1)
    return status, body


async def test_readyz_is_ok_once_redis_the_indexes_and_slack_auth_are(bot: RunningBot) -> None:
    assert await _ready(bot) == (200, ALL_OK)


async def test_healthz_is_the_readiness_probe(bot: RunningBot) -> None:
    await _ready(bot)
    assert await _get(f"{bot.url}/healthz") == (200, ALL_OK)


async def test_livez_answers_while_redis_is_unreachable(probes_of: Any) -> None:
    dead = aioredis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    url = await probes_of(Readiness(dead, prefix=PREFIX))
    try:
        assert await _get(f"{url}/livez") == (200, {"status": "ok"})
    finally:
        await dead.aclose()


async def test_readyz_is_503_when_redis_is_unreachable(probes_of: Any) -> None:
    dead = aioredis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    status, body = await _readyz_over(probes_of, dead)
    assert status == 503 and body["redis"].startswith("unreachable")


async def test_readyz_is_503_naming_missing_checkpoint_indexes(
    probes_of: Any, empty_redis_stack: str
) -> None:
    await wait_for(empty_redis_stack)
    status, body = await _readyz_over(probes_of, aioredis.from_url(empty_redis_stack))
    assert status == 503
    assert body["checkpoint_indexes"] == f"missing: {PREFIX}:checkpoint, {PREFIX}:checkpoint_write"


async def test_readyz_is_503_until_slack_auth_test_passes(probes_of: Any, redis_url: str) -> None:
    client = aioredis.from_url(redis_url)
    readiness = Readiness(client, prefix=PREFIX, check_indexes=False)
    slack = AsyncWebClient(token="xoxb-sandbox", base_url="http://127.0.0.1:1/api/")
    authenticating = asyncio.create_task(readiness.authenticate(slack, retry_s=0.05))
    url = await probes_of(readiness)
    await asyncio.sleep(0.3)
    try:
        status, body = await _get(f"{url}/readyz")
    finally:
        authenticating.cancel()
        await client.aclose()
    assert (status, body["slack"]) == (503, "auth.test has not passed yet")


async def test_the_worker_process_answers_the_probes_and_metrics(
    redis_url: str, slack: SlackSimulator, gemini: GeminiSimulator, tempo: TempoSimulator
) -> None:
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "REDIS_URL": redis_url,
        "SLACK_BOT_TOKEN": "xoxb-sandbox",
        "SLACK_API_URL": f"{slack.url}/api/",
        "GOOGLE_API_KEY": "sandbox-key",
        "GEMINI_BASE_URL": gemini.url,
        "TEMPO_URL": tempo.url,
        "WORKER_MODE": "queue",
        # Keys of its own: tests run side by side on one Redis (pytest-xdist).
        "REDIS_PREFIX": f"test-{uuid.uuid4().hex[:8]}",
        "PORT": str(port),
    }
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.process.cli", "worker", env=env, cwd=ROOT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        # A fresh interpreter beside other tests can take well over 10 s to start: the
        # bound stops a hang (90 s, as the other start-up waits) and measures nothing.
        deadline = time.monotonic() + STARTUP_BOUND_S
        ready: tuple[int, Any] = (0, "not started")
        while time.monotonic() < deadline:
            try:
                ready = await _get(f"{url}/readyz")
                if ready[0] == 200:
                    break
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
        live = await _get(f"{url}/livez")
        metrics = await _get(f"{url}/metrics")
    finally:
        worker.terminate()
        await worker.wait()
    assert ready == (200, ALL_OK)
    assert live == (200, {"status": "ok"})
    assert metrics[0] == 200 and "tracegate_queue_depth " in metrics[1]
