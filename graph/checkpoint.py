"""The Redis checkpointer: one LangGraph thread per Slack thread, shared by all replicas."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.checkpoint.redis.aio import AsyncRedisSaver
from redis.exceptions import ResponseError
from redisvl.exceptions import RedisSearchError


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
    saver = AsyncRedisSaver(redis_url, ttl=ttl)
    try:
        await setup_saver(saver)
        yield saver
    finally:
        await saver.__aexit__(None, None, None)
