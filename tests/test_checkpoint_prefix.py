"""Checkpoints under REDIS_PREFIX (graph/checkpoint.py) and the migration of the ones written
before (graph/checkpoint_migration.py, `tracegate migrate-checkpoints`), on real Redis Stack.

The migration tests run on a Redis Stack of their own: the migration takes every un-prefixed
checkpoint on the server, and the shared one holds other tests' threads."""

from __future__ import annotations

import asyncio
import operator
import os
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, TypedDict

import pytest
import redis.asyncio as aioredis
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.redis.aio import AsyncRedisSaver
from langgraph.checkpoint.redis.ashallow import AsyncShallowRedisSaver
from langgraph.graph import START, StateGraph

from bot.process.redis_client import RedisSpec, connect_redis
from graph.checkpoint import open_checkpointer, setup_saver
from graph.checkpoint_migration import migrate_checkpoints
from sandbox.fleet import ROOT
from tests.redis_fixtures import wait_for


class _Notes(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]


def _noting(note: str) -> StateGraph[_Notes]:
    async def write(state: _Notes) -> _Notes:
        return {"notes": [note]}

    builder = StateGraph(_Notes)
    builder.add_node("write", write)
    builder.add_edge(START, "write")
    return builder


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


async def _notes(graph: Any, thread_id: str) -> list[str]:
    state = await graph.aget_state(_config(thread_id))
    return list(state.values.get("notes", []))


class _Counts(TypedDict, total=False):
    done: Annotated[list[str], operator.add]


def _half_done(runs: dict[str, int]) -> StateGraph[_Counts]:
    """Two tasks in one step; the first run of `flaky` dies after `steady` finished, so the
    checkpoint holds `steady`'s pending write."""
    steady_done = asyncio.Event()

    async def steady(state: _Counts) -> _Counts:
        runs["steady"] += 1
        steady_done.set()
        return {"done": ["steady"]}

    async def flaky(state: _Counts) -> _Counts:
        runs["flaky"] += 1
        if runs["flaky"] == 1:
            await steady_done.wait()
            await asyncio.sleep(0.05)  # steady's writes are on their way
            raise RuntimeError("process died")
        return {"done": ["flaky"]}

    builder = StateGraph(_Counts)
    builder.add_node("steady", steady)
    builder.add_node("flaky", flaky)
    builder.add_edge(START, "steady")
    builder.add_edge(START, "flaky")
    return builder


async def test_two_bots_with_their_own_prefixes_keep_their_own_checkpoints_of_one_thread(
    redis_client: aioredis.Redis,
) -> None:
    """Both stop mid-step in one thread, each with a pending write: each resumes its own."""
    thread_id = f"T1:C1:{uuid.uuid4().hex}"
    first, second = f"bot-a-{uuid.uuid4().hex[:6]}", f"bot-b-{uuid.uuid4().hex[:6]}"
    runs_a, runs_b = {"steady": 0, "flaky": 0}, {"steady": 0, "flaky": 0}
    async with (
        open_checkpointer(redis_client, None, prefix=first) as a,
        open_checkpointer(redis_client, None, prefix=second) as b,
    ):
        bot_a = _half_done(runs_a).compile(checkpointer=a)
        bot_b = _half_done(runs_b).compile(checkpointer=b)
        for bot in (bot_a, bot_b):
            with pytest.raises(RuntimeError):
                await bot.ainvoke({"done": []}, _config(thread_id))
        keys = [k.decode() async for k in redis_client.scan_iter(match=f"*{thread_id}*")]

        finals = [await bot.ainvoke(None, _config(thread_id)) for bot in (bot_a, bot_b)]

    assert keys and all(k.startswith((f"{first}:", f"{second}:")) for k in keys), keys
    assert [sorted(f["done"]) for f in finals] == [["flaky", "steady"]] * 2
    assert runs_a == runs_b == {"steady": 1, "flaky": 2}
    indexes = {i.decode() for i in await redis_client.execute_command("FT._LIST")}  # type: ignore[no-untyped-call]
    assert {f"{p}:{n}" for p in (first, second) for n in ("checkpoint", "checkpoint_write")} <= (
        indexes
    )


@pytest.fixture
async def own_redis(empty_redis_stack: str) -> AsyncIterator[aioredis.Redis]:
    await wait_for(empty_redis_stack)
    client = connect_redis(RedisSpec(empty_redis_stack))
    yield client
    await client.aclose()


async def _old_checkpoint(redis: aioredis.Redis, thread_id: str, runs: dict[str, int]) -> None:
    """A thread left mid-step by a bot of before: the library's own names, no prefix."""
    old = AsyncShallowRedisSaver(redis_client=redis)
    await setup_saver(old)
    with pytest.raises(RuntimeError):
        await _half_done(runs).compile(checkpointer=old).ainvoke({"done": []}, _config(thread_id))
    assert await redis.exists(f"checkpoint:{thread_id}:")


async def test_a_migrated_checkpoint_is_continued_under_the_prefix_and_the_old_keys_go(
    own_redis: aioredis.Redis,
) -> None:
    thread_id = f"T1:C1:{uuid.uuid4().hex}"
    runs = {"steady": 0, "flaky": 0}
    await _old_checkpoint(own_redis, thread_id, runs)
    await own_redis.expire(f"checkpoint:{thread_id}:", 3600)

    report = await migrate_checkpoints(own_redis, "bot")

    assert (report.copied, report.already, report.newer) == (1, 0, 0) and report.writes >= 1
    left = [k.decode() async for k in own_redis.scan_iter(match=f"*{thread_id}*")]
    assert left and all(k.startswith("bot:") for k in left), left
    assert 3500 < await own_redis.ttl(f"bot:checkpoint:{thread_id}:") <= 3600
    async with open_checkpointer(own_redis, None, prefix="bot") as saver:
        final = await _half_done(runs).compile(checkpointer=saver).ainvoke(None, _config(thread_id))
    assert sorted(final["done"]) == ["flaky", "steady"]
    assert runs == {"steady": 1, "flaky": 2}  # steady's pending write came along


async def test_a_newer_checkpoint_under_the_prefix_is_not_overwritten(
    own_redis: aioredis.Redis,
) -> None:
    thread_id = f"T1:C1:{uuid.uuid4().hex}"
    await _old_checkpoint(own_redis, thread_id, {"steady": 0, "flaky": 0})
    async with open_checkpointer(own_redis, None, prefix="bot") as saver:
        newer = _noting("newer").compile(checkpointer=saver)
        await newer.ainvoke({"notes": ["asked"]}, _config(thread_id))

        report = await migrate_checkpoints(own_redis, "bot", keep=True)

        assert (report.copied, report.newer) == (0, 1)
        assert await _notes(newer, thread_id) == ["asked", "newer"]
    assert await own_redis.exists(f"checkpoint:{thread_id}:")  # --keep


async def test_running_the_migration_command_again_changes_nothing(
    own_redis: aioredis.Redis, empty_redis_stack: str
) -> None:
    thread_id = f"T1:C1:{uuid.uuid4().hex}"
    await _old_checkpoint(own_redis, thread_id, {"steady": 0, "flaky": 0})
    env = {"PATH": os.environ["PATH"], "REDIS_URL": empty_redis_stack, "REDIS_PREFIX": "bot"}

    async def migrate(*flags: str) -> str:
        command = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot.process.cli",
            "migrate-checkpoints",
            *flags,
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(command.communicate(), 60)
        assert command.returncode == 0
        return out.decode()

    first = await migrate("--keep")
    copied = await own_redis.json().get(f"bot:checkpoint:{thread_id}:")
    again = await migrate("--keep")

    assert "1 checkpoint(s) copied" in first
    assert "0 checkpoint(s) copied" in again and "1 already under the prefix" in again
    assert await own_redis.json().get(f"bot:checkpoint:{thread_id}:") == copied


async def test_checkpoints_of_the_history_layout_are_left_alone(own_redis: aioredis.Redis) -> None:
    thread_id = f"T1:C1:{uuid.uuid4().hex}"
    history = AsyncRedisSaver(redis_client=own_redis)
    await setup_saver(history)
    await _noting("kept").compile(checkpointer=history).ainvoke({"notes": []}, _config(thread_id))

    report = await migrate_checkpoints(own_redis, "bot")

    assert report.copied == 0 and report.other >= 1
    assert [k async for k in own_redis.scan_iter(match=f"bot:*{thread_id}*")] == []
