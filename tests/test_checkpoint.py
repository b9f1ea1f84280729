"""The Redis checkpointer: set-up races between replicas, and expiry of old threads."""

import asyncio
import operator
import uuid
from typing import Annotated, TypedDict

import pytest
import redis.asyncio as aioredis
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph

from graph.checkpoint import LatestCheckpointSaver, open_checkpointer, setup_saver
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.runner import open_investigator
from sandbox import GeminiSimulator, Reply
from tests.shared_redis import PREFIX


async def test_replicas_setting_up_at_the_same_moment_all_succeed(
    redis_client: aioredis.Redis,
) -> None:
    prefix = f"race{uuid.uuid4().hex[:8]}"
    savers = [
        LatestCheckpointSaver(redis_client, prefix=prefix, ttl_minutes=None) for _ in range(6)
    ]
    try:
        await asyncio.gather(*(setup_saver(s) for s in savers))
    finally:
        for saver in savers:
            await saver.__aexit__(None, None, None)


async def test_checkpoint_keys_expire_after_the_configured_ttl(
    redis_client: aioredis.Redis,
    model_spec: ModelSpec,
    tempo_spec: TempoSpec,
    gemini: GeminiSimulator,
) -> None:
    thread_id = f"ttl:{uuid.uuid4().hex}"
    gemini.script(Reply.text("answer"))
    async with open_investigator(
        model_spec,
        tempo_spec,
        GraphLimits(),
        redis_client,
        prefix=PREFIX,
        checkpoint_ttl_minutes=30,
    ) as investigator:
        await investigator.investigate(thread_id, "why?", "U1")

    client = redis_client
    keys = [k async for k in client.scan_iter(match=f"{PREFIX}:checkpoint:{thread_id}:*")]
    ttls = [await client.ttl(k) for k in keys]
    assert keys
    assert all(0 < ttl <= 30 * 60 for ttl in ttls)


class _Counts(TypedDict, total=False):
    done: Annotated[list[str], operator.add]


async def test_pending_writes_expire_and_go_once_a_newer_checkpoint_holds_them(
    redis_client: aioredis.Redis,
) -> None:
    """A step where one task finished and another failed keeps the finished task's writes
    (so a resume does not run it again), with an expiry; the next checkpoint drops them."""
    runs = {"steady": 0, "flaky": 0}
    steady_done = asyncio.Event()

    async def steady(state: _Counts) -> _Counts:
        runs["steady"] += 1
        steady_done.set()
        return {"done": ["steady"]}

    async def flaky(state: _Counts) -> _Counts:
        runs["flaky"] += 1
        if runs["flaky"] == 1:
            await steady_done.wait()  # fail only once the other task has finished
            await asyncio.sleep(0.05)  # and its writes are on their way
            raise RuntimeError("process died")
        return {"done": ["flaky"]}

    builder = StateGraph(_Counts)
    builder.add_node("steady", steady)
    builder.add_node("flaky", flaky)
    builder.add_edge(START, "steady")
    builder.add_edge(START, "flaky")
    thread_id = f"writes:{uuid.uuid4().hex}"
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    client = redis_client
    async with open_checkpointer(redis_client, ttl_minutes=30, prefix=PREFIX) as saver:
        graph = builder.compile(checkpointer=saver)
        with pytest.raises(RuntimeError):
            await graph.ainvoke({"done": []}, config)
        keys = [k async for k in client.scan_iter(match=f"*{thread_id}*")]
        assert any(k.startswith(f"{PREFIX}:checkpoint_write:".encode()) for k in keys)
        assert all(0 < ttl <= 30 * 60 for ttl in [await client.ttl(k) for k in keys])

        final = await graph.ainvoke(None, config)

        assert sorted(final["done"]) == ["flaky", "steady"]
        assert runs == {"steady": 1, "flaky": 2}
        left = [k async for k in client.scan_iter(match=f"*{thread_id}*")]
        assert [k for k in left if not k.startswith(f"{PREFIX}:checkpoint:".encode())] == []
