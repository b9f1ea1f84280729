"""The circuit breaker's memory, in Redis so it survives restarts and is shared by replicas.

Two scopes, each target and the whole cluster: a sliding window of real executions (rate),
and a count of consecutive failures that opens the breaker. Open stays open until an
approver resets it; nothing closes it on a timer.

Each execution is counted once, whoever counts it and however often: the executor right
after it ended, or a reconciler when the executor died first (the store marked the
request to count in the transition that ended it; counting removes the mark). The count is
one Lua script: the request remembers it was counted (`counted` on its hash), the windows'
members are request ids, and the failure streak moves only for a request counted now.
"""

from __future__ import annotations

import time

import redis.asyncio as aioredis
from pydantic import BaseModel

from gates.config import ActionPolicy
from gates.store import as_text, request_key, uncounted_key

GLOBAL = "*"
# A closed breaker's failure count is forgotten after a month without actions on its
# target; an open breaker never expires.
FORGET_CLOSED_S = 30 * 24 * 3600

# KEYS[1]: the request; KEYS[2]: the index of executions to count; KEYS[3], KEYS[4]: the
# target's window and state; KEYS[5], KEYS[6]: the global scope's.
# ARGV: request id, when it ended, '1' succeeded | '0' failed, failure threshold, window (s),
# FORGET_CLOSED_S. Returns 1 when this call counted it, 0 when it had been counted before.
# A request that is not stored (past retention, or a bare id) is counted once per window
# member instead.
_RECORD = """
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HSETNX', KEYS[1], 'counted', ARGV[2]) == 0 then return 0 end
end
local counted = 0
for i = 3, 5, 2 do
  local window, state = KEYS[i], KEYS[i + 1]
  if redis.call('ZADD', window, 'NX', ARGV[2], ARGV[1]) == 1 then
    counted = 1
    -- Nothing older than the window counts: the key may go once its newest entry has.
    redis.call('EXPIRE', window, ARGV[5])
    local failures = 0
    if ARGV[3] == '1' then
      redis.call('HSET', state, 'failures', 0)
    else
      failures = redis.call('HINCRBY', state, 'failures', 1)
    end
    if failures >= tonumber(ARGV[4]) then
      local reason = failures .. ' consecutive failed actions (last: ' .. ARGV[1] .. ')'
      redis.call('HSET', state, 'open', '1', 'reason', reason)
      redis.call('PERSIST', state)  -- open stays open until an approver resets it
    elseif redis.call('HGET', state, 'open') ~= '1' then
      redis.call('EXPIRE', state, ARGV[6])
    end
  end
end
return counted
"""


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
        self.store_prefix = prefix
        self.prefix = f"{prefix}:breaker"
        self._record = redis.register_script(_RECORD)

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

    async def record(
        self, target: str, succeeded: bool, request_id: str, at: float | None = None
    ) -> bool:
        """Count one real execution on `target` and in the global scope, once per request:
        False when it was counted before. `at`: when it ended (default: now)."""
        keys = [request_key(self.store_prefix, request_id), uncounted_key(self.store_prefix)]
        for scope in (target, GLOBAL):
            keys += [f"{self.prefix}:executions:{scope}", f"{self.prefix}:state:{scope}"]
        counted = await self._record(
            keys=keys,
            args=[
                request_id,
                repr(time.time() if at is None else at),
                "1" if succeeded else "0",
                self.policy.breaker_failure_threshold,
                self.policy.breaker_window_s,
                FORGET_CLOSED_S,
            ],
        )
        return bool(counted)

    async def reset(self, scope: str) -> None:
        await self.redis.delete(f"{self.prefix}:state:{scope}")
