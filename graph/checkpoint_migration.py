"""The copy of unprefixed checkpoints under REDIS_PREFIX.

An unprefixed checkpoint has the library's names, the same for every bot on a Redis: a
thread's latest checkpoint is `checkpoint:<thread>:<ns>`, its pending writes
`checkpoint_write:<thread>:<ns>:<checkpoint id>:<task>:<idx>`, registered in
`write_keys_zset:<thread>:<ns>:shallow`. The bot reads `<prefix>:` + each of those names
(graph/checkpoint.py, `CheckpointNames`). A copy never replaces a prefixed checkpoint as
new as the unprefixed one or newer (a bot already running the thread under the prefix has
the truth); copies keep the unprefixed keys' expiry; a second run finds nothing to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import redis.asyncio as aioredis
from langgraph.checkpoint.redis.base import CHECKPOINT_PREFIX
from langgraph.checkpoint.redis.util import to_storage_safe_str

from gates.store import as_text
from graph.checkpoint import REGISTRY, CheckpointNames

_SCAN_BATCH = 500


@dataclass
class MigrationReport:
    copied: int = 0  # checkpoints copied under the prefix (with their pending writes)
    writes: int = 0  # pending writes copied with them
    already: int = 0  # the same checkpoint is already under the prefix
    newer: int = 0  # a newer checkpoint is under the prefix: the old one was not copied
    removed: int = 0  # old keys deleted (none with keep)
    other: int = 0  # `checkpoint:` keys of another layout (the history saver's): left alone

    def summary(self) -> str:
        return (
            f"{self.copied} checkpoint(s) copied with {self.writes} pending write(s); "
            f"{self.already} already under the prefix; {self.newer} left alone (a newer "
            f"checkpoint is under the prefix); {self.removed} old key(s) removed; "
            f"{self.other} key(s) of another layout left alone"
        )


async def migrate_checkpoints(
    redis: aioredis.Redis, prefix: str, *, keep: bool = False
) -> MigrationReport:
    """Copy every un-prefixed checkpoint (and its pending writes and their registry) under
    `prefix`; delete the old keys unless `keep`."""
    names = CheckpointNames(prefix)
    report = MigrationReport()
    async for raw in redis.scan_iter(match=f"{CHECKPOINT_PREFIX}:*", count=_SCAN_BATCH):
        old_key = as_text(raw)
        old: Any = await redis.json().get(old_key)
        if not isinstance(old, dict):
            continue  # expired in between, or not the library's
        thread_id, namespace = str(old.get("thread_id", "")), str(old.get("checkpoint_ns", ""))
        if old_key != f"{CHECKPOINT_PREFIX}:{thread_id}:{namespace}":
            # One checkpoint of a thread's whole history (the saver before the latest-only
            # one): nothing reads it now, and it expires on its own.
            report.other += 1
            continue
        old_registry = f"{REGISTRY}:{thread_id}:{to_storage_safe_str(namespace)}:shallow"
        new_key = f"{names.prefix}:{old_key}"
        current: Any = await redis.json().get(new_key)
        ours = str(old.get("checkpoint_id", ""))
        theirs = str(current.get("checkpoint_id", "")) if isinstance(current, dict) else ""
        # Checkpoint ids grow with time: the greater is the later state of the thread.
        if theirs and theirs == ours:
            report.already += 1
        elif theirs > ours:
            report.newer += 1
        else:
            registered = cast(
                list[tuple[bytes, float]], await redis.zrange(old_registry, 0, -1, withscores=True)
            )
            scores = {as_text(key): score for key, score in registered}
            write_keys = list(scores)
            pipeline = redis.pipeline(transaction=False)
            for key in write_keys:
                pipeline.json().get(key)
                pipeline.pttl(key)
            pipeline.pttl(old_key)
            *found, checkpoint_ttl = await pipeline.execute()
            new_registry = names.registry(thread_id, namespace)
            pipeline = redis.pipeline(transaction=True)  # the checkpoint and its writes, together
            pipeline.delete(new_registry)  # the older prefixed checkpoint's writes go with it
            copied = {}
            for key, record, ttl in zip(write_keys, found[::2], found[1::2], strict=True):
                if not isinstance(record, dict):
                    continue  # expired in between
                new_write = f"{names.prefix}:{key}"
                pipeline.json().set(new_write, "$", record)
                if ttl > 0:
                    pipeline.pexpire(new_write, ttl)
                copied[new_write] = scores[key]
            if copied:
                pipeline.zadd(new_registry, copied)
                if checkpoint_ttl > 0:
                    pipeline.pexpire(new_registry, checkpoint_ttl)
            pipeline.json().set(new_key, "$", old)
            if checkpoint_ttl > 0:
                pipeline.pexpire(new_key, checkpoint_ttl)
            await pipeline.execute()
            report.copied += 1
            report.writes += len(copied)
        if not keep:
            old_writes = cast(list[bytes], await redis.zrange(old_registry, 0, -1))
            report.removed += await redis.delete(old_key, old_registry, *old_writes)
    return report
