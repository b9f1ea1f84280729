"""Alerts that start investigations: one message and one investigation per alert group.

A webhook notification (Alertmanager, Grafana) is **recorded** in Redis under its group
(`groupKey`) before the sender hears 200 (`AlertGroups.record`); then any process shows the
group and starts what it needs (`AlertDesk.process`), one process at a time per group (a
lock), and every process's reconcile loop finishes groups a dead process left pending.

- The group is posted once, in ALERT_CHANNEL (or the receiver's `?channel=`); later
  notifications of the group update that message (alerts joining, "Resolved at …").
- The first firing notification starts an investigation in the message's thread, exactly as
  a mention's: a turn, queued per thread. A repeat notification, a retried delivery or a
  second replica receiving the same group starts nothing new; alerts joining the group start
  a follow-up only when they name a service no investigation of the group covered yet.
- A notification that says the group is resolved updates the message, and an investigation
  of the group that has not started yet ends without a model call.
- Storm control: only alerts of AUTO_INVESTIGATE_SEVERITIES (an alert without a severity
  label counts), at most AUTO_INVESTIGATIONS_PER_HOUR per channel (past it the thread says
  so, naming the setting, and no model call is made); automatic turns wait behind people's
  questions for the shared model limit and spend a daily token budget of their own
  (graph/capacity.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound.blocks import alert_blocks, alert_text
from bot.outbound.posts import first_message, tagged
from bot.process.metrics import ALERTS_INVESTIGATED, ALERTS_RECEIVED, ALERTS_SKIPPED
from bot.turn.alerts import firing_alert
from bot.turn.notifications import AlertPolicy, Notification
from bot.turn.store import POSTED_ALERT, RELEASE
from gates.store import as_text
from graph.context import AlertHint

log = logging.getLogger(__name__)

ALERT_EVENT = "tracegate_alert"  # the metadata that tags a group's message
GROUP_TTL_S = 7 * 86400  # a group's record outlives any incident thread that reads it
LOCK_TTL_MS = 60_000
MAX_ROUNDS = 5  # notifications handled in one `process` (more arrive: the next call)
PENDING_GRACE_S = 10.0  # a group pending this long is another process's to finish
SERVICE_LABELS = ("service", "service_name", "app", "app_kubernetes_io_name", "deployment", "job")

# Slack refusing the channel itself: trying again will not help (the log says what to fix)
UNPOSTABLE = ("channel_not_found", "not_in_channel", "is_archived", "restricted_action")

# KEYS[1]: the group's hash; KEYS[2]: groups with notifications not yet handled.
# ARGV: ttl s, now, group key, source, channel, the notification (JSON), group id.
_RECORD = """
if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('HSET', KEYS[1], 'group_key', ARGV[3], 'source', ARGV[4], 'channel', ARGV[5])
end
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[1], 'notification', ARGV[6], 'received_at', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], 'NX', ARGV[2], ARGV[7])
return version
"""


class AlertGroups:
    """The groups' records in Redis."""

    def __init__(self, redis: aioredis.Redis, prefix: str) -> None:
        self.redis, self.prefix = redis, prefix
        self.pending_key = f"{prefix}:alert-groups-pending"
        self._record = redis.register_script(_RECORD)
        self._release = redis.register_script(RELEASE)

    def key(self, gid: str) -> str:
        return f"{self.prefix}:alert-group:{gid}"

    async def record(self, n: Notification, channel: str) -> str:
        gid = hashlib.sha256(f"{n.source}\0{n.group_key}".encode()).hexdigest()[:24]
        await self._record(
            keys=[self.key(gid), self.pending_key],
            args=[
                GROUP_TTL_S,
                f"{time.time():.3f}",
                n.group_key,
                n.source,
                channel,
                n.model_dump_json(by_alias=True),
                gid,
            ],
        )
        return gid

    async def get(self, gid: str) -> dict[str, str]:
        raw = await self.redis.hgetall(self.key(gid))
        return {as_text(k): as_text(v) for k, v in raw.items()}

    async def update(self, gid: str, **fields: str | int) -> None:
        await self.redis.hset(self.key(gid), mapping=fields)  # type: ignore[arg-type]

    async def lock(self, gid: str) -> str | None:
        token = secrets.token_hex(8)
        got = await self.redis.set(f"{self.key(gid)}:lock", token, nx=True, px=LOCK_TTL_MS)
        return token if got else None

    async def unlock(self, gid: str, token: str) -> None:
        await self._release(keys=[f"{self.key(gid)}:lock"], args=[token])

    async def done(self, gid: str) -> None:
        await self.redis.zrem(self.pending_key, gid)

    async def stale(self, older_than_s: float) -> list[str]:
        found = await self.redis.zrangebyscore(
            self.pending_key, "-inf", time.time() - older_than_s, start=0, num=50
        )
        return [as_text(g) for g in found]

    async def first_sight(self, channel: str, ts: str) -> bool:
        """Whether this is the first delivery of a posted alert (Slack redelivers)."""
        key = f"{self.prefix}:alert-posted:{channel}:{ts}"
        return bool(await self.redis.set(key, "1", nx=True, ex=GROUP_TTL_S))

    async def count_investigation(self, channel: str, limit: int) -> bool:
        """One more automatic investigation in `channel` this hour, if under `limit`."""
        hour = datetime.now(UTC).strftime("%Y%m%d%H")
        key = f"{self.prefix}:auto-investigations:{channel}:{hour}"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, 7200)
            count, _ = await pipe.execute()
        return int(count) <= limit


# (team, channel, root, ts, question, alert group id): records and queues the turn
StartTurn = Callable[[str, str, str, str, str, str], Awaitable[None]]


@dataclass
class AlertDesk:
    groups: AlertGroups
    client: AsyncWebClient
    policy: AlertPolicy
    start_turn: StartTurn
    _team: str | None = field(default=None, init=False)

    async def team(self) -> str:
        if self._team is None:
            self._team = str((await self.client.auth_test()).get("team_id") or "")
        return self._team

    async def receive(self, n: Notification, channel: str | None) -> str:
        """Record a webhook notification (before the 200); its group id."""
        ALERTS_RECEIVED.labels(n.source, n.status).inc()
        where = channel or self.policy.channel
        if not where:
            raise ValueError("no channel: set ALERT_CHANNEL or add ?channel=<id> to the URL")
        return await self.groups.record(n, where)

    async def process(self, gid: str) -> None:
        """Show the group's latest notification and start what it needs; a no-op while
        another process holds the group (it handles every notification recorded)."""
        token = await self.groups.lock(gid)
        if token is None:
            return
        try:
            for _ in range(MAX_ROUNDS):
                state = await self.groups.get(gid)
                version = int(state.get("version") or 0)
                handled = int(state.get("handled") or 0) >= version and state.get("message_ts")
                if not state or handled:  # its record is gone, or nothing is left to do
                    await self.groups.done(gid)
                    return
                try:
                    await self._handle(gid, state, version)
                except SlackApiError as exc:
                    error = exc.response.get("error") if exc.response is not None else ""
                    if error not in UNPOSTABLE:
                        raise  # rate limits, Slack's 5xx: the group stays pending, tried again
                    log.error(
                        "alert group %s cannot be posted in %s (%s): invite tracegate to the "
                        "channel, or set ALERT_CHANNEL (or ?channel=) to one it is in",
                        gid,
                        state.get("channel"),
                        error,
                    )
                    await self.groups.update(gid, handled=version, failed=str(error))
                    await self.groups.done(gid)
                    return
        finally:
            await self.groups.unlock(gid, token)

    async def _handle(self, gid: str, state: dict[str, str], version: int) -> None:
        n = Notification.model_validate_json(state["notification"])
        channel = state["channel"]
        investigated = json.loads(state.get("services") or "[]")
        blocks = alert_blocks(n, investigated=bool(state.get("turns")))
        text = alert_text(n)
        root = state.get("message_ts")
        if not root and state.get("posting_since"):
            # A try that lost Slack's answer (or its process) may have posted it:
            # chat.postMessage is not idempotent, so the channel's newest messages (that try
            # was moments ago) are searched for its tag.
            first = await self.client.conversations_history(
                channel=channel, include_all_metadata=True, limit=200
            )
            root = await first_message(first, tagged(ALERT_EVENT, "group", gid))
            if root:
                await self.groups.update(gid, message_ts=root)
        if not root:
            await self.groups.update(gid, posting_since=f"{time.time():.3f}")
            posted = await self.client.chat_postMessage(
                channel=channel,
                text=text,
                blocks=blocks,
                unfurl_links=False,
                metadata={"event_type": ALERT_EVENT, "event_payload": {"group": gid}},
            )
            root = str(posted["ts"])
            await self.groups.update(gid, message_ts=root)
        else:
            await self.client.chat_update(channel=channel, ts=root, text=text, blocks=blocks)
        if n.resolved:
            await self.groups.update(gid, resolved_at=f"{time.time():.3f}", handled=version)
            return
        started = await self._investigate(gid, state, n, channel, root, set(investigated))
        if started and not state.get("turns"):  # the message says it is being looked into
            blocks = alert_blocks(n, investigated=True)
            await self.client.chat_update(channel=channel, ts=root, text=text, blocks=blocks)
        await self.groups.update(gid, handled=version)

    async def _investigate(
        self,
        gid: str,
        state: dict[str, str],
        n: Notification,
        channel: str,
        root: str,
        covered: set[str],
    ) -> bool:
        """Start the investigation the notification needs, if any; whether one started."""
        wanted = [a for a in n.firing if self.policy.wants(a.labels)]
        if not wanted:
            if n.firing and not state.get("skipped"):
                ALERTS_SKIPPED.labels("severity").inc()
                await self.groups.update(gid, skipped="severity")
            return False
        services = {  # the services they name (the labels that usually carry one)
            value.strip().lower()
            for a in wanted
            for key in SERVICE_LABELS
            if (value := a.labels.get(key, "")) and value.strip()
        }
        turns = [t for t in (state.get("turns") or "").split(",") if t]
        if turns and not services - covered:
            return False  # a repeat, a redelivery, or alerts of services already investigated
        ts = state.get("next_ts") or (root if not turns else f"{time.time():.6f}")
        if ts in turns:
            return False
        await self.groups.update(gid, next_ts=ts)  # a retry after a crash reuses it
        if not await self.groups.count_investigation(channel, self.policy.per_hour):
            await self._over_limit(channel, root)
            await self.groups.update(gid, turns=",".join([*turns, ts]), next_ts="")
            return False
        # The investigation's question, written by the bot (never by the alert's author).
        names = sorted({a.labels.get("alertname", "") for a in n.firing} - {""}) or ["an alert"]
        question = (
            f"The alert {', '.join(names)} fired ({len(n.firing)} firing). Investigate it from "
            "the alert's labels and start time in the thread context: what is happening, since "
            "when, and why? Say what you checked and what you could not."
        )
        await self.start_turn(await self.team(), channel, root, ts, question, gid)
        ALERTS_INVESTIGATED.labels(n.source).inc()
        await self.groups.update(
            gid,
            turns=",".join([*turns, ts]),
            next_ts="",
            services=json.dumps(sorted(covered | services)),
        )
        return True

    async def on_posted(self, team: str, message: dict[str, Any]) -> None:
        """A message another app posted in an AUTO_INVESTIGATE_CHANNELS channel: a firing
        alert starts an investigation in its thread (once, however often Slack delivers
        it); anything else, a resolved alert included, starts nothing."""
        hint = firing_alert(message)
        if hint is None:
            return
        channel, ts = str(message["channel"]), str(message["ts"])
        ALERTS_RECEIVED.labels(hint.source, "firing").inc()
        if not await self.groups.first_sight(channel, ts):
            return
        if not self.policy.wants(hint.labels):
            ALERTS_SKIPPED.labels("severity").inc()
            return
        if not await self.groups.count_investigation(channel, self.policy.per_hour):
            await self._over_limit(channel, ts)
            return
        name = hint.alertname or "an alert"
        question = (
            f"The alert {name} was posted in this channel (the thread's first message). "
            "Investigate it from its labels and start time in the thread context: what is "
            "happening, since when, and why? Say what you checked and what you could not."
        )
        await self.start_turn(team, channel, ts, ts, question, POSTED_ALERT)
        ALERTS_INVESTIGATED.labels(hint.source).inc()

    async def _over_limit(self, channel: str, root: str) -> None:
        """Past AUTO_INVESTIGATIONS_PER_HOUR: counted, and the thread says so."""
        ALERTS_SKIPPED.labels("hourly_limit").inc()
        limit = self.policy.per_hour
        await self.client.chat_postMessage(
            channel=channel,
            thread_ts=root,
            text=(
                f"Not investigated automatically: this channel had {limit} automatic "
                f"investigations this hour (AUTO_INVESTIGATIONS_PER_HOUR={limit}). Mention me "
                "in this thread to ask anyway."
            ),
        )

    async def resolved(self, gid: str) -> bool:
        """Whether the group's alerts were resolved (an investigation not yet started is
        then skipped)."""
        return bool((await self.groups.get(gid)).get("resolved_at"))

    async def hints(self, gid: str) -> list[AlertHint]:
        """The group's alerts as the thread context's alert lines (labels, start, link)."""
        state = await self.groups.get(gid)
        if not state.get("notification"):
            return []
        n = Notification.model_validate_json(state["notification"])
        return [
            AlertHint(
                source=n.source,
                status=a.status,
                alertname=a.labels.get("alertname", ""),
                labels=dict(list(a.labels.items())[:12]),
                starts_at=a.starts_at,
                links=[u for u in (a.generator_url, a.dashboard_url) if u.startswith("http")][:2],
            )
            for a in n.alerts[:20]
        ]

    async def finish_pending(self) -> None:
        """Groups another process recorded and did not finish (it died): finish them."""
        for gid in await self.groups.stale(PENDING_GRACE_S):
            try:
                await self.process(gid)
            except Exception:
                log.exception("alert group %s could not be processed", gid)
