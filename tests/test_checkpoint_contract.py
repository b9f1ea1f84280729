"""LatestCheckpointSaver (graph/checkpoint.py) names the library's keys with the library's own
private key builders, reads its `_redis` client, and rebuilds its write-key registry name:
langgraph-checkpoint-redis has no public API for expiring or pruning a thread's keys in one
round trip. This is the contract that fails loudly when an upgrade changes any of it
(pyproject.toml pins the range it was checked on): every key the library writes for a thread
is one the saver names, and a read renews the expiry of each (docs/operating.md's promise)."""

from __future__ import annotations

import uuid
from typing import TypedDict

import redis.asyncio as aioredis
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.redis.ashallow import AsyncShallowRedisSaver
from langgraph.graph import START, StateGraph

from graph.checkpoint import LatestCheckpointSaver, open_checkpointer

TTL_MINUTES = 30


class _Note(TypedDict):
    text: str


async def _note(state: _Note) -> _Note:
    return {"text": state["text"] + "!"}


def test_the_library_internals_the_saver_uses_are_still_there() -> None:
    for name in (
        "_make_shallow_redis_checkpoint_key_cached",
        "_make_redis_checkpoint_writes_key_cached",
    ):
        assert callable(getattr(AsyncShallowRedisSaver, name, None)), (
            f"langgraph-checkpoint-redis no longer has {name}: LatestCheckpointSaver names "
            "keys with it (graph/checkpoint.py); re-check the saver against the new version"
        )


async def test_a_read_renews_the_expiry_of_every_key_of_the_thread(
    redis_client: aioredis.Redis,
) -> None:
    builder = StateGraph(_Note)
    builder.add_node("note", _note)
    builder.add_edge(START, "note")
    thread_id = f"contract:{uuid.uuid4().hex}"
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    client = redis_client
    async with open_checkpointer(client, ttl_minutes=TTL_MINUTES, prefix="contract") as saver:
        assert isinstance(saver, LatestCheckpointSaver)
        await builder.compile(checkpointer=saver).ainvoke({"text": "hi"}, config)
        keys = [k async for k in client.scan_iter(match=f"*{thread_id}*")]
        assert keys
        for key in keys:  # as if the thread had sat unused for most of its TTL
            await client.expire(key, 5)

        assert await saver.aget_tuple(config) is not None

        ttls = {key: await client.ttl(key) for key in keys}
    assert all(TTL_MINUTES * 60 - 60 < ttl <= TTL_MINUTES * 60 for ttl in ttls.values()), ttls
