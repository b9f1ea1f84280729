"""The circuit breaker's memory, in Redis so it survives restarts and is shared by replicas.

Two scopes, each target and the whole cluster: a sliding window of real executions (rate),
and a count of consecutive failures that opens the breaker. Open stays open until an
approver resets it; nothing closes it on a timer.
"""

from __future__ import annotations

import time
import uuid

import redis.asyncio as aioredis
from pydantic import BaseModel

from gates.config import ActionPolicy
from gates.store import as_text

GLOBAL = "*"
# A closed breaker's failure count is forgotten after a month without actions on its
# target; an open breaker never expires.
FORGET_CLOSED_S = 30 * 24 * 3600


class BreakerState(BaseModel):
    scope: str
    open: bool
    consecutive_failures: int
    recent_executions: int
    reason: str = ""


class CircuitBreaker:
    def __init__(
        self, redis: aioredis.Redis, policy: ActionPolicy, prefix: str = "tracegate"
    ) -> None:
        self.redis = redis
        self.policy = policy
        self.prefix = f"{prefix}:breaker"

    async def state(self, scope: str) -> BreakerState:
        now = time.time()
        window = f"{self.prefix}:executions:{scope}"
        await self.redis.zremrangebyscore(window, 0, now - self.policy.breaker_window_s)
        recent = await self.redis.zcard(window)
        raw = await self.redis.hgetall(f"{self.prefix}:state:{scope}")
        fields = {as_text(k): as_text(v) for k, v in raw.items()}
        return BreakerState(
            scope=scope,
            open=fields.get("open") == "1",
            consecutive_failures=int(fields.get("failures", 0)),
            recent_executions=recent,
            reason=fields.get("reason", ""),
        )

    async def record(self, target: str, succeeded: bool, request_id: str) -> None:
        """Count one real execution on `target` and in the global scope."""
        now = time.time()
        for scope in (target, GLOBAL):
            window = f"{self.prefix}:executions:{scope}"
            await self.redis.zadd(window, {f"{request_id}:{uuid.uuid4().hex[:6]}": now})
            # Nothing older than the window counts: the key may go once its newest entry has.
            await self.redis.expire(window, self.policy.breaker_window_s)
            key = f"{self.prefix}:state:{scope}"
            if succeeded:
                await self.redis.hset(key, "failures", 0)
                await self.redis.expire(key, FORGET_CLOSED_S)
                continue
            failures = await self.redis.hincrby(key, "failures", 1)
            if failures < self.policy.breaker_failure_threshold:
                await self.redis.expire(key, FORGET_CLOSED_S)
                continue
            await self.redis.hset(
                key,
                mapping={
                    "open": "1",
                    "reason": f"{failures} consecutive failed actions (last: {request_id})",
                },
            )
            await self.redis.persist(key)  # open stays open until an approver resets it

    async def reset(self, scope: str) -> None:
        await self.redis.delete(f"{self.prefix}:state:{scope}")
