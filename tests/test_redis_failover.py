"""A Redis failover is a pause, not an outage (bot/process/redis_client.py), against real
Redis Stack nodes and real sentinels on loopback (tests/sentinel_fixtures.py).

Each test names its client's REDIS_FAILOVER_TIMEOUT and REDIS_SOCKET_TIMEOUT: small, so the
bounds are measured in seconds."""

from __future__ import annotations

import asyncio
import operator
import signal
import time
import uuid
from collections.abc import Callable
from typing import Annotated, TypedDict

import pytest
import redis.asyncio as aioredis
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph
from redis.exceptions import ConnectionError, TimeoutError

from bot.process.health import Readiness
from bot.process.redis_client import RedisSpec, connect_redis
from bot.process.redis_policy import RedisUnusable, check_redis
from graph.checkpoint import open_checkpointer
from sandbox import GeminiSimulator
from sandbox.fleet import Fleet
from sandbox.scenarios import Scenario
from sandbox.slack import SlackDriver, SlackSimulator
from tests.fleet_fixtures import (
    ANSWER,
    answered,
    driver_for,
    requests_reach,
    script_slow_answer_after_a_tool,
    serving,
)
from tests.sentinel_fixtures import RedisHA
from tests.slack_fixtures import SECRET, BotFactory

WRITERS = 4  # several pooled connections: idle ones too must leave the dead primary


async def _write_until(client: aioredis.Redis, key: str, stop: asyncio.Event) -> list[float]:
    """INCR `key` until `stop`; the duration of each call."""
    took = []
    while not stop.is_set():
        started = time.monotonic()
        await client.incr(key)
        took.append(time.monotonic() - started)
        await asyncio.sleep(0.01)
    return took


async def _read(port: int, key: str) -> bytes | None:
    node = aioredis.Redis(port=port)
    try:
        return await node.get(key)  # type: ignore[no-any-return]
    finally:
        await node.aclose()


async def test_writes_continue_on_the_new_primary_when_the_primary_is_killed(
    redis_ha: RedisHA,
) -> None:
    client = connect_redis(
        RedisSpec(redis_ha.sentinel_url, failover_timeout_s=15.0, socket_timeout_s=1.0)
    )
    key = f"failover:{uuid.uuid4().hex}"
    stop = asyncio.Event()
    try:
        writers = [asyncio.create_task(_write_until(client, key, stop)) for _ in range(WRITERS)]
        await asyncio.sleep(0.3)
        redis_ha.kill(redis_ha.primary)
        await redis_ha.until(lambda: redis_ha.promoted(redis_ha.replica), "the replica promoted")
        before = int(await client.get(key) or 0)
        await asyncio.sleep(0.3)  # the writers go on, on the new primary
        stop.set()
        took = [t for durations in await asyncio.gather(*writers) for t in durations]
        after = await _read(redis_ha.replica, key)
    finally:
        await client.aclose()
    assert int(after or 0) > before > 0
    longest = max(took)
    assert longest > 1.0  # one pause: the writers did wait for the failover
    assert longest < 15.0  # inside REDIS_FAILOVER_TIMEOUT


async def test_a_primary_demoted_to_a_replica_is_retried_then_the_new_primary_followed(
    redis_ha: RedisHA,
) -> None:
    """SENTINEL FAILOVER turns the primary into a replica (REPLICAOF): writes on the client's
    open connections meet READONLY, reconnect through Sentinel and land on the new one."""
    client = connect_redis(
        RedisSpec(redis_ha.sentinel_url, failover_timeout_s=15.0, socket_timeout_s=1.0)
    )
    key = f"demoted:{uuid.uuid4().hex}"
    stop = asyncio.Event()
    sentinel = aioredis.Redis(port=next(iter(redis_ha.sentinels)))
    try:
        writers = [asyncio.create_task(_write_until(client, key, stop)) for _ in range(WRITERS)]
        await asyncio.sleep(0.3)
        await sentinel.execute_command("SENTINEL", "FAILOVER", "mymaster")  # type: ignore[no-untyped-call]
        await redis_ha.until(lambda: redis_ha.promoted(redis_ha.replica), "the replica promoted")
        await redis_ha.until(
            lambda: _role_is(redis_ha.primary, "slave"), "the old primary a replica"
        )
        before = int(await client.get(key) or 0)
        await asyncio.sleep(0.3)
        stop.set()
        await asyncio.gather(*writers)  # none raised READONLY
        after = await _read(redis_ha.replica, key)
    finally:
        await sentinel.aclose()
        await client.aclose()
    assert int(after or 0) > before > 0


async def _role_is(port: int, role: str) -> bool:
    client = aioredis.Redis(port=port, socket_timeout=1)
    try:
        return bool((await client.info("replication"))["role"] == role)
    finally:
        await client.aclose()


async def test_a_read_only_primary_is_retried_until_it_takes_writes_again(
    redis_pair: RedisHA,
) -> None:
    """Without Sentinel (one address, as a managed Redis's endpoint): READONLY is a lost
    connection, retried within REDIS_FAILOVER_TIMEOUT, not an error at once."""
    client = connect_redis(
        RedisSpec(redis_pair.url(redis_pair.primary), failover_timeout_s=10.0, socket_timeout_s=1.0)
    )
    admin = aioredis.Redis(port=redis_pair.primary)
    try:
        await client.set("warm", 1)
        await admin.execute_command("REPLICAOF", "127.0.0.1", str(redis_pair.replica))  # type: ignore[no-untyped-call]
        await redis_pair.until(lambda: _role_is(redis_pair.primary, "slave"), "read-only")
        writing = asyncio.ensure_future(client.set("during", 1))
        await asyncio.sleep(1.0)
        assert not writing.done()  # retried, not failed
        await admin.execute_command("REPLICAOF", "NO", "ONE")  # type: ignore[no-untyped-call]
        async with asyncio.timeout(5):
            assert await writing
    finally:
        await admin.aclose()
        await client.aclose()


async def test_a_redis_that_stops_answering_fails_a_call_within_the_timeouts(
    redis_pair: RedisHA,
) -> None:
    socket_timeout, failover_timeout = 0.5, 1.0
    client = connect_redis(
        RedisSpec(
            redis_pair.url(redis_pair.primary),
            failover_timeout_s=failover_timeout,
            socket_timeout_s=socket_timeout,
        )
    )
    frozen = redis_pair.nodes[redis_pair.primary]
    try:
        await client.set("warm", 1)
        frozen.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises((TimeoutError, ConnectionError)):
            async with asyncio.timeout(10):  # a hang fails the test instead of blocking it
                await client.set("frozen", 1)
        took = time.monotonic() - started
    finally:
        frozen.send_signal(signal.SIGCONT)
        await client.aclose()
    assert failover_timeout <= took < failover_timeout + 2 * socket_timeout + 0.5, took


async def test_with_no_primary_left_a_call_fails_once_the_failover_timeout_has_passed(
    redis_ha: RedisHA,
) -> None:
    """Both nodes gone: Sentinel names no primary, and the call gives up after
    REDIS_FAILOVER_TIMEOUT — a time, whatever the number of attempts in it."""
    failover_timeout = 2.0
    client = connect_redis(
        RedisSpec(redis_ha.sentinel_url, failover_timeout_s=failover_timeout, socket_timeout_s=0.5)
    )
    try:
        await client.set("warm", 1)
        redis_ha.kill(redis_ha.primary)
        redis_ha.kill(redis_ha.replica)
        started = time.monotonic()
        with pytest.raises(ConnectionError):
            await client.set("gone", 1)
        took = time.monotonic() - started
    finally:
        await client.aclose()
    assert failover_timeout <= took < failover_timeout + 1.0, took


async def test_readyz_and_start_up_refuse_a_replica(redis_pair: RedisHA) -> None:
    replica = connect_redis(RedisSpec(redis_pair.url(redis_pair.replica)))
    try:
        readiness = Readiness(replica, prefix="tracegate")
        readiness.slack_authenticated = True
        problems = await readiness.problems()
        with pytest.raises(RedisUnusable, match="read-only replica"):
            await check_redis(replica, redis_pair.url(redis_pair.replica))
    finally:
        await replica.aclose()
    assert problems["redis"].startswith("not writable: it is a read-only replica"), problems


class _Notes(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]


async def _note(state: _Notes) -> _Notes:
    return {"notes": ["answered"]}


async def test_a_checkpoint_saved_through_sentinel_is_continued_after_a_failover(
    redis_ha: RedisHA,
) -> None:
    """Replication is asynchronous: WAIT here stands for the time a turn takes between its
    checkpoint and a failover (docs/operating.md, Redis high availability)."""
    builder = StateGraph(_Notes)
    builder.add_node("note", _note)
    builder.add_edge(START, "note")
    config: RunnableConfig = {"configurable": {"thread_id": f"T1:C1:{uuid.uuid4().hex}"}}
    client = connect_redis(
        RedisSpec(redis_ha.sentinel_url, failover_timeout_s=15.0, socket_timeout_s=1.0)
    )
    try:
        async with open_checkpointer(client, None, prefix="ha") as saver:
            graph = builder.compile(checkpointer=saver)
            await graph.ainvoke({"notes": ["asked"]}, config)
            assert await client.execute_command("WAIT", 1, 2000) == 1  # type: ignore[no-untyped-call]
            redis_ha.kill(redis_ha.primary)

            final = await graph.ainvoke({"notes": ["asked again"]}, config)

        assert await redis_ha.promoted(redis_ha.replica)
    finally:
        await client.aclose()
    assert final["notes"] == ["asked", "answered", "asked again", "answered"]


async def test_real_processes_answer_every_question_while_the_primary_is_killed(
    redis_ha: RedisHA,
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    scenario: Scenario,
) -> None:
    """`tracegate serve` and `tracegate worker` on REDIS_URL=redis+sentinel://…: a turn in
    flight and a question acknowledged during the failover are both answered, with no error
    in Slack, and a follow-up continues the first thread's checkpoint."""
    script_slow_answer_after_a_tool(gemini, scenario, delay_s=2.0, spare_answers=4)
    fleet = fleet_for(
        redis=redis_ha.sentinel_url,
        WORKER_MODE="queue",
        REDIS_FAILOVER_TIMEOUT="20",
        REDIS_SOCKET_TIMEOUT="1",
    )
    serve = await serving(fleet)
    await fleet.worker().ready()
    driver = driver_for(serve.url)
    first = slack.new_ts()
    assert (await driver.mention("checkout 500s, why?", ts=first))[0] == 200
    await requests_reach(gemini, 2)  # the model is answering slowly

    redis_ha.kill(redis_ha.primary)
    second = slack.new_ts()
    # Slack's side of an ack during the failover: a 5xx (or no answer in time) is redelivered.
    for attempt in range(4):
        status, _ = await driver.mention("and orders?", ts=second, event_id="EvHA", retry=attempt)
        if status == 200:
            break
    assert status == 200

    for root in (first, second):
        thread = await answered(slack, root, ANSWER, fleet, timeout_s=40)
        assert not [m.text for m in thread if "went wrong" in m.text.lower()], fleet.logs()
    assert await redis_ha.promoted(redis_ha.replica)
    asked = len(gemini.requests)
    assert (await driver.mention("and now?", ts=slack.new_ts(), thread_ts=first))[0] == 200
    await requests_reach(gemini, asked + 1, timeout_s=30)
    follow_up = str(gemini.requests[asked].contents)
    assert "checkout 500s, why?" in follow_up and ANSWER in follow_up  # from the checkpoint


async def test_an_ack_that_cannot_record_its_turn_answers_5xx_so_slack_sends_it_again(
    redis_pair: RedisHA, bot_for: BotFactory, slack: SlackSimulator
) -> None:
    async with bot_for(
        redis_url=redis_pair.url(redis_pair.primary),
        redis_failover_timeout=1.0,
        redis_socket_timeout=0.5,
    ) as bot:
        redis_pair.kill(redis_pair.primary)
        driver = SlackDriver(bot.url, SECRET, team="TGONE", slack=slack)
        started = time.monotonic()
        status, _ = await driver.mention("why?", ts=slack.new_ts())
        took = time.monotonic() - started
    assert status >= 500
    assert took < 3.0  # within REDIS_FAILOVER_TIMEOUT and a connect, not a hang
