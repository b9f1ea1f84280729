"""The action pipeline: propose → rule gates → judge → human → rule gates again → execute.

RULE_GATES is the order, visible in one list. Each gate returns a decision with its
name and a reason; the first refusal ends the proposal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from gates.breaker import GLOBAL, CircuitBreaker
from gates.cluster import ClusterError, KubernetesCluster
from gates.config import ActionPolicy
from gates.judge import ActionJudge
from gates.model import ActionRequest, GateDecision, Outcome, fingerprint
from gates.rules.base import GateContext, RuleGate
from gates.rules.blast_radius import BlastRadiusGate
from gates.rules.circuit_breaker import CircuitBreakerGate
from gates.rules.duplicate import DuplicateGate
from gates.rules.kill_switch import KillSwitchGate
from gates.rules.policy import PolicyGate
from gates.rules.validation import ValidationGate
from gates.store import ActionStore, RequestNotFound, TransitionConflict

log = logging.getLogger(__name__)

RULE_GATES: list[RuleGate] = [
    ValidationGate(),
    KillSwitchGate(),
    PolicyGate(),
    BlastRadiusGate(),
    CircuitBreakerGate(),
    DuplicateGate(),
]

SYSTEM = "tracegate"
CHANGED = "the deployment changed since this was proposed; ask again"

Verdict = Literal["executed", "rejected", "denied", "already_handled", "expired", "not_found"]


@dataclass(frozen=True)
class ApprovalResult:
    verdict: Verdict
    message: str
    request: ActionRequest | None


class ActionPipeline:
    def __init__(
        self,
        store: ActionStore,
        cluster: KubernetesCluster,
        breaker: CircuitBreaker,
        judge: ActionJudge,
        policy: ActionPolicy,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.breaker = breaker
        self.judge = judge
        self.policy = policy

    async def _run_rule_gates(self, ctx: GateContext) -> list[GateDecision]:
        decisions = []
        for gate in RULE_GATES:
            decision = await gate.check(ctx)
            decisions.append(decision)
            if not decision.allowed:
                break
        return decisions

    async def propose(
        self,
        *,
        action: str,
        namespace: str,
        deployment: str,
        thread_key: str,
        requester: str,
        reason: str,
        replicas: int | None = None,
        to_revision: int | None = None,
        evidence: list[str] | None = None,
        context: str = "",
    ) -> ActionRequest:
        """Record a proposal and decide it: `refused` or `pending_approval`. Never raises
        for a bad proposal: the refusal is the answer."""
        request = ActionRequest(
            action=action,
            namespace=namespace,
            deployment=deployment,
            replicas=replicas,
            to_revision=to_revision,
            reason=reason[:2000],
            evidence=(evidence or [])[:20],
            context=context[-6000:],
            thread_key=thread_key,
            requester=requester,
        )
        await self.store.create(request)
        ctx = GateContext(request, self.policy, self.cluster, self.store, self.breaker)
        decisions = await self._run_rule_gates(ctx)
        snapshot = ctx.fetched_snapshot
        refused = next((d for d in decisions if not d.allowed), None)
        if refused is not None:
            return await self.store.transition(
                request.id,
                "refused",
                SYSTEM,
                f"{refused.gate}: {refused.reason}",
                gate_decisions=decisions,
                snapshot=snapshot,
                fingerprint=fingerprint(request, snapshot),
            )
        verdict = await self.judge.assess(request, snapshot)
        if not verdict.safe_to_proceed:
            return await self.store.transition(
                request.id,
                "refused",
                SYSTEM,
                f"judge: {verdict.reason}",
                gate_decisions=decisions,
                judge=verdict,
                snapshot=snapshot,
                fingerprint=fingerprint(request, snapshot),
            )
        pending = await self.store.transition(
            request.id,
            "pending_approval",
            SYSTEM,
            "rule gates and judge allowed",
            gate_decisions=decisions,
            judge=verdict,
            snapshot=snapshot,
            fingerprint=fingerprint(request, snapshot),
            expires_at=time.time() + self.policy.approval_ttl_s,
        )
        await self.store.remember_fingerprint(pending)
        return pending

    # --- the human's side -------------------------------------------------------------
    def is_approver(self, user: str, in_approver_group: bool) -> bool:
        return user in self.policy.approvers or in_approver_group

    def may_approve(self, request: ActionRequest, user: str, in_approver_group: bool) -> str | None:
        """None when `user` may approve `request`, else the reason they may not."""
        if not self.is_approver(user, in_approver_group):
            return "you are not an approver (ACTION_APPROVERS / ACTION_APPROVER_GROUP)"
        if user == request.requester and not self.policy.allow_self_approval:
            return "you asked for this action; someone else must approve it (ALLOW_SELF_APPROVAL)"
        return None

    async def _expire_if_due(self, request: ActionRequest) -> ActionRequest | None:
        if request.status != "pending_approval" or time.time() < request.expires_at:
            return None
        try:
            return await self.store.transition(
                request.id, "expired", SYSTEM, "approval window passed", expect="pending_approval"
            )
        except TransitionConflict as exc:
            return exc.current

    async def approve(
        self,
        request_id: str,
        user: str,
        *,
        in_approver_group: bool = False,
        on_approved: Callable[[ActionRequest], Awaitable[None]] | None = None,
    ) -> ApprovalResult:
        """Authorise, win the compare-and-set, re-check on fresh state, execute once.

        `on_approved` is told as soon as this call has won (e.g. to show "executing").
        """
        try:
            request = await self.store.get(request_id)
        except RequestNotFound:
            return ApprovalResult("not_found", f"no action request {request_id}", None)
        denial = self.may_approve(request, user, in_approver_group)
        if denial is not None:
            await self.store.audit(request, "approval_denied", user, denial)
            return ApprovalResult("denied", denial, request)
        expired = await self._expire_if_due(request)
        if expired is not None:
            await self.store.audit(expired, "approval_denied", user, "expired")
            return ApprovalResult("expired", "this request has expired; ask again", expired)
        try:
            request = await self.store.transition(
                request_id, "approved", user, "approved", expect="pending_approval"
            )
        except TransitionConflict as exc:
            await self.store.audit(
                exc.current, "approval_denied", user, f"already {exc.current.status}"
            )
            return ApprovalResult("already_handled", f"already {exc.current.status}", exc.current)
        if on_approved is not None:
            try:
                await on_approved(request)
            except Exception:  # showing progress must not stop the execution
                log.exception("on_approved callback failed for %s", request_id)
        return await self._recheck_and_execute(request, user)

    async def _recheck_and_execute(self, request: ActionRequest, user: str) -> ApprovalResult:
        ctx = GateContext(
            request, self.policy, self.cluster, self.store, self.breaker, recheck=True
        )
        decisions = await self._run_rule_gates(ctx)
        refused = next((d for d in decisions if not d.allowed), None)
        fresh = ctx.fetched_snapshot
        if (
            refused is None
            and fresh is not None
            and request.snapshot is not None
            and fresh.resource_version != request.snapshot.resource_version
        ):
            refused = GateDecision(gate="snapshot", allowed=False, reason=CHANGED)
        if refused is not None or fresh is None:
            note = f"{refused.gate}: {refused.reason}" if refused else "no cluster state"
            aborted = await self.store.transition(
                request.id,
                "aborted",
                SYSTEM,
                note,
                expect="approved",
                outcome=Outcome(dry_run=False, detail=f"not executed — {note}"),
            )
            return ApprovalResult(
                "executed", aborted.outcome.detail if aborted.outcome else note, aborted
            )
        dry_run = not self.policy.actions_enabled
        executing = await self.store.transition(
            request.id, "executing", user, "dry run" if dry_run else "executing", expect="approved"
        )
        try:
            detail = await self._execute(executing, fresh.resource_version, dry_run)
        except ClusterError as exc:
            failed = await self.store.transition(
                request.id,
                "failed",
                SYSTEM,
                str(exc),
                expect="executing",
                outcome=Outcome(dry_run=dry_run, detail=str(exc)),
            )
            if not dry_run:
                await self.breaker.record(request.target, False, request.id)
            return ApprovalResult("executed", f"failed: {exc}", failed)
        if not dry_run:
            await self.breaker.record(request.target, True, request.id)
        done = await self.store.transition(
            request.id,
            "succeeded",
            SYSTEM,
            detail,
            expect="executing",
            outcome=Outcome(dry_run=dry_run, detail=detail),
        )
        return ApprovalResult("executed", detail, done)

    async def _execute(self, request: ActionRequest, resource_version: str, dry_run: bool) -> str:
        if request.action == "scale":
            assert request.replicas is not None
            return await self.cluster.scale(
                request.namespace, request.deployment, request.replicas, resource_version, dry_run
            )
        return await self.cluster.rollout_undo(
            request.namespace, request.deployment, request.to_revision, resource_version, dry_run
        )

    async def reject(
        self, request_id: str, user: str, reason: str = "", *, in_approver_group: bool = False
    ) -> ApprovalResult:
        """Approvers and the requester may reject a pending request."""
        try:
            request = await self.store.get(request_id)
        except RequestNotFound:
            return ApprovalResult("not_found", f"no action request {request_id}", None)
        if user != request.requester and self.may_approve(request, user, in_approver_group):
            denial = "only an approver or the requester may reject this request"
            await self.store.audit(request, "rejection_denied", user, denial)
            return ApprovalResult("denied", denial, request)
        try:
            rejected = await self.store.transition(
                request_id, "rejected", user, reason or "rejected", expect="pending_approval"
            )
        except TransitionConflict as exc:
            return ApprovalResult("already_handled", f"already {exc.current.status}", exc.current)
        return ApprovalResult("rejected", f"rejected by {user}", rejected)

    async def expire_due(self, thread_key: str) -> list[ActionRequest]:
        """Expire the thread's pending requests whose window has passed."""
        expired = []
        for request in await self.store.for_thread(thread_key):
            done = await self._expire_if_due(request)
            if done is not None and done.status == "expired":
                expired.append(done)
        return expired

    async def reset_breaker(self, target: str | None, user: str, in_approver_group: bool) -> str:
        """Close an open breaker (a target `ns/name`, or None for the global one)."""
        if not self.is_approver(user, in_approver_group):
            return "only an approver may reset the circuit breaker"
        scope = target or GLOBAL
        await self.breaker.reset(scope)
        await self.store.audit_event("breaker_reset", user, f"breaker for {scope} reset", scope)
        return f"breaker for {scope} reset"
