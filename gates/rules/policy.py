"""Policy: allowed and protected namespaces, protected Deployments."""

from __future__ import annotations

from gates.model import GateDecision
from gates.rules.base import GateContext, allow, refuse


class PolicyGate:
    name = "policy"

    async def check(self, ctx: GateContext) -> GateDecision:
        r, p = ctx.request, ctx.policy
        if r.namespace in p.protected_namespaces:
            return refuse(self.name, f"namespace {r.namespace} is protected (PROTECTED_NAMESPACES)")
        if p.allowed_namespaces and r.namespace not in p.allowed_namespaces:
            return refuse(self.name, f"namespace {r.namespace} is not in ALLOWED_NAMESPACES")
        if r.target in p.protected_deployments:
            return refuse(self.name, f"{r.target} is protected (PROTECTED_DEPLOYMENTS)")
        return allow(self.name, f"{r.target} may be changed")
