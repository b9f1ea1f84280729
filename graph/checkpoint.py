"""The Redis checkpointer: one LangGraph thread per Slack thread, shared by all replicas.

Only what a resume needs is kept: a thread's latest checkpoint (one key, overwritten at
every step) and the pending writes of that checkpoint. Earlier checkpoints are history
nobody reads (no time travel, no `get_state_history`), and keeping them would make a
thread's storage grow with the square of its length: every checkpoint holds the whole state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
)
from langgraph.checkpoint.redis.aio import AsyncRedisSaver
from langgraph.checkpoint.redis.ashallow import AsyncShallowRedisSaver
from langgraph.checkpoint.redis.base import (
    CHECKPOINT_PREFIX,
    CHECKPOINT_WRITE_PREFIX,
    BaseRedisSaver,
)
from langgraph.checkpoint.redis.util import to_storage_safe_str
from redis.exceptions import ResponseError
from redisvl.exceptions import RedisSearchError

FENCE = "tracegate_fence"  # configurable key: awaited before every checkpoint write
# A run's fence: awaited before each write a run makes (a checkpoint, a Slack post); it raises
# when the run no longer holds its thread's lease, so the stale run stops without writing.
Fence = Callable[[], Awaitable[None]]


class Superseded(Exception):
    """Another run holds this thread now: this run must stop without writing."""


async def _fenced(config: RunnableConfig) -> None:
    """A run paused past its thread's lease (a stopped process, a long GC pause) may wake up
    after another worker took its turn over. The latest checkpoint is one key: a write from
    the stale run would replace the newer run's state. The run's fence raises first."""
    fence: Fence | None = config.get("configurable", {}).get(FENCE)
    if fence is not None:
        await fence()


@dataclass(frozen=True)
class CheckpointNames:
    """The names of one bot's checkpoint keys and indexes: the library's names, under the
    bot's REDIS_PREFIX (`tracegate:checkpoint:<thread>:<ns>`, ...)."""

    prefix: str

    @property
    def indexes(self) -> tuple[str, str]:
        """The prefixes of the checkpoint keys and of the pending-write keys, which are the
        names of their search indexes too."""
        return f"{self.prefix}:{CHECKPOINT_PREFIX}", f"{self.prefix}:{CHECKPOINT_WRITE_PREFIX}"

    def registry(self, thread_id: str, checkpoint_ns: str) -> str:
        """The sorted set where a thread's write keys are registered."""
        return f"{self.prefix}:{REGISTRY}:{thread_id}:{to_storage_safe_str(checkpoint_ns)}:shallow"


REGISTRY = "write_keys_zset"  # the library's registry name (ashallow.py), unprefixed there


class LatestCheckpointSaver(AsyncShallowRedisSaver):
    """The shallow saver (latest checkpoint only), which also drops the writes of
    checkpoints it has replaced, and sets expiry in one round trip per step.

    The library keeps every write a thread ever made, registered in one sorted set, and
    loads them all as the "pending writes" of the latest checkpoint: storage and every
    load would grow with the thread. Once a newer checkpoint is stored, the writes of
    older ones are already folded into it, so they go. The library would also send one
    EXPIRE per key, one round trip each (a turn's first step writes ~17 channels).
    """

    def __init__(self, redis: aioredis.Redis, *, prefix: str, ttl_minutes: float | None) -> None:
        # Every key and both index names under the bot's prefix: two bots sharing a Redis
        # (and a Slack thread) keep checkpoints of their own.
        names = CheckpointNames(prefix)
        checkpoints, writes = names.indexes
        super().__init__(
            redis_client=redis, checkpoint_prefix=checkpoints, checkpoint_write_prefix=writes
        )  # no library TTL: expiry is set here
        self._names = names
        self._ttl_s = int(ttl_minutes * 60) if ttl_minutes else None

    def _checkpoint_key(self, config: RunnableConfig) -> str:
        """The key of the thread's latest checkpoint (the library's name for it)."""
        configurable = config["configurable"]
        return self._make_shallow_redis_checkpoint_key_cached(
            configurable["thread_id"], configurable["checkpoint_ns"]
        )

    def _registry(self, config: RunnableConfig) -> str:
        """The sorted set of a thread's write keys (the library's name has no prefix)."""
        configurable = config["configurable"]
        return self._names.registry(
            configurable["thread_id"], configurable.get("checkpoint_ns", "")
        )

    async def _registered(self, registry: str) -> list[str]:
        registered = await self._redis.zrange(registry, 0, -1)
        return [k.decode() if isinstance(k, bytes) else str(k) for k in registered]

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        await _fenced(config)
        saved = await super().aput(config, checkpoint, metadata, new_versions)
        registry = self._registry(saved)
        keys = await self._registered(registry)
        # A write key ends ":{checkpoint_id}:{task_id}:{idx}" (the thread id may hold colons).
        # Checkpoint ids grow with time. Only older checkpoints' writes go: with background
        # saving (durability="async") the next step's writes may land before this put.
        stale = [k for k in keys if k.rsplit(":", 3)[1] < checkpoint["id"]]
        pipeline = self._redis.pipeline(transaction=False)
        if stale:
            pipeline.delete(*stale)
            pipeline.zrem(registry, *stale)
        if self._ttl_s:
            pipeline.expire(self._checkpoint_key(saved), self._ttl_s)
        await pipeline.execute()  # nothing sent when nothing is queued
        return saved

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """The library's write records, registered in the prefixed registry, with their
        expiry, in one round trip."""
        await _fenced(config)
        if not writes:
            return
        configurable = config["configurable"]
        thread_id, checkpoint_id = configurable["thread_id"], configurable["checkpoint_id"]
        namespace = configurable.get("checkpoint_ns", "")
        registry = self._registry(config)
        pipeline = self._redis.pipeline(transaction=False)
        keys = {}
        for position, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, position)
            # The key the library would write, named as it names them.
            key = self._make_redis_checkpoint_writes_key_cached(
                thread_id, namespace, checkpoint_id, task_id, idx
            )
            kind, blob = self.serde.dumps_typed(value)
            record = {
                "thread_id": thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint_id,
                "task_id": task_id,
                "task_path": task_path,
                "idx": idx,
                "channel": channel,
                "type": kind,
                "blob": self._encode_blob(blob),
            }
            pipeline.json().set(key, "$", record)
            keys[key] = position
        pipeline.zadd(registry, keys)
        if self._ttl_s:
            for key in [*keys, registry]:
                pipeline.expire(key, self._ttl_s)
        await pipeline.execute()

    async def _aload_pending_writes(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str
    ) -> list[PendingWrite]:
        """The writes in the prefixed registry. Unlike the library's, a Redis error is
        raised (and retried), never read as "no pending writes": a resume would then run
        finished tasks again."""
        if checkpoint_id is None:
            return []
        keys = await self._registered(self._names.registry(thread_id, checkpoint_ns))
        pipeline = self._redis.pipeline(transaction=False)
        for key in keys:
            pipeline.json().get(key)
        found = {
            (record.get("task_id", ""), record.get("idx", 0)): record
            for record in await pipeline.execute()
            if record
        }
        return BaseRedisSaver._load_writes(self.serde, found)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = await super().aget_tuple(config)
        if found is not None:
            upgrade_channels(found.checkpoint)
        if found is None or not self._ttl_s:
            return found
        # A thread read is a thread in use. Its pending writes are expired again too: a
        # run cut short between writing them and setting their expiry left them without.
        registry = self._registry(found.config)
        keys = [self._checkpoint_key(found.config), registry, *await self._registered(registry)]
        pipeline = self._redis.pipeline(transaction=False)
        for expiring in keys:
            pipeline.expire(expiring, self._ttl_s)
        await pipeline.execute()
        return found


# Channels of checkpoints written before `draft_check` (one field for check_draft's whole
# judgement) replaced them; a turn running across the deploy resumes from such a checkpoint.
_LEGACY = ("trace_verdict", "claim_verdict", "answer")


def upgrade_channels(checkpoint: Checkpoint) -> None:
    """Read a checkpoint of the previous layout as today's graph expects it: its draft's
    trace verdict, claim verdict and answer become `draft_check` (a turn resumed after its
    graph finished, or at `grade`, still has its checked answer); the tool budget, now
    configuration, is dropped. A checkpoint of today's layout is left as it is."""
    values = checkpoint["channel_values"]
    versions = checkpoint["channel_versions"]
    legacy = {name: values.pop(name, None) for name in _LEGACY}
    values.pop("budget", None)
    if "draft_check" in values or legacy["trace_verdict"] is None:
        return
    values["draft_check"] = {
        "traces": legacy["trace_verdict"],
        "claims": legacy["claim_verdict"],
        "answer": legacy["answer"],
    }
    written = [versions[name] for name in _LEGACY if name in versions]
    if written:  # as new as the newest of the fields it replaces
        versions["draft_check"] = max(written)


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
    redis: aioredis.Redis, ttl_minutes: float | None, *, prefix: str
) -> AsyncIterator[LatestCheckpointSaver]:
    """A `LatestCheckpointSaver` on `redis` (the caller's client, closed by the caller), set
    up, its keys under `prefix`, expiring `ttl_minutes` after last use."""
    saver = LatestCheckpointSaver(redis, prefix=prefix, ttl_minutes=ttl_minutes)
    try:
        await setup_saver(saver)
        yield saver
    finally:
        await saver.__aexit__(None, None, None)
