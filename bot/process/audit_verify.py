"""`tracegate audit verify`: check the audit stream's hash chain (gates/audit.py).

Exit 0: intact (entries written before the chain are reported, not failed); 1: a changed,
inserted or missing entry, each named; 2: Redis cannot be read (REDIS_URL)."""

from __future__ import annotations

import asyncio
import sys

from bot.process.redis_client import connect_redis, redacted
from bot.process.settings import Settings
from gates.audit import AuditKeys, AuditReport, read_and_verify


async def _verify(settings: Settings) -> AuditReport:
    redis = connect_redis(settings.redis_spec())
    try:
        return await read_and_verify(redis, settings.redis.prefix)
    finally:
        await redis.aclose()


def verify_audit(settings: Settings) -> int:
    from redis.exceptions import RedisError

    stream = AuditKeys.of(settings.redis.prefix).stream
    try:
        report = asyncio.run(_verify(settings))
    except RedisError as exc:
        print(
            f"tracegate audit verify: cannot read {stream} from Redis at REDIS_URL "
            f"({redacted(settings.redis.url)}): {exc}",
            file=sys.stderr,
        )
        return 2
    print(f"tracegate audit verify ({stream}):")
    for line in report.lines():
        print(f"  {line}")
    return 0 if report.intact else 1
