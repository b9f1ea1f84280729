"""Circuit breaker: stop after repeated failures, and cap how often actions run."""

from __future__ import annotations

from gates.breaker import GLOBAL
from gates.model import GateDecision
from gates.rules.base import GateContext, allow, refuse


class CircuitBreakerGate:
    name = "circuit_breaker"

    async def check(self, ctx: GateContext) -> GateDecision:
        r, p = ctx.request, ctx.policy
        minutes = p.breaker_window_s // 60
        for scope, label, cap in (
            (r.target, r.target, p.breaker_max_per_target),
            (GLOBAL, "the cluster", p.breaker_max_global),
        ):
            state = await ctx.breaker.state(scope)
            if state.open:
                return refuse(
                    self.name,
                    f"the breaker for {label} is open ({state.reason}); "
                    "an approver may reset it from this card",
                    open_breaker=scope,
                )
            if state.recent_executions >= cap:
                return refuse(
                    self.name,
                    f"{state.recent_executions} actions ran on {label} in the last {minutes} min "
                    f"(limit {cap})",
                )
        return allow(self.name, "closed")
