"""Validation: a well-formed request for a known action on one named Deployment."""

from __future__ import annotations

from gates.cluster import DNS1123_LABEL, DNS1123_SUBDOMAIN
from gates.model import ACTIONS, GateDecision
from gates.rules.base import GateContext, allow, refuse

GENERIC_NAMES = frozenset({"*", "all", "any", "every", "everything"})
HARD_MAX_REPLICAS = 10_000


class ValidationGate:
    name = "validation"

    async def check(self, ctx: GateContext) -> GateDecision:
        r = ctx.request
        if r.action not in ACTIONS:
            return refuse(self.name, f"unknown action {r.action!r}; known: {', '.join(ACTIONS)}")
        for what, value, pattern in (
            ("namespace", r.namespace, DNS1123_LABEL),
            ("deployment", r.deployment, DNS1123_SUBDOMAIN),
        ):
            if value.lower() in GENERIC_NAMES or "*" in value:
                return refuse(self.name, f"{what} {value!r} is not one named object")
            if not pattern.fullmatch(value):
                return refuse(self.name, f"{what} {value!r} is not a valid DNS-1123 name")
        if r.action == "scale":
            if r.replicas is None:
                return refuse(self.name, "scale needs a replica count")
            if not 0 <= r.replicas <= HARD_MAX_REPLICAS:
                return refuse(self.name, f"replicas {r.replicas} is outside 0..{HARD_MAX_REPLICAS}")
        elif r.replicas is not None:
            return refuse(self.name, "rollout_undo takes no replica count")
        if r.to_revision is not None and r.to_revision < 1:
            return refuse(self.name, f"to_revision {r.to_revision} must be a positive revision")
        return allow(self.name, "well-formed")
