"""Real tracegate processes for fault tests: a fleet sharing one environment that points
at the simulators, and waits bounded in time."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from sandbox import GeminiSimulator, TempoSimulator
from sandbox.fleet import Fleet, RedisStackServer, fleet_env
from sandbox.slack import SlackDriver, SlackMessage, SlackSimulator
from tests.slack_fixtures import SECRET

ANSWER = "payment-api 1.42.0 throws NullPointerException after the deploy."
# Short enough for fault tests to wait out: a dead worker's turn resumes within 10 s.
TIMING = {"TEMPO_TIMEOUT": "1", "RECOVERY": "10", "SHUTDOWN_GRACE": "3"}


@pytest.fixture
async def fleet_for(
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    redis_url: str,
    tmp_path: Path,
) -> AsyncIterator[Callable[..., Fleet]]:
    started: list[Fleet] = []

    def make(redis: str = redis_url, **env: str) -> Fleet:
        fleet = Fleet({**fleet_env(slack, gemini, tempo, redis, "test"), **TIMING, **env}, tmp_path)
        started.append(fleet)
        return fleet

    yield make
    for fleet in started:
        fleet.close()


async def answered(
    slack: SlackSimulator, root: str, text: str, fleet: Fleet, timeout_s: float
) -> list[SlackMessage]:
    """The thread once a message in it says `text`; fails with the processes' logs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        thread = slack.thread("C1", root)
        if any(text in m.text for m in thread):
            return thread
        await asyncio.sleep(0.1)
    raise AssertionError(f"no answer within {timeout_s}s\n{fleet.logs()}")


async def requests_reach(gemini: GeminiSimulator, count: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while len(gemini.requests) < count:
        assert time.monotonic() < deadline, f"only {len(gemini.requests)} model requests"
        await asyncio.sleep(0.05)


def driver_for(url: str) -> SlackDriver:
    # A team of its own: thread keys (and so checkpoints) never collide between tests.
    return SlackDriver(url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}")


@pytest.fixture
async def redis_server() -> AsyncIterator[RedisStackServer]:
    """A Redis Stack of the test's own (append-only file), to stop and start mid-turn."""
    server = RedisStackServer()
    await server.start()
    yield server
    await server.close()
