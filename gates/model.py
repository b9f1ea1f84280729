"""The ActionRequest and its lifecycle.

proposed → refused | pending_approval
pending_approval → approved | rejected | expired
approved → executing | aborted
executing → succeeded | failed | aborted
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Literal

from pydantic import BaseModel, Field

ACTIONS = ("rollout_undo", "scale")

Status = Literal[
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
    change_cause: str = ""
    created: str = ""


class ClusterSnapshot(BaseModel):
    """The Deployment as it was when a human was asked to approve."""

    replicas: int
    ready_replicas: int
    paused: bool
    current_revision: int
    resource_version: str
    images: list[str]
    revisions: list[Revision] = Field(default_factory=list)  # oldest first

    def previous_revision(self) -> Revision | None:
        older = [r for r in self.revisions if r.revision < self.current_revision]
        return older[-1] if older else None


class GateDecision(BaseModel):
    gate: str
    allowed: bool
    reason: str


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
    status: Status = "proposed"
    history: list[Transition] = Field(default_factory=list)
    gate_decisions: list[GateDecision] = Field(default_factory=list)
    judge: JudgeVerdict | None = None
    outcome: Outcome | None = None
    snapshot: ClusterSnapshot | None = None
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
            to = f"revision {self.to_revision}" if self.to_revision else "the previous revision"
            return f"roll back {self.target} to {to}"
        return f"{self.action} {self.target}"


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
