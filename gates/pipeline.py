"""The action pipeline: propose → rule gates → judge → human → rule gates again → execute
→ read the outcome back from the cluster → follow the rollout.

RULE_GATES is the order, visible in one list. Each gate returns a decision with its
name and a reason; the first refusal ends the proposal.

Every path out of `approved` ends terminal: anything that goes wrong before the write is
sent aborts (nothing changed); once it may have been sent, the cluster is read back and
says whether it `succeeded` or `failed` — a timeout or a dropped connection says neither.
When even the read-back fails, the request stays `executing` and the reconciler settles it.

A real execution that ended is counted by the circuit breaker exactly once, and a real
success's rollout is followed until one follower records it: the transition that ends it
marks both in the store, so a process that dies before counting or while following leaves
them to the reconciler of any process (see gates/store.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Literal, cast

import redis.asyncio as aioredis
from langchain_core.language_models import BaseChatModel
from redis.asyncio.lock import Lock

from gates.breaker import GLOBAL, CircuitBreaker
from gates.cluster import ClusterError, KubernetesCluster, PlannedWrite, RolloutStatus
from gates.config import ActionPolicy
from gates.judge import ActionJudge
from gates.metrics import GATE_DECISIONS
from gates.model import (
    ActionRequest,
    ClusterSnapshot,
    GateDecision,
    Outcome,
    RequestStatus,
    RolloutHealth,
    fingerprint,
    rollback_target,
)
from gates.rules.base import GateContext, RuleGate, refuse
from gates.rules.blast_radius import BlastRadiusGate
from gates.rules.circuit_breaker import CircuitBreakerGate
from gates.rules.duplicate import DuplicateGate
from gates.rules.kill_switch import ActionsSwitch, KillSwitchGate, Stopped
from gates.rules.policy import PolicyGate
from gates.rules.validation import ValidationGate
from gates.store import DEFAULT_LEASE_S, ActionStore, TransitionConflict

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
READ_BACK_ATTEMPTS = 3
READ_BACK_PAUSE_S = 0.5
# One process follows a rollout at a time: it holds a lease this long, renewed a few times
# per lease while it follows; a dead follower's rollout is taken over once it lapses.
FOLLOW_LEASE_S = 15.0
UNREADABLE_READS = 3  # reads of a rollout's status before "unreadable" is what is recorded

# approved: authorised, not executed yet; succeeded / failed / aborted: how it ended;
# executing: the cluster could not be read back yet, and the reconciler will settle it.
ApprovalVerdict = Literal[
    "approved",
    "succeeded",
    "failed",
    "aborted",
    "executing",
    "rejected",
    "denied",
    "already_handled",
    "expired",
    "not_found",
]


@dataclass(frozen=True)
class ApprovalResult:
    verdict: ApprovalVerdict
    message: str
    request: ActionRequest | None


@dataclass(eq=False)
class ActionPipeline:
    store: ActionStore
    cluster: KubernetesCluster
    breaker: CircuitBreaker
    judge: ActionJudge
    policy: ActionPolicy
    follow_lease_s: float = FOLLOW_LEASE_S

    @property
    def switch(self) -> ActionsSwitch:
        """The runtime stop of all actions, in the store's Redis."""
        return ActionsSwitch(self.store.redis, self.store.prefix)

    async def _run_rule_gates(
        self, request: ActionRequest, *, recheck: bool = False
    ) -> tuple[GateContext, list[GateDecision]]:
        """The rule gates in order, up to the first refusal (then the last decision)."""
        ctx = GateContext(request, self.policy, self.cluster, self.store, self.breaker, recheck)
        decisions = []
        for gate in RULE_GATES:
            decision = await gate.check(ctx)
            GATE_DECISIONS.labels(decision.gate, "allowed" if decision.allowed else "refused").inc()
            decisions.append(decision)
            if not decision.allowed:
                break
        return ctx, decisions

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
        ctx, decisions = await self._run_rule_gates(request)
        snapshot = ctx.fetched_snapshot
        fp = fingerprint(request, snapshot)

        async def decide(to: RequestStatus, note: str, **changes: object) -> ActionRequest:
            """proposed → `to`; if the request was moved meanwhile (refused by a reconciler
            that took this run for a dead one), what it became is the answer."""
            changes |= {"snapshot": snapshot, "fingerprint": fp}
            try:
                return await self.store.transition(
                    request.id, to, SYSTEM, note, expect="proposed", **changes
                )
            except TransitionConflict as conflict:
                return conflict.current

        if not (gate := decisions[-1]).allowed:
            return await decide("refused", f"{gate.gate}: {gate.reason}", gate_decisions=decisions)
        verdict = await self.judge.assess(request, snapshot)
        GATE_DECISIONS.labels("judge", "allowed" if verdict.safe_to_proceed else "refused").inc()
        if not verdict.safe_to_proceed:
            note = f"judge: {verdict.reason}"
            return await decide("refused", note, gate_decisions=decisions, judge=verdict)
        # The duplicate gate's read, confirmed in one step: of two identical proposals
        # decided at once (one response calling propose_action twice), one is shown.
        seen = ctx.fingerprint_seen  # read: every gate allowed, the duplicate gate among them
        holder = await self.store.claim_fingerprint(request.thread_key, fp, request.id, seen)
        if holder:
            late = refuse(DuplicateGate.name, f"the same action was proposed meanwhile as {holder}")
            shown = [late if d.gate == late.gate else d for d in decisions]
            note = f"{late.gate}: {late.reason}"
            return await decide("refused", note, gate_decisions=shown, judge=verdict)
        return await decide(
            "pending_approval",
            "rule gates and judge allowed",
            gate_decisions=decisions,
            judge=verdict,
            target_revision=rollback_target(snapshot.revisions, to_revision)
            if snapshot is not None and action == "rollout_undo"
            else None,
            expires_at=time.time() + self.policy.approval_ttl_s,
        )

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

    async def expire_if_due(
        self, request: ActionRequest, actor: str = SYSTEM
    ) -> ActionRequest | None:
        """pending_approval past its expiry (APPROVAL_TTL) → expired, card or no card; None
        while it is not due. The one place a proposal expires: a click that comes too late
        and the reconciler both end here. Raises TransitionConflict when someone else moved
        the request first."""
        if request.status != "pending_approval" or time.time() < request.expires_at:
            return None
        return await self.store.transition(
            request.id, "expired", actor, "approval window passed", expect="pending_approval"
        )

    async def authorise(
        self, request_id: str, user: str, *, in_approver_group: bool = False
    ) -> ApprovalResult:
        """Authorise the click and win the compare-and-set pending_approval → approved
        (verdict `approved`): from here on exactly one `execute` can make the write. Touches
        only Redis: `serve` records approvals, the workers execute them."""
        if (request := await self.store.find(request_id)) is None:
            return ApprovalResult("not_found", f"no action request {request_id}", None)
        denial = self.may_approve(request, user, in_approver_group)
        if denial is not None:
            await self.store.audit(request, "approval_denied", user, denial)
            return ApprovalResult("denied", denial, request)
        try:
            expired = await self.expire_if_due(request)
            if expired is not None:
                await self.store.audit(expired, "approval_denied", user, "expired")
                return ApprovalResult("expired", "this request has expired; ask again", expired)
            request = await self.store.transition(
                request_id, "approved", user, "approved", expect="pending_approval"
            )
        except TransitionConflict as exc:
            already = f"already {exc.current.status}"
            await self.store.audit(exc.current, "approval_denied", user, already)
            return ApprovalResult("already_handled", already, exc.current)
        return ApprovalResult("approved", f"approved by {user}", request)

    async def execute(self, request_id: str, user: str) -> ApprovalResult:
        """Run an approved request: the rule gates again on fresh state (the kill switch
        among them), then the write, once. A request that moved on (executed by an earlier
        try of this job, or settled by the reconciler) is reported as it is."""
        if (request := await self.store.find(request_id)) is None:
            return ApprovalResult("not_found", f"no action request {request_id}", None)
        if request.status != "approved":
            return _result(request)
        try:
            return await self._recheck_and_execute(request, user)
        except TransitionConflict as exc:  # the reconciler judged this call dead and settled it
            return _result(exc.current)

    async def approve(
        self, request_id: str, user: str, *, in_approver_group: bool = False
    ) -> ApprovalResult:
        """`authorise`, then `execute` in this process (tests, and a process that does both)."""
        authorised = await self.authorise(request_id, user, in_approver_group=in_approver_group)
        if authorised.verdict != "approved":
            return authorised
        return await self.execute(request_id, user)

    async def _recheck_and_execute(self, request: ActionRequest, user: str) -> ApprovalResult:
        dry_run = not self.policy.actions_enabled
        try:
            planned = await self._plan(request)
        except Exception as exc:  # anything before the write: provably nothing was sent
            log.exception("could not prepare %s", request.id)
            planned = f"{type(exc).__name__}: {exc}"
        if isinstance(planned, str):
            outcome = Outcome(dry_run=dry_run, detail=f"not executed — {planned}")
            aborted = await self.store.transition(
                request.id, "aborted", SYSTEM, planned, expect="approved", outcome=outcome
            )
            return _result(aborted)
        executing = await self.store.transition(
            request.id,
            "executing",
            user,
            "dry run" if dry_run else "executing",
            expect="approved",
            dry_run=dry_run,
            write_precondition=planned.resource_version or None,
        )
        error = None
        try:
            await planned.send(dry_run)
        except Exception as exc:  # the write may or may not have been applied
            error = str(exc) if isinstance(exc, ClusterError) else f"{type(exc).__name__}: {exc}"
        if dry_run:  # nothing is stored either way: the API's answer is the outcome
            detail = planned.would if error is None else f"dry run refused: {error}"
            return _result(await self._conclude(executing, error is None, detail))
        settled = await self.settle(
            executing,
            done=planned.done if error is None else f"{planned.done} (the API answered: {error})",
            failed=f"not applied: {error or 'the cluster does not show the change'}",
        )
        return _result(settled or executing)

    async def _plan(self, request: ActionRequest) -> PlannedWrite | str:
        """Re-run the rule gates on fresh state and compute the write; a string says why not."""
        ctx, decisions = await self._run_rule_gates(request, recheck=True)
        if not (refused := decisions[-1]).allowed:
            return f"{refused.gate}: {refused.reason}"
        fresh = ctx.fetched_snapshot
        assert fresh is not None  # read by the blast radius gate, which refuses without it
        if (
            request.snapshot is not None
            and fresh.resource_version != request.snapshot.resource_version
        ):
            return f"snapshot: {CHANGED}"
        if request.action == "scale":
            assert request.replicas is not None  # validation ran first
            return self.cluster.plan_scale(
                request.namespace, request.deployment, request.replicas, fresh.resource_version
            )
        if request.target_revision is None:
            return "no rollback target was pinned when this was proposed; ask again"
        return await self.cluster.plan_rollback(
            request.namespace, request.deployment, request.target_revision, fresh.resource_version
        )

    async def settle(
        self, request: ActionRequest, *, done: str, failed: str, actor: str = SYSTEM
    ) -> ActionRequest | None:
        """executing → succeeded (outcome `done`) | failed (`failed`), as the cluster shows
        it, and the breaker counts that (once: the transition marked it to count, and a
        reconciler counts it if this process dies first). None when the cluster cannot be
        read: the request stays executing for the reconciler."""
        now = await self._read_back(request)
        if now is None:
            await self.store.audit(request, "outcome_unknown", actor, "cannot read the cluster")
            return None
        applied = request.is_applied(now)
        # Raises TransitionConflict when someone else settled it first (and counted it).
        settled = await self._conclude(request, applied, done if applied else failed, actor)
        await self.count(settled)
        return settled

    async def count(self, request: ActionRequest, at: float | None = None) -> bool:
        """The breaker counts the ended execution `request`, unless it did before."""
        ended = request.history[-1].at if at is None else at
        return await self.breaker.record(
            request.target, request.status == "succeeded", request.id, ended
        )

    async def _conclude(
        self, request: ActionRequest, succeeded: bool, detail: str, actor: str = SYSTEM
    ) -> ActionRequest:
        """executing → succeeded | failed, with `detail` as the outcome (a dry run's, if
        `request` is executing one)."""
        to: RequestStatus = "succeeded" if succeeded else "failed"
        outcome = Outcome(dry_run=request.dry_run, detail=detail)
        return await self.store.transition(
            request.id, to, actor, detail, expect="executing", outcome=outcome
        )

    async def _read_back(self, request: ActionRequest) -> ClusterSnapshot | None:
        for attempt in range(READ_BACK_ATTEMPTS):
            try:
                return await self.cluster.snapshot(request.namespace, request.deployment)
            except ClusterError as exc:
                log.warning("reading %s back failed (%d): %s", request.target, attempt + 1, exc)
                if attempt + 1 < READ_BACK_ATTEMPTS:
                    await asyncio.sleep(READ_BACK_PAUSE_S)
        return None

    async def follow_rollout(self, request: ActionRequest) -> ActionRequest | None:
        """After a real success: wait for the rollout to be healthy (what `kubectl rollout
        status` checks) until ROLLOUT_WATCH_TIMEOUT after the success, and record what was
        seen. When it is not healthy, name the reverse action; it is only ever proposed,
        never run from here.

        One follower at a time, in any process: None (nothing recorded here) when another
        holds the follow lease, loses it meanwhile, or recorded the rollout first."""
        lease = self.store.redis.lock(
            self.store.follow_lease_key(request.id), timeout=self.follow_lease_s
        )
        if not await lease.acquire(blocking=False):
            return None
        log.info("following the rollout of %s after %s", request.target, request.id)
        renewing = asyncio.create_task(_renew(lease, self.follow_lease_s / 3))
        renewing.add_done_callback(_lost)
        try:
            current = await self.store.get(request.id)
            if current.rollout is not None:  # recorded by a follower before this one
                await self.store.forget(self.store.unfollowed_index, request.id)
                return None
            health = await self._watch(current, renewing)
            if health is None:
                return None
            return await self.store.record_rollout(request.id, health, SYSTEM)
        finally:
            renewing.cancel()
            with contextlib.suppress(Exception):  # lapsed, or Redis is gone: it expires
                await lease.release()

    async def _watch(
        self, request: ActionRequest, renewing: asyncio.Task[None]
    ) -> RolloutHealth | None:
        """Poll the rollout until healthy, past its progress deadline, or ROLLOUT_WATCH_TIMEOUT
        after the success (a resumed follow keeps the first one's deadline); None when the
        lease was lost (another process follows now)."""
        succeeded_at = next(
            (step.at for step in reversed(request.history) if step.to_status == "succeeded"),
            time.time(),
        )
        deadline = succeeded_at + self.policy.rollout_watch_s
        status: RolloutStatus | None = None  # the last status read
        fresh = False  # read by the latest attempt
        late_failures = 0  # reads that failed past the deadline
        while not renewing.done():
            try:
                status = await self.cluster.rollout_status(request.namespace, request.deployment)
                fresh = True
            except ClusterError as exc:
                fresh = False
                log.warning("following the rollout of %s: %s", request.target, exc)
            if fresh and status is not None and (status.healthy or status.deadline_exceeded):
                break
            left = deadline - time.time()
            if left <= 0:
                # The verdict is read past the deadline: one failed read is not a verdict,
                # nor is a status from before it (a follow resumed late, an API blip).
                if fresh:
                    break
                late_failures += 1
                if late_failures >= UNREADABLE_READS:
                    break
            await asyncio.sleep(
                self.policy.rollout_poll_s if left <= 0 else min(self.policy.rollout_poll_s, left)
            )
        if renewing.done():
            log.warning("lost the lease on following %s; another process follows it", request.id)
            return None
        # Not read when it counted: no claim about its health, no undo to suggest.
        if status is None:
            return RolloutHealth(healthy=False, detail="rollout status unreadable")
        seen = status.describe()
        if not fresh:
            return RolloutHealth(
                healthy=False,
                detail=f"rollout status unreadable at its deadline; last seen: {seen}",
            )
        if status.healthy:
            return RolloutHealth(healthy=True, detail=f"rolled out: {seen}")
        why = (
            "progress deadline exceeded"
            if status.deadline_exceeded
            else f"not healthy after {_duration(self.policy.rollout_watch_s)}"
        )
        return RolloutHealth(healthy=False, detail=f"{why}: {seen}", reverse=request.reverse())

    async def reject(
        self, request_id: str, user: str, reason: str = "", *, in_approver_group: bool = False
    ) -> ApprovalResult:
        """Approvers and the requester may reject a pending request."""
        if (request := await self.store.find(request_id)) is None:
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

    async def reset_breaker(
        self, target: str | None, user: str, in_approver_group: bool
    ) -> tuple[bool, str]:
        """Close an open breaker (a target `ns/name`, or None for the global one); audited
        either way. Returns whether it was reset, and what to tell the user."""
        scope = target or GLOBAL
        denial = await self._not_an_approver(
            user, in_approver_group, "breaker_reset_denied", "reset the circuit breaker", scope
        )
        if denial:
            return False, denial
        await self.breaker.reset(scope)
        await self.store.audit_event("breaker_reset", user, f"breaker for {scope} reset", scope)
        return True, f"breaker for {scope} reset"

    async def _not_an_approver(
        self, user: str, in_approver_group: bool, event: str, what: str, scope: str
    ) -> str:
        """'' for an approver; else the denial (audited as `event`) to tell the user."""
        if self.is_approver(user, in_approver_group):
            return ""
        denial = f"only an approver may {what}"
        await self.store.audit_event(event, user, denial, scope)
        return f"{denial} (ACTION_APPROVERS / ACTION_APPROVER_GROUP)"

    async def stop_actions(
        self, user: str, in_approver_group: bool, reason: str = ""
    ) -> tuple[Stopped | None, str]:
        """Stop every action in every process (the kill-switch gate refuses from its next
        run on); approvers only, audited either way. Returns the stop (None if refused) and
        what to tell the user."""
        denial = await self._not_an_approver(
            user, in_approver_group, "actions_stop_denied", "stop actions", GLOBAL
        )
        if denial:
            return None, denial
        stopped = await self.switch.stop(user, reason)
        await self.store.audit_event("actions_stopped", user, stopped.describe(), GLOBAL)
        return stopped, stopped.describe()

    async def start_actions(self, user: str, in_approver_group: bool) -> tuple[bool, str]:
        """Lift the runtime stop (ACTIONS_ENABLED stays the ceiling); approvers only, audited."""
        denial = await self._not_an_approver(
            user, in_approver_group, "actions_start_denied", "start actions again", GLOBAL
        )
        if denial:
            return False, denial
        was_stopped = await self.switch.start()
        note = "actions started again" if was_stopped else "actions were not stopped"
        await self.store.audit_event("actions_started", user, note, GLOBAL)
        ceiling = "" if self.policy.actions_enabled else " (ACTIONS_ENABLED is off: dry runs only)"
        return was_stopped, note + ceiling


def build_pipeline(
    redis: aioredis.Redis,
    cluster: KubernetesCluster,
    policy: ActionPolicy,
    judge_model: BaseChatModel,
    *,
    prefix: str = "tracegate",
    lease_s: float = DEFAULT_LEASE_S,
) -> ActionPipeline:
    """The action pipeline as every process assembles it (`serve`, the worker, tests, bench):
    requests and the circuit breaker under one Redis prefix (REDIS_PREFIX), approved and
    executing requests leased for `lease_s` (ACTION_LEASE), the judge failing as
    JUDGE_FAIL_MODE says. A rollout's follower holds its lease for FOLLOW_LEASE_S, or
    `lease_s` when shorter: a dead process's work is never left longer than ACTION_LEASE."""
    store = ActionStore(redis, prefix, lease_s)
    return ActionPipeline(
        store,
        cluster,
        CircuitBreaker(store, policy),
        ActionJudge(judge_model, policy.judge_fail_mode),
        policy,
        follow_lease_s=max(min(FOLLOW_LEASE_S, lease_s), 0.1),  # a test's zero lease too
    )


def _result(request: ActionRequest) -> ApprovalResult:
    """How an approved request ended (or, `executing`, that it is not settled yet)."""
    detail = request.outcome.detail if request.outcome else "the outcome is not known yet"
    ended = request.status in ("succeeded", "failed", "aborted")
    verdict = cast(ApprovalVerdict, request.status) if ended else "executing"
    return ApprovalResult(verdict, detail, request)


def _lost(renewing: asyncio.Task[None]) -> None:
    """A renewal that failed ends the follow (see `_watch`); nothing more to report."""
    if not renewing.cancelled():
        renewing.exception()


async def _renew(lease: Lock, every_s: float) -> None:
    """Keep the follow lease while following; ends (LockError) when it was lost."""
    while True:
        await asyncio.sleep(every_s)
        await lease.reacquire()


def _duration(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
