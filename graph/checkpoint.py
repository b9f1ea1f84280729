"""The Redis checkpointer: one LangGraph thread per Slack thread, shared by all replicas.

Only what a resume needs is kept: a thread's latest checkpoint (one key, overwritten at
every step) and the pending writes of that checkpoint. Earlier checkpoints are history
nobody reads (no time travel, no `get_state_history`), and keeping them made a thread's
storage grow with the square of its length: every checkpoint holds the whole state.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import hiredis
import redis
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.redis.aio import AsyncRedisSaver
from langgraph.checkpoint.redis.ashallow import AsyncShallowRedisSaver
from langgraph.checkpoint.redis.util import to_storage_safe_str
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.driver_info import DriverInfo
from redis.exceptions import ConnectionError, DataError, ResponseError, TimeoutError
from redisvl.exceptions import RedisSearchError


class HiredisPackedConnection(Connection):
    """redis-py's asyncio connection packs commands in Python, one join per argument (the
    sync client hands them to hiredis). Here hiredis packs them, as the sync client's
    `HiredisRespSerializer` does: the same bytes (floats as repr, str as UTF-8; bool and
    None refused), at a fraction of the CPU — a turn's record is ~45 arguments, in the ack
    path of every mention. hiredis encodes text as UTF-8, strictly: a client configured
    with another `encoding` or `encoding_errors` is packed by redis-py's own packer, which
    goes through that client's encoder (tests/test_redis_packing.py holds both to it)."""

    def pack_command(self, *args: Any) -> list[bytes]:
        if (self.encoder.encoding, self.encoder.encoding_errors) != ("utf-8", "strict"):
            return list(super().pack_command(*args))
        if isinstance(args[0], str):
            args = (*args[0].encode().split(), *args[1:])
        elif b" " in args[0]:
            args = (*args[0].split(), *args[1:])
        args = tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in args)
        try:
            return [hiredis.pack_command(args)]
        except TypeError as error:
            raise DataError(str(error)) from error


def redis_options() -> dict[str, Any]:
    """How every tracegate Redis client rides out a blip (a restart, a failover): a command
    on a dropped connection is retried with backoff for about 5 s before it fails, and idle
    pooled connections are checked before use."""
    return {
        "retry": Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=9),
        "retry_on_error": [ConnectionError, TimeoutError, ConnectionResetError],
        "health_check_interval": 10,
        "socket_keepalive": True,
        "connection_class": HiredisPackedConnection,
        # Named once: otherwise every new pooled connection looks redis-py's version up in
        # the installed packages' metadata (~1 ms of CPU, in the ack path under a burst).
        "driver_info": DriverInfo(lib_version=redis.__version__),
    }


FENCE = "tracegate_fence"  # configurable key: awaited before every checkpoint write
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


class LatestCheckpointSaver(AsyncShallowRedisSaver):
    """The shallow saver (latest checkpoint only), which also drops the writes of
    checkpoints it has replaced, and sets expiry in one round trip per step.

    The library keeps every write a thread ever made, registered in one sorted set, and
    loads them all as the "pending writes" of the latest checkpoint: storage and every
    load would grow with the thread. Once a newer checkpoint is stored, the writes of
    older ones are already folded into it, so they go. The library would also send one
    EXPIRE per key, one round trip each (a turn's first step writes ~17 channels).
    """

    def __init__(self, redis_url: str, *, ttl_minutes: float | None, **kwargs: Any) -> None:
        super().__init__(redis_url, **kwargs)  # no library TTL: expiry is set here
        self._ttl_s = int(ttl_minutes * 60) if ttl_minutes else None

    @staticmethod
    def _registry(config: RunnableConfig) -> str:
        """The sorted set where the library registers a thread's write keys."""
        configurable = config["configurable"]
        namespace = to_storage_safe_str(configurable.get("checkpoint_ns", ""))
        return f"write_keys_zset:{configurable['thread_id']}:{namespace}:shallow"

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
            configurable = saved["configurable"]
            key = self._make_shallow_redis_checkpoint_key_cached(
                configurable["thread_id"], configurable["checkpoint_ns"]
            )
            pipeline.expire(key, self._ttl_s)
        if stale or self._ttl_s:
            await pipeline.execute()
        return saved

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await _fenced(config)
        await super().aput_writes(config, writes, task_id, task_path)
        if not writes or not self._ttl_s:
            return
        configurable = config["configurable"]
        # The keys the library just wrote, named as it names them.
        keys = [
            self._make_redis_checkpoint_writes_key_cached(
                configurable["thread_id"],
                configurable.get("checkpoint_ns", ""),
                configurable["checkpoint_id"],
                task_id,
                WRITES_IDX_MAP.get(channel, idx),
            )
            for idx, (channel, _) in enumerate(writes)
        ]
        pipeline = self._redis.pipeline(transaction=False)
        for key in [*keys, self._registry(config)]:
            pipeline.expire(key, self._ttl_s)
        await pipeline.execute()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = await super().aget_tuple(config)
        if found is not None:
            upgrade_channels(found.checkpoint)
        if found is None or not self._ttl_s:
            return found
        # A thread read is a thread in use. Its pending writes are expired again too: a
        # run cut short between writing them and setting their expiry left them without.
        configurable = found.config["configurable"]
        key = self._make_shallow_redis_checkpoint_key_cached(
            configurable["thread_id"], configurable["checkpoint_ns"]
        )
        registry = self._registry(found.config)
        pipeline = self._redis.pipeline(transaction=False)
        for expiring in [key, registry, *await self._registered(registry)]:
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
    redis_url: str, ttl_minutes: float | None
) -> AsyncIterator[LatestCheckpointSaver]:
    """A `LatestCheckpointSaver`, set up, whose keys expire `ttl_minutes` after last use."""
    saver = LatestCheckpointSaver(
        redis_url, ttl_minutes=ttl_minutes, connection_args=redis_options()
    )
    try:
        await setup_saver(saver)
        yield saver
    finally:
        await saver.__aexit__(None, None, None)
