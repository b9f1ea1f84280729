"""Kill switch: with ACTIONS_ENABLED off, proposals are still shown; Approve only dry-runs."""

from __future__ import annotations

from gates.model import GateDecision
from gates.rules.base import GateContext, allow


class KillSwitchGate:
    name = "kill_switch"

    async def check(self, ctx: GateContext) -> GateDecision:
        if ctx.policy.actions_enabled:
            return allow(self.name, "actions are enabled")
        return allow(
            self.name,
            "ACTIONS_ENABLED is off: Approve runs a server-side dry run only; nothing changes",
        )
