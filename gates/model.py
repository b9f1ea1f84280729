"""The ActionRequest and its lifecycle.

proposed → refused | pending_approval
pending_approval → approved | rejected | expired
approved → executing | aborted          (aborted: nothing was sent to the cluster)
executing → succeeded | failed | aborted (decided by reading the cluster back)
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Literal

from pydantic import BaseModel, Field

ACTIONS = ("rollout_undo", "scale")

RequestStatus = Literal[
    "proposed",
    "refused",
    "pending_approval",
    "approved",
    "rejected",
    "expired",
    "executing",
    "succeeded",
    "failed",
    "aborted",
]

TRANSITIONS: dict[str, frozenset[str]] = {
    "proposed": frozenset({"refused", "pending_approval"}),
    "pending_approval": frozenset({"approved", "rejected", "expired"}),
    "approved": frozenset({"executing", "aborted"}),
    "executing": frozenset({"succeeded", "failed", "aborted"}),
}
TERMINAL = frozenset({"refused", "rejected", "expired", "succeeded", "failed", "aborted"})


class IllegalTransition(Exception):
    """A transition the state machine does not allow (a bug, not a race)."""


class Revision(BaseModel):
    revision: int
    images: list[str]
    template_hash: str = ""  # the pod template without `pod-template-hash`, hashed
    change_cause: str = ""
    created: str = ""
    replicaset: str = ""  # the ReplicaSet that holds it


def rollback_target(revisions: list[Revision], to_revision: int | None) -> Revision | None:
    """kubectl's choice (rollback.go `deploymentRevision`): `to_revision` if given, else the
    second-highest revision. `revisions` holds only ReplicaSets whose revision parsed.
    The one place "previous revision" is computed: card, gates and executor all use it."""
    if to_revision:
        return next((r for r in revisions if r.revision == to_revision), None)
    newest_first = sorted(revisions, key=lambda r: r.revision, reverse=True)
    return newest_first[1] if len(newest_first) > 1 else None


class ClusterSnapshot(BaseModel):
    """A Deployment as read from the API: what a human is shown, what the gates judge."""

    replicas: int
    ready_replicas: int
    paused: bool
    current_revision: int
    resource_version: str
    images: list[str]
    template_hash: str = ""
    revisions: list[Revision] = Field(default_factory=list)  # oldest first


class CardLocation(BaseModel):
    """Where the request's approval card was posted: the only message its buttons may be on."""

    channel: str
    ts: str


class RolloutHealth(BaseModel):
    """What followed a succeeded action: did the rollout become healthy in time?"""

    healthy: bool
    detail: str  # e.g. "rolled out: 4/4 available"
    reverse: str = ""  # when not healthy: the action that would undo this one


class GateDecision(BaseModel):
    gate: str
    allowed: bool
    reason: str
    open_breaker: str | None = None  # the scope of an open circuit breaker that refused


class JudgeVerdict(BaseModel):
    safe_to_proceed: bool
    reason: str
    available: bool = True  # False: the judge failed and JUDGE_FAIL_MODE decided


class Transition(BaseModel):
    from_status: str
    to_status: str
    at: float
    actor: str
    note: str = ""


class Outcome(BaseModel):
    dry_run: bool
    detail: str


class ActionRequest(BaseModel):
    id: str = Field(default_factory=lambda: "act-" + uuid.uuid4().hex[:10])
    action: str
    namespace: str
    deployment: str
    replicas: int | None = None
    to_revision: int | None = None
    reason: str = ""
    evidence: list[str] = Field(default_factory=list)  # trace IDs
    context: str = ""  # the RCA the proposal came from (untrusted text)
    thread_key: str
    requester: str
    created_at: float = Field(default_factory=time.time)
    expires_at: float = 0.0
    status: RequestStatus = "proposed"
    history: list[Transition] = Field(default_factory=list)
    gate_decisions: list[GateDecision] = Field(default_factory=list)
    judge: JudgeVerdict | None = None
    outcome: Outcome | None = None
    snapshot: ClusterSnapshot | None = None
    target_revision: Revision | None = None  # rollout_undo: pinned at proposal, shown, executed
    dry_run: bool = False  # set when execution starts
    # The resourceVersion the write is conditional on (set when execution starts): a
    # reconciler fences it before it may conclude "not applied".
    write_precondition: str | None = None
    card: CardLocation | None = None
    rollout: RolloutHealth | None = None
    fingerprint: str = ""
    version: int = 0

    @property
    def target(self) -> str:
        return f"{self.namespace}/{self.deployment}"

    @property
    def refusal(self) -> GateDecision | None:
        return next((d for d in self.gate_decisions if not d.allowed), None)

    def describe(self) -> str:
        if self.action == "scale":
            current = self.snapshot.replicas if self.snapshot else "?"
            return f"scale {self.target} from {current} to {self.replicas} replicas"
        if self.action == "rollout_undo":
            revision = self.target_revision.revision if self.target_revision else self.to_revision
            to = f"revision {revision}" if revision is not None else "the previous revision"
            return f"roll back {self.target} to {to}"
        return f"{self.action} {self.target}"

    def is_applied(self, now: ClusterSnapshot) -> bool:
        """Does the cluster show this action's change? Decides an outcome the API's answer
        cannot (a timeout or a dropped connection says nothing about the write)."""
        if self.action == "scale":
            return now.replicas == self.replicas
        return self.target_revision is not None and (
            now.template_hash == self.target_revision.template_hash
        )

    def reverse(self) -> str:
        """The action that would undo this one, as a human would ask for it."""
        before = self.snapshot
        if before is None:
            return ""
        if self.action == "scale":
            return f"scale {self.target} back to {before.replicas} replicas"
        return f"roll {self.target} back to revision {before.current_revision}"


def fingerprint(request: ActionRequest, snapshot: ClusterSnapshot | None) -> str:
    """Same action, target, arguments and cluster state → same fingerprint."""
    material = {
        "action": request.action,
        "target": request.target,
        "replicas": request.replicas,
        "to_revision": request.to_revision,
        "snapshot": [snapshot.replicas, snapshot.current_revision, snapshot.resource_version]
        if snapshot
        else None,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:20]


def check_transition(current: str, new: str) -> None:
    if current in TERMINAL:
        raise IllegalTransition(f"{current} is terminal; cannot move to {new}")
    if new not in TRANSITIONS.get(current, frozenset()):
        raise IllegalTransition(f"{current} → {new} is not a legal transition")
