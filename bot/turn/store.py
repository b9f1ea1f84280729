"""Turns: every question, recorded in Redis before Slack hears 200, and run in order.

A turn is one message the bot must answer. Recording it is one atomic step: the turn's
hash is written and its id joins its thread's queue (a sorted set ordered by the message's
Slack ts, so arrival order holds whichever replica received it). A redelivery of the same
message finds the record: it is "already taken care of", never "a duplicate to drop".

Only the thread's head turn runs, under the thread's lease: a short Redis key renewed by a
heartbeat while the turn runs, so a dead process's thread is free again within seconds.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError

from bot.turn.threads import RECENT_THREADS_KEPT, membership_key, recent_threads_key
from gates.store import as_text

TurnState = Literal["queued", "running", "answered", "done"]

# One round trip before Slack hears 200: join the thread (the bot is in it: replies there are
# questions, and it is among the channel's recent threads), then — unless recorded before —
# the turn's hash, its place in its thread's queue, and in the index of unfinished turns
# (which workers re-queue if their job was ever lost); then the turn's saq job, queued with
# the same commands as saq's own enqueue script (KEYS[6..9], ARGV[7..8]; none in the demo's
# in-process queue). The job is queued under pcall: a failure there leaves the record
# standing and the workers' sweep queues the job instead.
_RECORD = """
redis.call('SET', KEYS[4], '1', 'EX', ARGV[1])
redis.call('ZADD', KEYS[5], ARGV[5], ARGV[5])
redis.call('ZREMRANGEBYRANK', KEYS[5], 0, ARGV[6])
redis.call('EXPIRE', KEYS[5], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 9))
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[1])
if ARGV[7] == '' then return 2 end
local queued = redis.pcall('ZSCORE', KEYS[6], KEYS[7])
if type(queued) == 'table' and queued.err then return 2 end
if queued or redis.call('EXISTS', KEYS[9]) == 1 then return 1 end
redis.call('SET', KEYS[7], ARGV[7])
redis.call('ZADD', KEYS[6], ARGV[8], KEYS[7])
if ARGV[8] == '0' then
    local pushed = redis.pcall('RPUSH', KEYS[8], KEYS[7])
    if type(pushed) == 'table' and pushed.err then return 2 end
end
return 1
"""

# A run starts: counted, unless the record is gone or the turn is done; the record as it is.
_START = """
if redis.call('HEXISTS', KEYS[1], 'thread') == 0 then return false end
if redis.call('HGET', KEYS[1], 'state') == 'done' then return false end
redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HSET', KEYS[1], 'state', 'running')
redis.call('HSETNX', KEYS[1], 'started_at', ARGV[1])
return redis.call('HGETALL', KEYS[1])
"""

# A waiting turn's look at its thread: 0 when it left the queue (finished by another run);
# 1 when it heads the queue and the lease is now its; else 2 and the head.
_TAKE_THREAD = """
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return {0} end
local head = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
if head == ARGV[1] and redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then
    return {1}
end
return {2, head}
"""

# Renew the lease if it is ours (1). A lease that is gone is taken again (2: Redis lost its
# data, nobody else can hold it, the run goes on), unless the turn is done: then another run
# took the thread over and finished it while this one was away (a worker paused past its
# lease), and nothing this run does may reach Slack (0, as when another worker holds it).
_RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not holder then
    if redis.call('HGET', KEYS[2], 'state') == 'done' then return 0 end
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return 2
end
return 0
"""

# Delete a lease (or a lock) only while it holds our token: one that expired and was taken
# since is another's.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


# What recording found: a new turn and its job queued; a new turn whose job is still to
# be queued (none given, or saq's keys refused it); a turn recorded before (a redelivery).
Recorded = Literal["queued", "recorded", "before"]
_RECORDED: dict[int, Recorded] = {1: "queued", 2: "recorded", 0: "before"}


@dataclass(frozen=True)
class QueuedJob:
    """A turn's saq job, queued in the step that records the turn (bot.turn.worker builds it)."""

    keys: tuple[str, str, str, str]  # saq's incomplete index, job id, queued list, abort id
    payload: str | bytes  # the job as saq serialises it
    scheduled: int = 0


Call = tuple[Sequence[Any], Sequence[Any]]  # one call of a script: its keys, its arguments

# A script run for a batch of calls in one invocation: each call's keys and arguments are
# sliced out of KEYS/ARGV (ARGV[1]: how many calls; then per call, its key and argument
# counts and its arguments) and given to `one` (the script itself, as a function). Under
# pcall, one call's error is its own reply ({0, message}) and the others go on ({1, reply}).
_BATCHED = """
local function one(KEYS, ARGV)
-- the script
end
local replies, k, a = {}, 0, 2
for i = 1, tonumber(ARGV[1]) do
    local nkeys, nargs = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
    local keys = {unpack(KEYS, k + 1, k + nkeys)}
    local args = {unpack(ARGV, a + 2, a + 1 + nargs)}
    local ok, reply = pcall(one, keys, args)
    if ok then
        replies[i] = {1, reply}
    else
        replies[i] = {0, type(reply) == 'table' and reply.err or tostring(reply)}
    end
    k, a = k + nkeys, a + 2 + nargs
end
return replies
"""


class ScriptBatch:
    """Calls of one script made in the same pass of the event loop run as one invocation of
    it (`_BATCHED`): a burst of mentions costs one round trip, one command and one script
    call in Redis, not one each. Each caller gets its own reply or error."""

    MAX_CALLS = 64  # per invocation: a bigger burst is several, pipelined

    def __init__(self, redis: aioredis.Redis, script: str) -> None:
        self.redis = redis
        self.script = redis.register_script(_BATCHED.replace("-- the script", script))
        self._pending: list[tuple[Call, asyncio.Future[Any]]] = []
        self._flushing: set[asyncio.Task[None]] = set()

    async def __call__(self, keys: Sequence[str], args: Sequence[Any]) -> Any:
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[Any] = loop.create_future()
        self._pending.append(((keys, args), reply))
        if len(self._pending) == 1:
            loop.call_soon(self._start_flush)
        return await reply

    def _start_flush(self) -> None:
        # A caller cancelled while it waited for this pass is not sent: not recorded, and
        # not answered, so Slack delivers it again.
        batch = [(call, reply) for call, reply in self._pending if not reply.done()]
        self._pending = []
        if not batch:
            return
        task = asyncio.create_task(self._flush(batch))
        self._flushing.add(task)
        task.add_done_callback(self._flushing.discard)
        # A flush that ends without answering (cancelled, even before it first ran: the
        # process is stopping) cancels its callers, who are stopping too.
        task.add_done_callback(lambda _: [reply.cancel() for _, reply in batch])

    async def _flush(self, batch: list[tuple[Call, asyncio.Future[Any]]]) -> None:
        replies = await self._replies([call for call, _ in batch])
        for (_, reply), result in zip(batch, replies, strict=True):
            if reply.done():  # its caller was cancelled
                continue
            if isinstance(result, Exception):
                reply.set_exception(result)
            else:
                reply.set_result(result)

    async def _replies(self, calls: list[Call]) -> list[Any]:
        """One reply, or error, per call."""
        try:
            return await self._run(calls)
        except Exception as error:
            if len(calls) == 1 or isinstance(error, ConnectionError | TimeoutError | OSError):
                return [error] * len(calls)  # Redis is unreachable: for all of them alike
            # One call that fails the whole invocation (an argument that cannot be encoded)
            # must not fail the others: each goes alone, with its own outcome.
            return [(await self._replies([call]))[0] for call in calls]

    async def _run(self, calls: list[Call]) -> list[Any]:
        chunks = [calls[i : i + self.MAX_CALLS] for i in range(0, len(calls), self.MAX_CALLS)]
        invocations = [_invocation(chunk) for chunk in chunks]
        found: list[Any] = [None] * len(chunks)
        todo = list(range(len(chunks)))
        for attempt in range(2):  # a Redis that lost its scripts (restarted) is given it once
            if attempt:
                await self.redis.script_load(self.script.script)
            async with self.redis.pipeline(transaction=False) as pipe:
                for i in todo:
                    pipe.evalsha(self.script.sha, *invocations[i])
                for i, reply in zip(todo, await pipe.execute(raise_on_error=False), strict=True):
                    found[i] = reply
            todo = [i for i in todo if isinstance(found[i], NoScriptError)]
            if not todo:
                break
        replies: list[Any] = []
        for chunk, reply in zip(chunks, found, strict=True):
            if isinstance(reply, Exception):  # Redis refused the whole invocation (OOM, ...)
                replies.extend([reply] * len(chunk))
            else:
                replies.extend(_reply(each) for each in reply)
        return replies


def _invocation(calls: list[Call]) -> list[Any]:
    """EVALSHA's arguments after the sha for `calls` run by `_BATCHED`."""
    keys = [key for call_keys, _ in calls for key in call_keys]
    args: list[Any] = [len(calls)]
    for call_keys, call_args in calls:
        args.extend((len(call_keys), len(call_args), *call_args))
    return [len(keys), *keys, *args]


def _reply(each: list[Any]) -> Any:
    """One call's reply from `_BATCHED`: its value, or its error as redis-py raises it."""
    if each[0] == 1:
        return each[1] if len(each) > 1 else None  # Lua's false/nil ends the table
    return ResponseError(as_text(each[1]))


# A turn's text fields, recorded as they are: those every record has, those it may lack.
_REQUIRED = ("thread", "team", "channel", "root", "ts")
_OPTIONAL = ("user", "text", "event_id", "user_team", "enterprise", "alert")
POSTED_ALERT = "posted"  # Turn.alert of an alert another app posted in a channel


@dataclass(frozen=True)
class Turn:
    """One question, as recorded; `thread` is the LangGraph thread id."""

    id: str
    thread: str
    team: str
    channel: str
    root: str  # the Slack thread's ts
    ts: str  # the question's own ts
    user: str = ""  # "": an automatic investigation's (no one asked)
    text: str = ""
    event_id: str = ""  # Slack's, of the event that asked (none for a shortcut or an alert)
    state: TurnState = "queued"
    user_team: str = ""  # the asker's own workspace, when Slack said (Slack Connect)
    enterprise: str = ""  # the installation's Enterprise org, when it is in one
    attempts: int = 0  # runs started (a crash leaves one counted; a hand-back does not)
    about: str | None = None  # a message shortcut's target message (its ts)
    # an automatic investigation: its alert group's id (a webhook's), or POSTED_ALERT (an
    # alert another app posted in an AUTO_INVESTIGATE_CHANNELS channel); "": a person asked
    alert: str = ""
    started_at: float = 0.0  # when a worker first ran it (its proposals are made after)
    placeholder_ts: str | None = None
    stream: bool = False  # the placeholder is a Slack stream (bot/outbound/stream.py)
    stream_tasks: str | None = None  # its running tasks, as the last run left them
    model_wait_since: float = 0.0  # when it first waited for model capacity (0: never)
    result: dict[str, Any] | None = None  # the computed answer, stored before delivery
    delivered: frozenset[str] = frozenset()  # delivery steps already done

    @classmethod
    def from_hash(cls, turn_id: str, raw: dict[Any, Any]) -> Turn:
        f = {as_text(k): as_text(v) for k, v in raw.items()}
        return cls(
            id=turn_id,
            **{name: f[name] for name in _REQUIRED},
            **{name: f.get(name, "") for name in _OPTIONAL},
            state=f.get("state", "queued"),  # type: ignore[arg-type]
            attempts=int(f.get("attempts", 0)),
            about=f.get("about") or None,
            started_at=float(f.get("started_at") or 0),
            placeholder_ts=f.get("placeholder_ts") or None,
            stream=f.get("stream") == "1",
            stream_tasks=f.get("stream_tasks") or None,
            model_wait_since=float(f.get("model_wait_since") or 0),
            result=json.loads(f["result"]) if f.get("result") else None,
            delivered=frozenset(
                k.removeprefix("delivered:") for k in f if k.startswith("delivered:")
            ),
        )


def turn_id_of(thread: str, ts: str) -> str:
    """A message's turn id: Slack's ts is unique within a channel."""
    return f"{thread}@{ts}"


class TurnStore:
    def __init__(self, redis: aioredis.Redis, ttl_s: int, prefix: str = "tracegate") -> None:
        self.redis = redis
        self.ttl_s = ttl_s
        self.prefix = prefix
        self._unfinished = f"{prefix}:turns-unfinished"
        self._record = ScriptBatch(redis, _RECORD)
        self._start = redis.register_script(_START)
        self._take_thread = redis.register_script(_TAKE_THREAD)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(RELEASE)

    def _key(self, turn_id: str) -> str:
        return f"{self.prefix}:turn:{turn_id}"

    def _queue(self, thread: str) -> str:
        return f"{self.prefix}:turns:{thread}"

    def _lease(self, thread: str) -> str:
        return f"{self.prefix}:lease:{thread}"

    async def record(self, turn: Turn, job: QueuedJob | None = None) -> Recorded:
        """Join the turn's thread, record the turn, queue it in its thread and queue its
        job (one round trip, shared with the other turns recorded in the same moment)."""
        fields = {name: getattr(turn, name) for name in (*_REQUIRED, *_OPTIONAL)} | {
            "about": turn.about or "",
            "state": "queued",
            "attempts": 0,
            "recorded_at": f"{time.time():.3f}",
        }
        created = await self._record(
            keys=[
                self._key(turn.id),
                self._queue(turn.thread),
                self._unfinished,
                membership_key(self.prefix, turn.team, turn.channel, turn.root),
                recent_threads_key(self.prefix, turn.team, turn.channel),
                *(job.keys if job else ()),
            ],
            args=[
                self.ttl_s,
                float(turn.ts),
                turn.id,
                time.time(),
                turn.root,
                -RECENT_THREADS_KEPT - 1,
                job.payload if job else "",
                job.scheduled if job else 0,
                *(str(item) for pair in fields.items() for item in pair),
            ],
        )
        return _RECORDED[int(created)]

    async def get(self, turn_id: str) -> Turn | None:
        """The turn, or None if its record is gone (a few fields written after Redis lost
        the rest do not make a record)."""
        raw = await self.redis.hgetall(self._key(turn_id))
        if not any(as_text(k) == "thread" for k in raw):
            return None
        return Turn.from_hash(turn_id, raw)

    async def states(self, turn_ids: list[str]) -> list[str | None]:
        """Each turn's state (one round trip); None where its record is gone."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for turn_id in turn_ids:
                pipe.hmget(self._key(turn_id), ["thread", "state"])
            found = await pipe.execute()
        return [as_text(state or b"queued") if thread else None for thread, state in found]

    async def update(self, turn_id: str, **fields: str | int) -> None:
        await self.redis.hset(self._key(turn_id), mapping=fields)  # type: ignore[arg-type]

    async def claim_placeholder(self, turn_id: str) -> bool:
        """True for the one caller that may post the turn's placeholder."""
        return bool(await self.redis.hsetnx(self._key(turn_id), "placeholder_claimed", 1))

    async def unclaim_placeholder(self, turn_id: str) -> None:
        await self.redis.hdel(self._key(turn_id), "placeholder_claimed")

    async def store_result(self, turn_id: str, result: dict[str, Any]) -> None:
        await self.update(turn_id, result=json.dumps(result, default=str), state="answered")

    async def mark_delivered(self, turn_id: str, step: str) -> None:
        await self.update(turn_id, **{f"delivered:{step}": 1})

    async def start(self, turn_id: str) -> Turn | None:
        """Count one more run of the turn (one round trip); the turn as it is now, or None
        when its record is gone or it is done."""
        raw = await self._start(keys=[self._key(turn_id)], args=[f"{time.time():.3f}"])
        if not raw:
            return None
        return Turn.from_hash(turn_id, dict(zip(raw[::2], raw[1::2], strict=True)))

    async def waiting_since(self, turn_id: str) -> None:
        """Keep when the turn first waited for model capacity: now, if it never had."""
        await self.redis.hsetnx(self._key(turn_id), "model_wait_since", f"{time.time():.3f}")

    async def handed_back(self, turn_id: str) -> None:
        """A graceful stop gave the turn back: that run does not count as an attempt."""
        await self.redis.hincrby(self._key(turn_id), "attempts", -1)

    async def finish(self, turn: Turn) -> None:
        """Done: leave the queues and keep the record (a late redelivery still finds it),
        in one step (MULTI)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(self._key(turn.id), "state", "done")
            pipe.zrem(self._queue(turn.thread), turn.id)
            pipe.zrem(self._unfinished, turn.id)
            await pipe.execute()

    async def head(self, thread: str) -> str | None:
        first = await self.redis.zrange(self._queue(thread), 0, 0)
        return as_text(first[0]) if first else None

    async def recorded(self, thread: str, stamps: list[str]) -> set[str]:
        """Which of these messages of the thread are turns (questions to the bot); none
        given, no round trip (an empty pipeline sends nothing)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for ts in stamps:
                pipe.exists(self._key(turn_id_of(thread, ts)))
            found = await pipe.execute()
        return {ts for ts, exists in zip(stamps, found, strict=True) if exists}

    async def take_thread(self, turn: Turn, token: str, ttl_s: float) -> tuple[int, str | None]:
        """(0, None): the turn left its thread's queue; (1, None): it heads the queue and
        holds the thread's lease now; (2, head): it waits behind `head` (None: no head)."""
        outcome, *head = await self._take_thread(
            keys=[self._queue(turn.thread), self._lease(turn.thread)],
            args=[turn.id, token, int(ttl_s * 1000)],
        )
        return int(outcome), as_text(head[0]) if head and head[0] else None

    async def exists(self, turn_id: str) -> bool:
        """Whether the turn's record is there (cheaper than `get`)."""
        return bool(await self.redis.hexists(self._key(turn_id), "thread"))

    async def unfinished(self, recorded_before: float, limit: int = 1000) -> list[str]:
        """Turns recorded before a time and not finished yet, oldest first."""
        ids = await self.redis.zrangebyscore(
            self._unfinished, 0, recorded_before, start=0, num=limit
        )
        return [as_text(i) for i in ids]

    async def drop(self, turn_id: str) -> None:
        """Take a turn whose record is gone out of its thread's queue and the index."""
        thread = turn_id.rsplit("@", 1)[0]
        await self.redis.zrem(self._queue(thread), turn_id)
        await self.redis.zrem(self._unfinished, turn_id)

    async def unfinished_count(self) -> int:
        return int(await self.redis.zcard(self._unfinished))

    async def oldest_unfinished(self) -> float | None:
        """When the oldest turn not finished yet was recorded (epoch seconds), if any."""
        oldest = await self.redis.zrange(self._unfinished, 0, 0, withscores=True)
        return float(oldest[0][1]) if oldest else None

    async def forget_unfinished(self, turn_id: str) -> None:
        """Drop an index entry whose turn record has expired."""
        await self.redis.zrem(self._unfinished, turn_id)

    # --- the thread's lease ------------------------------------------------------------
    async def renew(self, thread: str, token: str, ttl_s: float, turn_id: str = "") -> int:
        """1: renewed; 2: it was gone and is ours again; 0: another worker holds it, or it
        was gone and `turn_id` is done (another run finished the turn meanwhile)."""
        keys = [self._lease(thread), self._key(turn_id)]
        return int(await self._renew(keys=keys, args=[token, int(ttl_s * 1000)]))

    async def leased(self, thread: str) -> bool:
        """Whether some run holds the thread (its lease is renewed while the run lives)."""
        return bool(await self.redis.exists(self._lease(thread)))

    async def holds(self, thread: str, token: str) -> bool:
        return as_text(await self.redis.get(self._lease(thread)) or b"") == token

    async def release(self, thread: str, token: str) -> None:
        await self._release(keys=[self._lease(thread)], args=[token])
