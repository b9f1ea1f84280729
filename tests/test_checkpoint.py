"""The Redis checkpointer: set-up races between replicas, and expiry of old threads."""

import asyncio
import uuid

import redis.asyncio as aioredis

from graph.checkpoint import LatestCheckpointSaver, setup_saver
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.runner import open_investigator
from sandbox import GeminiSimulator, Reply


async def test_replicas_setting_up_at_the_same_moment_all_succeed(redis_url: str) -> None:
    prefix = f"race{uuid.uuid4().hex[:8]}"
    savers = [
        LatestCheckpointSaver(
            redis_url,
            checkpoint_prefix=f"{prefix}:checkpoint",
            checkpoint_write_prefix=f"{prefix}:checkpoint_write",
        )
        for _ in range(6)
    ]
    try:
        await asyncio.gather(*(setup_saver(s) for s in savers))
    finally:
        for saver in savers:
            await saver.__aexit__(None, None, None)


async def test_checkpoint_keys_expire_after_the_configured_ttl(
    redis_url: str, model_spec: ModelSpec, tempo_spec: TempoSpec, gemini: GeminiSimulator
) -> None:
    thread_id = f"ttl:{uuid.uuid4().hex}"
    gemini.script(Reply.text("answer"))
    async with open_investigator(
        model_spec, tempo_spec, GraphLimits(), redis_url, checkpoint_ttl_minutes=30
    ) as investigator:
        await investigator.investigate(thread_id, "why?", "U1")

    client = aioredis.from_url(redis_url)
    keys = [k async for k in client.scan_iter(match=f"checkpoint:{thread_id}:*")]
    ttls = [await client.ttl(k) for k in keys]
    await client.aclose()
    assert keys
    assert all(0 < ttl <= 30 * 60 for ttl in ttls)
