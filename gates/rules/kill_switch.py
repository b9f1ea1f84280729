"""Kill switch: two levels, one gate.

- `ACTIONS_ENABLED` (the process's policy) is the ceiling: off, proposals are still shown and
  Approve runs a server-side dry run only. Nothing in Slack lifts it.
- The runtime stop (`ActionsSwitch`): an approver stops every action from the App Home tab.
  It is one Redis hash read by every gate run, so every process refuses from its next
  decision on — a proposal being made, and an approved action at its re-check before the
  write — naming who stopped actions and when. An approver starts them again the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import redis.asyncio as aioredis

from gates.model import GateDecision
from gates.rules.base import GateContext, allow, refuse
from gates.store import as_text


@dataclass(frozen=True)
class Stopped:
    """Actions are stopped: by whom, when (epoch seconds) and why."""

    by: str
    at: float
    reason: str = ""

    def describe(self) -> str:
        when = datetime.fromtimestamp(self.at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        why = f" ({self.reason})" if self.reason else ""
        return f"all actions were stopped by {self.by} at {when}{why}"


class ActionsSwitch:
    """The runtime stop of all actions, shared by every process through Redis."""

    def __init__(self, redis: aioredis.Redis, prefix: str) -> None:
        self.redis = redis
        self.key = f"{prefix}:actions:stopped"

    async def stopped(self) -> Stopped | None:
        """Who stopped actions, or None while they run. Raises when Redis cannot be read:
        the gate then fails, and a failed gate run refuses (fail closed)."""
        found = {as_text(k): as_text(v) for k, v in (await self.redis.hgetall(self.key)).items()}
        if "by" not in found:
            return None
        return Stopped(found["by"], float(found.get("at") or 0), found.get("reason", ""))

    async def stop(self, user: str, reason: str = "") -> Stopped:
        """Stop every action now; a second stop keeps the first one's who and when."""
        stopped = Stopped(user, time.time(), reason[:200])
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(self.key, "by", stopped.by)
            pipe.hsetnx(self.key, "at", repr(stopped.at))
            pipe.hsetnx(self.key, "reason", stopped.reason)
            await pipe.execute()
        return await self.stopped() or stopped

    async def start(self) -> bool:
        """Let actions run again (within ACTIONS_ENABLED); False when they were not stopped."""
        return bool(await self.redis.delete(self.key))


class KillSwitchGate:
    name = "kill_switch"

    async def check(self, ctx: GateContext) -> GateDecision:
        stopped = await ActionsSwitch(ctx.store.redis, ctx.store.prefix).stopped()
        if stopped is not None:
            return refuse(
                self.name,
                f"{stopped.describe()}; an approver can start them again from the App Home tab",
            )
        if ctx.policy.actions_enabled:
            return allow(self.name, "actions are enabled")
        return allow(
            self.name,
            "ACTIONS_ENABLED is off: Approve runs a server-side dry run only; nothing changes",
        )
