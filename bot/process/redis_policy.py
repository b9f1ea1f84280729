"""At start-up: a Redis that may evict keys is refused (or, with REDIS_ALLOW_EVICTION, warned of).

Nearly every key tracegate writes has a TTL (docs/operating.md, Redis keys), so under
`volatile-*` policies — managed Redis' usual default — as much as under `allkeys-*`, memory
pressure would silently drop leases, recorded turns and action requests: a thread run twice,
a question lost, an approval forgotten. The policy is read from `INFO memory`, not
`CONFIG GET`: managed Redis often refuses `CONFIG`.
"""

from __future__ import annotations

import logging

import redis.asyncio as aioredis

from bot.process.preflight import RedisUnusable
from bot.process.redis_client import redacted

log = logging.getLogger(__name__)

SAFE_POLICY = "noeviction"


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
