"""Policy: allowed and protected namespaces, protected Deployments."""

from __future__ import annotations

from gates.model import GateDecision
from gates.rules.base import GateContext, allow, refuse


class PolicyGate:
    name = "policy"

    async def check(self, ctx: GateContext) -> GateDecision:
        r, p = ctx.request, ctx.policy
        if refusal := p.namespace_refusal(r.namespace):
            return refuse(self.name, refusal)
        if r.target in p.protected_deployments:
            return refuse(self.name, f"{r.target} is protected (PROTECTED_DEPLOYMENTS)")
        return allow(self.name, f"{r.target} may be changed")
