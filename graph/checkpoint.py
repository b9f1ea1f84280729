"""The Redis checkpointer: one LangGraph thread per Slack thread, shared by all replicas."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langgraph.checkpoint.redis.aio import AsyncRedisSaver
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


async def setup_saver(saver: AsyncRedisSaver, attempts: int = 3) -> None:
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
) -> AsyncIterator[AsyncRedisSaver]:
    """An `AsyncRedisSaver`, set up, whose keys expire `ttl_minutes` after last use."""
    ttl = {"default_ttl": ttl_minutes, "refresh_on_read": True} if ttl_minutes else None
    saver = AsyncRedisSaver(redis_url, ttl=ttl, connection_args=redis_options())
    try:
        await setup_saver(saver)
        yield saver
    finally:
        await saver.__aexit__(None, None, None)
