"""A Redis Stack primary, a replica and three sentinels on loopback: the binaries the Redis
Stack package ships (`redis-server`, `redis-sentinel`), with Sentinel's timings shortened
(`down-after-milliseconds` 1500, `failover-timeout` 5000) so a failover takes seconds."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest
import redis.asyncio as aioredis

from sandbox.fleet import LIBSSL, free_port
from tests.redis_fixtures import STACK

SERVICE = "mymaster"
DOWN_AFTER_MS = 1500
FAILOVER_TIMEOUT_MS = 5000


class RedisHA:
    """The nodes by port; `sentinel_url` is what REDIS_URL is set to."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.nodes: dict[int, subprocess.Popen[bytes]] = {}
        self.sentinels: dict[int, subprocess.Popen[bytes]] = {}
        self.primary = 0
        self.replica = 0

    @property
    def sentinel_url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def url(self, port: int) -> str:
        return f"redis://127.0.0.1:{port}/0"

    def _spawn(self, command: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            command,
            env={**os.environ, "LD_LIBRARY_PATH": str(LIBSSL)},
            stdout=subprocess.DEVNULL,
            cwd=self.folder,
        )

    def start_node(self, port: int, replica_of: int | None = None) -> None:
        data = self.folder / f"node-{port}"
        data.mkdir(exist_ok=True)
        command = [str(STACK / "bin" / "redis-server"), "--port", str(port)]
        command += ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(data)]
        command += ["--loglevel", "warning", "--repl-diskless-sync-delay", "0"]
        for module in ("rejson.so", "redisearch.so"):
            command += ["--loadmodule", str(STACK / "lib" / module)]
        if replica_of is not None:
            command += ["--replicaof", "127.0.0.1", str(replica_of)]
        self.nodes[port] = self._spawn(command)

    def start_sentinel(self, port: int) -> None:
        config = self.folder / f"sentinel-{port}.conf"
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {self.folder}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        self.sentinels[port] = self._spawn([str(STACK / "bin" / "redis-sentinel"), str(config)])

    async def info(self, port: int, section: str = "replication") -> dict[str, object]:
        client = aioredis.Redis(port=port, socket_timeout=1)
        try:
            return dict(await client.info(section))
        finally:
            await client.aclose()

    async def until(
        self, check: Callable[[], Awaitable[object]], what: str, timeout_s: float = 20.0
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if await check():
                    return
            except (OSError, aioredis.RedisError):
                pass
            await asyncio.sleep(0.05)
        raise TimeoutError(f"not within {timeout_s:g}s: {what}")

    async def replicated(self) -> bool:
        replica = await self.info(self.replica)
        return replica.get("master_link_status") == "up"

    async def sentinels_agree(self) -> bool:
        """Every sentinel sees the other two and the replica: a failover can be elected."""
        for port in self.sentinels:
            client = aioredis.Redis(port=port, socket_timeout=1, decode_responses=True)
            try:
                state = cast(dict[str, Any], await client.sentinel_master(SERVICE))
            finally:
                await client.aclose()
            if state["num-other-sentinels"] != 2 or state["num-slaves"] != 1:
                return False
        return True

    async def promoted(self, port: int) -> bool:
        """`port` is the primary, and the sentinels say so."""
        if (await self.info(port)).get("role") != "master":
            return False
        for sentinel in self.sentinels:
            client = aioredis.Redis(port=sentinel, socket_timeout=1, decode_responses=True)
            try:
                address = await client.execute_command(  # type: ignore[no-untyped-call]
                    "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE
                )
            finally:
                await client.aclose()
            if int(address[1]) != port:
                return False
        return True

    def kill(self, port: int) -> None:
        self.nodes[port].send_signal(signal.SIGKILL)
        self.nodes[port].wait()

    def stop(self) -> None:
        for process in [*self.nodes.values(), *self.sentinels.values()]:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)  # a test may have stopped it
                process.kill()
                process.wait()


async def _started(folder: Path, *, sentinels: bool) -> RedisHA:
    ha = RedisHA(folder)
    ha.primary, ha.replica = free_port(), free_port()
    ha.start_node(ha.primary)
    await ha.until(lambda: ha.info(ha.primary), "the primary answers")
    ha.start_node(ha.replica, replica_of=ha.primary)
    await ha.until(ha.replicated, "the replica is in sync")
    if sentinels:
        for _ in range(3):
            ha.start_sentinel(free_port())
        await ha.until(ha.sentinels_agree, "the sentinels know each other and the replica")
    return ha


@pytest.fixture
async def redis_ha(tmp_path: Path) -> AsyncIterator[RedisHA]:
    """A primary, its replica and three sentinels watching them."""
    ha = await _started(tmp_path, sentinels=True)
    try:
        yield ha
    finally:
        ha.stop()


@pytest.fixture
async def redis_pair(tmp_path: Path) -> AsyncIterator[RedisHA]:
    """A primary and its replica, no sentinels."""
    ha = await _started(tmp_path, sentinels=False)
    try:
        yield ha
    finally:
        ha.stop()
