"""The circuit breaker's memory, in Redis so it survives restarts and is shared by replicas.

Two scopes, each target and the whole cluster: a sliding window of real executions (rate),
and a count of consecutive failures that opens the breaker. Open stays open until an
approver resets it; nothing closes it on a timer.

Each execution is counted once, whoever counts it and however often: the executor right
after it ended, or a reconciler when the executor died first (the store marked the
request to count in the transition that ended it; counting removes the mark). The count is
one Lua script: the request remembers it was counted (`counted` on its hash), the windows'
members are request ids, and the failure streak moves only for a request counted now.

The streak is kept in the order executions *ended*, not the order they are counted (a
reconciler counts a dead executor's late): it is the set of failures that ended after the
scope's newest success or reset (`since` on the state hash; the failures in
`breaker:failures:<scope>`). A late count of an older execution moves it only as far as its
end time says, and failures that ended before a reset never reopen the breaker. One thing
is not undone by a late count: a breaker the counted failures opened stays open when a
success that ended among them is counted afterwards (the streak shrinks, the breaker does
not close): only an approver closes a breaker.

One clock decides every time here, Redis's (`TIME`): the end marks, a count's default end,
a reset, and the trimming of the rate window. Hosts' clocks drift; Redis has one.
"""

from __future__ import annotations

from pydantic import BaseModel

from gates.config import ActionPolicy
from gates.store import ActionStore, as_text

GLOBAL = "*"
# A closed breaker's failure count is forgotten after a month without actions on its
# target; an open breaker never expires.
FORGET_CLOSED_S = 30 * 24 * 3600

# KEYS[1]: the request; KEYS[2]: the index of executions to count; KEYS[3..5]: the target's
# window, state and failures since its newest success; KEYS[6..8]: the global scope's.
# ARGV: request id, when it ended (the caller's word, used only when the transition's mark
# is gone; '' for Redis's now), '1' succeeded | '0' failed, failure threshold, window (s),
# FORGET_CLOSED_S. Returns 1 when this call counted it, 0 when it had been counted before.
# A request that is not stored (past retention, or a bare id) is counted once per window
# member instead.
_RECORD = """
local marked = redis.call('ZSCORE', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
local ended = marked or ARGV[2]  -- the mark is Redis's clock: the same for every host
if ended == '' then
  local time = redis.call('TIME')
  ended = string.format('%d.%06d', time[1], time[2])
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  if redis.call('HSETNX', KEYS[1], 'counted', ended) == 0 then return 0 end
end
local at = tonumber(ended)
local counted = 0
for i = 3, 6, 3 do
  local window, state, fails = KEYS[i], KEYS[i + 1], KEYS[i + 2]
  if redis.call('ZADD', window, 'NX', ended, ARGV[1]) == 1 then
    counted = 1
    -- Nothing older than the window counts: the key may go once its newest entry has.
    redis.call('EXPIRE', window, ARGV[5])
    -- The streak is the failures that ENDED after the newest success (or reset): a late
    -- count of an older execution moves it only as far as its end time says.
    local since = tonumber(redis.call('HGET', state, 'since') or '0')
    local newer = at > since
    if newer and ARGV[3] == '1' then
      redis.call('HSET', state, 'since', ended)
      redis.call('ZREMRANGEBYSCORE', fails, '-inf', ended)
    elseif newer then
      redis.call('ZADD', fails, ended, ARGV[1])
    end
    local failures = redis.call('ZCARD', fails)
    redis.call('HSET', state, 'failures', failures)
    if ARGV[3] == '0' and newer and failures >= tonumber(ARGV[4]) then
      local reason = failures .. ' consecutive failed actions (last: ' .. ARGV[1] .. ')'
      redis.call('HSET', state, 'open', '1', 'reason', reason)
      redis.call('PERSIST', state)  -- open stays open until an approver resets it
      redis.call('PERSIST', fails)
    elseif redis.call('HGET', state, 'open') ~= '1' then
      redis.call('EXPIRE', state, ARGV[6])
      if failures > 0 then redis.call('EXPIRE', fails, ARGV[6]) end
    end
  end
end
return counted
"""

# The window is trimmed by the clock its entries are scored by (Redis's), never a host's.
# KEYS[1]: the scope's window, KEYS[2]: its state; ARGV[1]: the window (s).
# Returns [executions in the window, the state hash as a flat list].
_STATE = """
local time = redis.call('TIME')
local now = tonumber(time[1]) + tonumber(time[2]) / 1e6
local oldest = string.format('%.6f', now - tonumber(ARGV[1]))
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', oldest)
return {redis.call('ZCARD', KEYS[1]), redis.call('HGETALL', KEYS[2])}
"""

_RESET = """
local time = redis.call('TIME')
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'since', string.format('%d.%06d', time[1], time[2]))
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""


class BreakerState(BaseModel):
    scope: str
    open: bool
    consecutive_failures: int
    recent_executions: int
    reason: str = ""


class CircuitBreaker:
    def __init__(self, store: ActionStore, policy: ActionPolicy) -> None:
        """Counting the store's executions, under its prefix."""
        self.store = store
        self.policy = policy
        self.prefix = f"{store.prefix}:breaker"
        self._record = store.redis.register_script(_RECORD)
        self._reset = store.redis.register_script(_RESET)
        self._state = store.redis.register_script(_STATE)

    async def state(self, scope: str) -> BreakerState:
        recent, flat = await self._state(
            keys=[f"{self.prefix}:executions:{scope}", f"{self.prefix}:state:{scope}"],
            args=[self.policy.breaker_window_s],
        )
        fields = {as_text(k): as_text(v) for k, v in zip(flat[::2], flat[1::2], strict=True)}
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
        False when it was counted before. `at`: when it ended, used only when the request
        carries no end mark (default: now on Redis's clock, the clock of the marks)."""
        keys = [self.store.key(request_id), self.store.uncounted_index]
        keys += [
            f"{self.prefix}:{kind}:{scope}"
            for scope in (target, GLOBAL)
            for kind in ("executions", "state", "failures")
        ]
        counted = await self._record(
            keys=keys,
            args=[
                request_id,
                "" if at is None else repr(at),
                "1" if succeeded else "0",
                self.policy.breaker_failure_threshold,
                self.policy.breaker_window_s,
                FORGET_CLOSED_S,
            ],
        )
        return bool(counted)

    async def reset(self, scope: str) -> None:
        """Closed, and failures that ended before now (Redis's clock, as the executions'
        end marks) no longer count toward a streak."""
        await self._reset(
            keys=[f"{self.prefix}:state:{scope}", f"{self.prefix}:failures:{scope}"],
            args=[FORGET_CLOSED_S],
        )
