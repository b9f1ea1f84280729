"""What a rule gate sees, and what it returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gates.breaker import CircuitBreaker
from gates.cluster import KubernetesCluster
from gates.config import ActionPolicy
from gates.model import ActionRequest, ClusterSnapshot, GateDecision
from gates.store import ActionStore


@dataclass
class GateContext:
    request: ActionRequest
    policy: ActionPolicy
    cluster: KubernetesCluster
    store: ActionStore
    breaker: CircuitBreaker
    recheck: bool = False  # True when re-run at approval time, before execution
    # The duplicate gate's read of the fingerprint's holder ('' for none, or not read).
    fingerprint_seen: str = ""
    # The Deployment as `snapshot()` fetched it; None: not fetched (or it could not be).
    fetched_snapshot: ClusterSnapshot | None = field(default=None, repr=False)

    async def snapshot(self) -> ClusterSnapshot:
        """The Deployment now (fetched once per gate run); raises ClusterError."""
        if self.fetched_snapshot is None:
            self.fetched_snapshot = await self.cluster.snapshot(
                self.request.namespace, self.request.deployment
            )
        return self.fetched_snapshot


class RuleGate(Protocol):
    name: str

    async def check(self, ctx: GateContext) -> GateDecision: ...


def allow(gate: str, reason: str) -> GateDecision:
    return GateDecision(gate=gate, allowed=True, reason=reason)


def refuse(gate: str, reason: str, open_breaker: str | None = None) -> GateDecision:
    return GateDecision(gate=gate, allowed=False, reason=reason, open_breaker=open_breaker)
