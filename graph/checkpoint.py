"""The Redis checkpointer: one LangGraph thread per Slack thread, shared by all replicas.

Only what a resume needs is kept: a thread's latest checkpoint (one key, overwritten at
every step) and the pending writes of that checkpoint. Earlier checkpoints are history
nobody reads (no time travel, no `get_state_history`), and keeping them made a thread's
storage grow with the square of its length: every checkpoint holds the whole state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.redis.aio import AsyncRedisSaver
from langgraph.checkpoint.redis.ashallow import AsyncShallowRedisSaver
from langgraph.checkpoint.redis.util import to_storage_safe_str
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError, ResponseError, TimeoutError
from redisvl.exceptions import RedisSearchError


def redis_options() -> dict[str, Any]:
    """How every tracegate Redis client rides out a blip (a restart, a failover): a command
    on a dropped connection is retried with backoff for about 5 s before it fails, and idle
    pooled connections are checked before use."""
    return {
        "retry": Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=9),
        "retry_on_error": [ConnectionError, TimeoutError, ConnectionResetError],
        "health_check_interval": 10,
        "socket_keepalive": True,
    }


class LatestCheckpointSaver(AsyncShallowRedisSaver):
    """The shallow saver (latest checkpoint only), which also drops the writes of
    checkpoints it has replaced.

    The library keeps every write a thread ever made, registered in one sorted set, and
    loads them all as the "pending writes" of the latest checkpoint: storage and every
    load would grow with the thread. Once a newer checkpoint is stored, the writes of
    older ones are already folded into it, so they go.
    """

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        saved = await super().aput(config, checkpoint, metadata, new_versions)
        configurable = saved["configurable"]
        registry = (
            f"write_keys_zset:{configurable['thread_id']}:"
            f"{to_storage_safe_str(configurable['checkpoint_ns'])}:shallow"
        )
        registered = await self._redis.zrange(registry, 0, -1)
        keys = [k.decode() if isinstance(k, bytes) else str(k) for k in registered]
        # A write key ends ":{checkpoint_id}:{task_id}:{idx}" (the thread id may hold colons).
        stale = [k for k in keys if k.rsplit(":", 3)[1] != checkpoint["id"]]
        if stale:
            pipeline = self._redis.pipeline(transaction=False)
            pipeline.delete(*stale)
            pipeline.zrem(registry, *stale)
            await pipeline.execute()
        return saved


async def setup_saver(saver: AsyncShallowRedisSaver | AsyncRedisSaver, attempts: int = 3) -> None:
    """Create the search indexes; tolerate a replica that created them a moment earlier.

    The saver checks for each index, then creates it: two replicas starting together can
    both see it missing, and the slower one gets "Index already exists".
    """
    for attempt in range(attempts):
        try:
            await saver.asetup()
            return
        except (RedisSearchError, ResponseError) as exc:
            if "already exists" not in str(exc).lower() or attempt == attempts - 1:
                raise


@asynccontextmanager
async def open_checkpointer(
    redis_url: str, ttl_minutes: float | None
) -> AsyncIterator[LatestCheckpointSaver]:
    """A `LatestCheckpointSaver`, set up, whose keys expire `ttl_minutes` after last use."""
    ttl = {"default_ttl": ttl_minutes, "refresh_on_read": True} if ttl_minutes else None
    saver = LatestCheckpointSaver(redis_url, ttl=ttl, connection_args=redis_options())
    try:
        await setup_saver(saver)
        yield saver
    finally:
        await saver.__aexit__(None, None, None)
