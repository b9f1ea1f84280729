"""Real tracegate processes for fault tests: a fleet sharing one environment that points
at the simulators, and waits bounded in time."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from gates.store import ActionStore
from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.fleet import Fleet, RedisStackServer, TracegateProcess, fleet_env
from sandbox.scenarios import Scenario
from sandbox.slack import SlackDriver, SlackMessage, SlackSimulator
from tests.slack_fixtures import SECRET

ANSWER = "payment-api throws NullPointerException after the deploy."
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
        environment = {**fleet_env(slack, gemini, tempo, redis, "test"), **TIMING, **env}
        fleet = Fleet(environment, tmp_path, fork=True)
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


async def serving(fleet: Fleet) -> TracegateProcess:
    """A `tracegate serve` of the fleet, started and ready for Slack's events."""
    serve = fleet.serve()
    await serve.ready()
    return serve


async def ask(
    slack: SlackSimulator,
    serve: TracegateProcess,
    question: str = "checkout 500s, why?",
    **event: Any,
) -> str:
    """Mention the bot through `serve` in a new thread, which Slack sees acknowledged; the
    thread's root ts."""
    root = slack.new_ts()
    status, _ = await driver_for(serve.url).mention(question, ts=root, **event)
    assert status == 200
    return root


def script_slow_answer_after_a_tool(
    gemini: GeminiSimulator, scenario: Scenario, delay_s: float, spare_answers: int = 0
) -> None:
    """The model reads a trace, then answers `delay_s` later (a fault strikes meanwhile);
    `spare_answers` more answers for runs that start over after the fault."""
    gemini.script(
        Reply.call("get_trace", trace_id=scenario.error_trace_ids[0]),
        Reply(parts=({"text": ANSWER},), delay_s=delay_s),
        *[Reply.text(ANSWER)] * spare_answers,
    )


@pytest.fixture
async def redis_server() -> AsyncIterator[RedisStackServer]:
    """A Redis Stack of the test's own (append-only file), to stop and start mid-turn."""
    server = RedisStackServer()
    await server.start()
    yield server
    await server.close()


def approve_value(card: SlackMessage) -> str:
    """The request id an approval card's Approve button carries."""
    return str(
        next(
            e["value"]
            for b in card.blocks
            if b["type"] == "actions"
            for e in b["elements"]
            if e["action_id"] == "approve_action"
        )
    )


async def approval_card(
    slack: SlackSimulator, root: str, fleet: Fleet, timeout_s: float = 60
) -> tuple[SlackMessage, str]:
    """The thread's approval card once posted and its location stored with the request (a
    click before that is refused as not on the card: a person cannot click that fast, a
    test can), and the request id on its Approve button."""
    deadline = time.monotonic() + timeout_s
    redis = aioredis.from_url(fleet.env["REDIS_URL"])
    store = ActionStore(redis, fleet.env["REDIS_PREFIX"])
    try:
        while True:
            card = next(
                (m for m in slack.thread("C1", root) if "approve_action" in str(m.blocks)), None
            )
            if card is not None:
                request_id = approve_value(card)
                if (await store.get(request_id)).card is not None:
                    return card, request_id
            assert time.monotonic() < deadline, f"no approval card within {timeout_s:g}s"
            await asyncio.sleep(0.05)
    finally:
        await redis.aclose()
