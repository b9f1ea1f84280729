"""Start-up checks of what the settings point at, each failure one line naming the setting.

Redis is the one dependency whose wrong setting otherwise surfaces as a wall of traceback:
the checkpointer's index set-up fails deep inside redisvl (`unknown command 'FT.INFO'`).
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from langgraph.checkpoint.redis.base import CHECKPOINT_PREFIX, CHECKPOINT_WRITE_PREFIX
from redis.exceptions import RedisError, ResponseError

# The search indexes the checkpointer creates at start-up and queries on every turn.
CHECKPOINT_INDEXES = (CHECKPOINT_PREFIX, CHECKPOINT_WRITE_PREFIX)
# A command of each module that is harmless to run: "unknown command" means the module is absent.
_MODULE_PROBES = (
    ("RedisJSON", ("JSON.TYPE", "tracegate:preflight")),
    ("RediSearch", ("FT._LIST",)),
)


class RedisUnusable(Exception):
    """REDIS_URL points at no Redis, or at one the checkpointer cannot use; one line."""


def redacted(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + netloc))


async def missing_modules(client: aioredis.Redis) -> list[str]:
    missing = []
    for module, command in _MODULE_PROBES:
        try:
            await client.execute_command(*command)  # type: ignore[no-untyped-call]
        except ResponseError as exc:
            if "unknown command" not in str(exc).lower():
                raise
            missing.append(module)
    return missing


async def check_redis(client: aioredis.Redis, url: str, timeout_s: float = 10.0) -> None:
    """Redis answers and has RedisJSON and RediSearch, or RedisUnusable says which not."""
    try:
        async with asyncio.timeout(timeout_s):
            await client.ping()
            missing = await missing_modules(client)
    except (RedisError, OSError, TimeoutError) as exc:
        detail = str(exc) or type(exc).__name__
        raise RedisUnusable(f"REDIS_URL: cannot reach Redis at {redacted(url)}: {detail}") from None
    if missing:
        raise RedisUnusable(
            f"REDIS_URL: the Redis at {redacted(url)} lacks {' and '.join(missing)}; the "
            "checkpointer needs both: use Redis 8 (built in) or Redis Stack"
        )


async def missing_indexes(client: aioredis.Redis) -> list[str]:
    """The checkpoint indexes that do not exist (any of them missing: turns cannot run)."""
    existing = {
        name.decode() if isinstance(name, bytes) else str(name)
        for name in await client.execute_command("FT._LIST")  # type: ignore[no-untyped-call]
    }
    return [name for name in CHECKPOINT_INDEXES if name not in existing]
