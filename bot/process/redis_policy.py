"""Start-up checks of the Redis the settings point at, each failure one line naming the setting.

Redis is the one dependency whose wrong setting otherwise surfaces as a wall of traceback:
the checkpointer's index set-up fails deep inside redisvl (`unknown command 'FT.INFO'`).

A Redis that may evict keys is refused (or, with REDIS_ALLOW_EVICTION, warned of). Nearly
every key tracegate writes has a TTL (docs/operating.md, Redis keys), so under `volatile-*`
policies — managed Redis' usual default — as much as under `allkeys-*`, memory pressure would
silently drop leases, recorded turns and action requests: a thread run twice, a question
lost, an approval forgotten. The policy is read from `INFO memory`, not `CONFIG GET`:
managed Redis often refuses `CONFIG`.
"""

from __future__ import annotations

import asyncio
import logging

import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from bot.process.redis_client import redacted
from gates.store import as_text
from graph.checkpoint import CheckpointNames

log = logging.getLogger(__name__)

SAFE_POLICY = "noeviction"
# A command of each module that is harmless to run: "unknown command" means the module is absent.
_MODULE_PROBES = (
    ("RedisJSON", ("JSON.TYPE", "tracegate:preflight")),
    ("RediSearch", ("FT._LIST",)),
)


class RedisUnusable(Exception):
    """REDIS_URL points at no Redis, or at one the checkpointer cannot use; one line."""


async def not_primary(client: aioredis.Redis) -> str | None:
    """Why the node the client reaches takes no writes (a replica: every write would fail
    with READONLY), or None for a primary."""
    replication = await client.info("replication")
    role = str(replication.get("role", "master"))
    if role == "master":
        return None
    primary = f"{replication.get('master_host', '?')}:{replication.get('master_port', '?')}"
    return f"it is a read-only replica (role {role}) of {primary}"


async def check_redis(client: aioredis.Redis, url: str, timeout_s: float = 10.0) -> None:
    """Redis answers, is a primary and has RedisJSON and RediSearch, or RedisUnusable says
    which not."""
    try:
        async with asyncio.timeout(timeout_s):
            await client.ping()
            replica = await not_primary(client)
            missing = []
            for module, command in _MODULE_PROBES:
                try:
                    await client.execute_command(*command)  # type: ignore[no-untyped-call]
                except ResponseError as exc:
                    if "unknown command" not in str(exc).lower():
                        raise
                    missing.append(module)
    except (RedisError, OSError, TimeoutError) as exc:
        detail = str(exc) or type(exc).__name__
        raise RedisUnusable(f"REDIS_URL: cannot reach Redis at {redacted(url)}: {detail}") from None
    if replica:
        raise RedisUnusable(
            f"REDIS_URL: the Redis at {redacted(url)} takes no writes: {replica}; point it at "
            "the primary, or at Sentinel (redis+sentinel://host:26379/<service>/0)"
        )
    if missing:
        raise RedisUnusable(
            f"REDIS_URL: the Redis at {redacted(url)} lacks {' and '.join(missing)}; the "
            "checkpointer needs both: use Redis 8 (built in) or Redis Stack"
        )


async def missing_indexes(client: aioredis.Redis, prefix: str) -> list[str]:
    """The checkpoint indexes of the bot with REDIS_PREFIX `prefix` that do not exist (any
    of them missing: turns cannot run)."""
    listed = await client.execute_command("FT._LIST")  # type: ignore[no-untyped-call]
    existing = {as_text(name) for name in listed}
    return [name for name in CheckpointNames(prefix).indexes if name not in existing]


async def check_eviction_policy(client: aioredis.Redis, url: str, *, allow: bool) -> None:
    """Return if Redis never evicts; otherwise RedisUnusable, or only a warning with `allow`."""
    info = await client.info("memory")
    policy = str(info.get("maxmemory_policy", "unknown"))
    if policy == SAFE_POLICY:
        return
    problem = (
        f"REDIS_URL: the Redis at {redacted(url)} evicts keys under memory pressure "
        f"(maxmemory_policy is {policy}): leases, recorded turns and action requests could "
        f"vanish. Set `maxmemory-policy {SAFE_POLICY}` on that Redis"
    )
    if not allow:
        raise RedisUnusable(f"{problem}, or REDIS_ALLOW_EVICTION=true to accept the risk")
    log.warning("%s; running anyway, as REDIS_ALLOW_EVICTION=true asks", problem)
