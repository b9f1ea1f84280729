"""ActionRequests in Redis: atomic compare-and-set transitions and the audit stream.

Each request is a hash {doc, status, version}. A transition reads the request, checks the
state machine, and writes the new document with a Lua script that succeeds only if the
version is still the one read, appending the audit entry and updating the index of open
requests in the same atomic step. Of many replicas racing on one request, exactly one wins;
the others see the new status.

The open index is a sorted set of the requests a reconciler may have to settle, scored by
when: a pending request at its expiry; a proposed (not yet decided), approved or executing
one when its lease ends.
Terminal requests leave it in the transition that ends them.

The same transition that ends a real execution (executing → succeeded | failed) marks it
in two more indexes, so a process that dies right after it loses neither promise:
- to count (`actions:uncounted`): the circuit breaker has not counted it yet; the breaker's
  count removes the mark in its own atomic step (`CircuitBreaker.record`), and a reconciler
  counts what is left;
- to follow (`actions:unfollowed`, a success only): nobody has recorded yet whether its
  rollout became healthy; recording that removes the mark (`record_rollout`), and a
  reconciler resumes what is left under a short lease (`actions:following:<id>`).
Both are scored by when the execution ended.
"""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis

from gates.audit import APPEND_LUA, APPEND_ONE_LUA, AUDIT_MAXLEN, AuditKeys, flat_fields, log_entry
from gates.audit import as_text as as_text  # re-exported: the floors above read replies with it
from gates.metrics import ACTION_REQUESTS
from gates.model import (
    ActionRequest,
    RequestStatus,
    RolloutHealth,
    Transition,
    check_transition,
)

RETENTION_S = 30 * 24 * 3600  # requests are kept 30 days; the audit stream keeps the rest
DEFAULT_LEASE_S = 120.0

# One script writes a request: it stores the document only if the stored version is still
# ARGV[1], the one read ('' for a new request: none may be stored yet), appends the audit
# entry chained onto the head (KEYS[6]), trimming keeps the checkpoint (KEYS[7]), and moves
# the indexes, in one atomic step; it returns the entry's {id, seq, prev, hash}, or 0.
# ARGV[8]: when a reconciler should look at the request; empty: it is closed. A new request
# is open at once: if the process deciding it dies, the reconciler refuses it.
# ARGV[10]: 'now' to mark the execution, ended now, to count (KEYS[4]); empty: no mark.
# ARGV[11]: 'now' to mark it to follow (KEYS[5]); '-': unmark it; empty: leave it.
# "Now" is Redis's clock: the breaker orders executions by these marks and a reset by the
# same clock, whichever host ended them (hosts' clocks drift apart).
# ARGV[12]: a new request joins its thread's index (KEYS[8]), scored by when it was created,
# in the same step: no request is ever stored that the thread's cards and claim guard cannot
# find; empty: it is there already.
_WRITE = (
    APPEND_LUA
    + """
if (redis.call('HGET', KEYS[1], 'version') or '') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'doc', ARGV[2], 'status', ARGV[3], 'version', ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
local chained = audit_append(KEYS[2], KEYS[6], KEYS[7], ARGV[6], cjson.decode(ARGV[7]))
if ARGV[8] == '' then
  redis.call('ZREM', KEYS[3], ARGV[9])
else
  redis.call('ZADD', KEYS[3], ARGV[8], ARGV[9])
  redis.call('EXPIRE', KEYS[3], ARGV[5])
end
if ARGV[12] ~= '' then
  redis.call('ZADD', KEYS[8], ARGV[12], ARGV[9])
  redis.call('EXPIRE', KEYS[8], ARGV[5])  -- kept as long as the thread's newest request
end
local time = redis.call('TIME')
local now = string.format('%d.%06d', time[1], time[2])
if ARGV[10] ~= '' then
  redis.call('ZADD', KEYS[4], now, ARGV[9])
  redis.call('EXPIRE', KEYS[4], ARGV[5])
end
if ARGV[11] == '-' then
  redis.call('ZREM', KEYS[5], ARGV[9])
elseif ARGV[11] ~= '' then
  redis.call('ZADD', KEYS[5], now, ARGV[9])
  redis.call('EXPIRE', KEYS[5], ARGV[5])
end
return chained
"""
)

UNFOLLOW = "-"

# Compare-and-set of a fingerprint's holder: ARGV[1] what was read ('' for nobody), ARGV[2]
# the claimer. Returns false when claimed, else the holder that got there first.
_CLAIM = """
local holder = redis.call('GET', KEYS[1])
if (holder or '') ~= ARGV[1] then return holder end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return false
"""


class RequestNotFound(Exception):
    pass


class TransitionConflict(Exception):
    """Someone else moved the request first; `current` is what they left."""

    def __init__(self, current: ActionRequest) -> None:
        super().__init__(f"{current.id} is already {current.status}")
        self.current = current


class ActionStore:
    def __init__(
        self,
        redis: aioredis.Redis,
        prefix: str = "tracegate",
        lease_s: float = DEFAULT_LEASE_S,
        audit_maxlen: int = AUDIT_MAXLEN,
    ) -> None:
        self.redis = redis
        self.prefix = prefix
        self.lease_s = lease_s  # ACTION_LEASE: how long proposed/approved/executing may last
        self.audit_keys = AuditKeys.of(prefix)
        self.audit_stream = self.audit_keys.stream
        self.audit_maxlen = audit_maxlen
        self.open_index = f"{prefix}:actions:open"
        self.uncounted_index = f"{prefix}:actions:uncounted"
        self.unfollowed_index = f"{prefix}:actions:unfollowed"
        self._write = redis.register_script(_WRITE)
        self._append = redis.register_script(APPEND_ONE_LUA)
        self._claim = redis.register_script(_CLAIM)

    def key(self, request_id: str) -> str:
        return f"{self.prefix}:action:{request_id}"

    def follow_lease_key(self, request_id: str) -> str:
        """Held by the one process following the request's rollout."""
        return f"{self.prefix}:actions:following:{request_id}"

    @staticmethod
    def _entry(
        event: str, actor: str, note: str, request: ActionRequest | None, from_status: str = ""
    ) -> dict[str, str]:
        """One audit stream entry about `request` (moved from `from_status`), or about none.
        The fields' order is part of the entry's hash."""
        return {
            "event": event,
            "request_id": request.id if request else "",
            "action": request.action if request else "",
            "target": request.target if request else "",
            "from": from_status,
            "to": request.status if request else "",
            "actor": actor,
            "note": note[:500],
            "at": f"{time.time():.3f}",
        }

    async def create(self, request: ActionRequest) -> None:
        if not await self._compare_and_set(
            None, request, "created", request.requester, request.reason
        ):
            raise ValueError(f"request {request.id} already exists")
        ACTION_REQUESTS.labels(request.status).inc()

    async def get(self, request_id: str) -> ActionRequest:
        if (found := await self.find(request_id)) is None:
            raise RequestNotFound(f"no action request {request_id!r}")
        return found

    async def find(self, request_id: str) -> ActionRequest | None:
        """The request; None when there is none (never stored, or past its retention)."""
        doc = await self.redis.hget(self.key(request_id), "doc")
        return None if doc is None else ActionRequest.model_validate_json(doc)

    def thread_index(self, thread_key: str) -> str:
        """The ids of the thread's requests, scored by when each was created."""
        return f"{self.prefix}:actions:thread:{thread_key}"

    async def get_many(self, request_ids: list[str]) -> list[ActionRequest]:
        """The requests still kept, in the order asked, in one round trip (those past their
        retention are left out)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for request_id in request_ids:
                pipe.hget(self.key(request_id), "doc")
            docs = await pipe.execute()
        return [ActionRequest.model_validate_json(doc) for doc in docs if doc is not None]

    async def for_thread(self, thread_key: str) -> list[ActionRequest]:
        """The thread's requests still kept (those expired by retention are left out)."""
        ids = await self.redis.zrange(self.thread_index(thread_key), 0, -1)
        return await self.get_many([as_text(raw) for raw in ids])

    async def transition(
        self,
        request_id: str,
        to: RequestStatus,
        actor: str,
        note: str = "",
        *,
        expect: RequestStatus | None = None,
        **changes: Any,
    ) -> ActionRequest:
        """Move the request to `to` (from `expect`, if given), atomically, and audit it.

        Raises TransitionConflict when the request is not (or no longer) in `expect`, and
        IllegalTransition when the state machine forbids the move.
        """
        while True:
            current = await self.get(request_id)
            if expect is not None and current.status != expect:
                raise TransitionConflict(current)
            check_transition(current.status, to)
            step = Transition(
                from_status=current.status, to_status=to, at=time.time(), actor=actor, note=note
            )
            updated = current.model_copy(
                update={**changes, "status": to, "history": [*current.history, step]}
            )
            if stored := await self._compare_and_set(current, updated, "transition", actor, note):
                ACTION_REQUESTS.labels(to).inc()
                return stored
            # Lost the race: read again; the status check above decides what that means.

    async def update(
        self, request_id: str, event: str, actor: str, note: str, **changes: Any
    ) -> ActionRequest:
        """Change facts about the request (where its card is) without moving it;
        compare-and-set like a transition, and audited as `event`."""
        while True:
            current = await self.get(request_id)
            updated = current.model_copy(update=changes)
            if stored := await self._compare_and_set(current, updated, event, actor, note):
                return stored

    async def record_rollout(
        self, request_id: str, health: RolloutHealth, actor: str
    ) -> ActionRequest | None:
        """Record how the request's rollout went and unmark it to follow, in one step; once:
        None when it was recorded already (by another follower)."""
        while True:
            current = await self.get(request_id)
            if current.rollout is not None:
                await self.forget(self.unfollowed_index, request_id)
                return None
            updated = current.model_copy(update={"rollout": health})
            if stored := await self._compare_and_set(
                current, updated, "rollout_followed", actor, health.detail, follow=UNFOLLOW
            ):
                return stored

    async def _compare_and_set(
        self,
        current: ActionRequest | None,
        updated: ActionRequest,
        event: str,
        actor: str,
        note: str,
        *,
        follow: str = "",
    ) -> ActionRequest | None:
        """`updated`, stored one version on, audited; None when `current` was moved meanwhile.
        Without `current`, `updated` is a new request, stored as it is; None when it exists."""
        if current is None:
            stored, expected, thread = updated, "", repr(updated.created_at)
        else:
            stored = updated.model_copy(update={"version": current.version + 1})
            expected, thread = str(current.version), ""
        fields = self._entry(event, actor, note, stored, current.status if current else "")
        count = ""
        # A real execution (one the breaker counts) is marked in the same step that ends it.
        ended = current is not None and current.status == "executing"
        if ended and stored.status in ("succeeded", "failed") and not stored.dry_run:
            count = "now"
            if stored.status == "succeeded":
                follow = "now"
        chained = await self._write(
            keys=[
                self.key(stored.id),
                self.audit_stream,
                self.open_index,
                self.uncounted_index,
                self.unfollowed_index,
                self.audit_keys.head,
                self.audit_keys.checkpoint,
                self.thread_index(stored.thread_key),
            ],
            args=[
                expected,
                stored.model_dump_json(),
                stored.status,
                stored.version,
                RETENTION_S,
                self.audit_maxlen,
                flat_fields(fields),
                self._due(stored),
                stored.id,
                count,
                follow,
                thread,
            ],
        )
        if not chained:
            return None
        log_entry(as_text(chained[0]), fields, chained)
        return stored

    def _due(self, request: ActionRequest) -> str:
        """When a reconciler should look at the request ("" = never)."""
        if request.status == "pending_approval":
            return repr(request.expires_at)
        if request.status in ("proposed", "approved", "executing"):
            return repr(time.time() + self.lease_s)
        return ""

    async def due(self, now: float) -> list[str]:
        """Ids of open requests whose expiry or lease has passed."""
        found = await self.redis.zrangebyscore(self.open_index, 0, now)
        return [as_text(raw) for raw in found]

    async def uncounted(self) -> list[tuple[str, float]]:
        """Executions not counted by the breaker yet, with when each ended, oldest first."""
        found = await self.redis.zrange(self.uncounted_index, 0, -1, withscores=True)
        return [(as_text(entry[0]), float(entry[1])) for entry in found]

    async def unfollowed(self) -> list[str]:
        """Succeeded executions whose rollout nobody has recorded yet, oldest first."""
        return [as_text(raw) for raw in await self.redis.zrange(self.unfollowed_index, 0, -1)]

    async def forget(self, index: str, request_id: str) -> None:
        """Drop the request from an index: the open one (the request is gone, by retention,
        or already terminal), to count (gone: nothing left to count) or to follow (gone, or
        its rollout is recorded)."""
        await self.redis.zrem(index, request_id)

    async def audit(self, request: ActionRequest, event: str, actor: str, note: str) -> None:
        """An audit entry that is not a transition (e.g. a refused approval)."""
        await self._append_entry(self._entry(event, actor, note, request, request.status))

    async def audit_event(self, event: str, actor: str, note: str, target: str) -> None:
        """An audit entry about no request (e.g. a circuit breaker reset)."""
        await self._append_entry({**self._entry(event, actor, note, None), "target": target})

    async def _append_entry(self, fields: dict[str, str]) -> None:
        """Chain an entry outside a transition (refused clicks, resets, rubric changes)."""
        keys = self.audit_keys
        chained = await self._append(
            keys=[keys.stream, keys.head, keys.checkpoint],
            args=[self.audit_maxlen, flat_fields(fields)],
        )
        log_entry(as_text(chained[0]), fields, chained)

    async def recent_audit(self, count: int) -> list[dict[str, str]]:
        """The newest `count` audit entries, newest first, in text."""
        entries = await self.redis.xrevrange(self.audit_stream, count=count)
        return [{as_text(k): as_text(v) for k, v in (f or {}).items()} for _, f in entries or []]

    # --- the duplicate gate's index: one live request per (incident, fingerprint) ----
    def _fingerprint_key(self, thread_key: str, fp: str) -> str:
        return f"{self.prefix}:fingerprint:{thread_key}:{fp}"

    async def fingerprint_holder(self, thread_key: str, fp: str) -> str:
        """The id of the request that last claimed the fingerprint; '' when none did."""
        found = await self.redis.get(self._fingerprint_key(thread_key, fp))
        return as_text(found) if found is not None else ""

    async def claim_fingerprint(self, thread_key: str, fp: str, request_id: str, seen: str) -> str:
        """Claim the fingerprint for `request_id` if it is still held by `seen` (what the
        duplicate gate read; '' for nobody): '' when claimed, else the id of the request
        that claimed it since — two identical proposals at once leave one live."""
        key = self._fingerprint_key(thread_key, fp)
        holder = await self._claim(keys=[key], args=[seen, request_id, RETENTION_S])
        return as_text(holder) if holder else ""
