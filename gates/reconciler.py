"""The reconciler: settles what a dead process left behind, in every process.

It reads the store's index of open requests (no key scans) and takes the due ones:
- `proposed` past its lease, unless a live run still holds its thread (`thread_busy`: the
  judge may be slow) → `refused`: the run deciding it died before the gates and the judge
  decided, so nobody was ever asked to approve it;
- `pending_approval` past its expiry → `expired`, whether or not a card was ever posted;
- `approved` past its lease → `aborted`: the executor moves to `executing` before it sends
  the write, so nothing was sent;
- `executing` past its lease → `succeeded` or `failed`, read back from the cluster exactly
  as the executor does, and counted by the breaker. First it fences: the write was made
  conditional on one resourceVersion, and a no-op change on that same version means a write
  still in flight (a stalled executor, a slow API server) gets 409 instead of landing after
  the verdict.
There is no leader: every move is a compare-and-set, so of two reconcilers (or a reconciler
and a slow executor) exactly one wins and the other leaves the request alone.

Then it finishes what a dead process left after an execution ended:
- executions the circuit breaker has not counted (the executor died right after the
  transition) are counted, once (`count_uncounted`; the count itself is idempotent);
- succeeded executions whose rollout nobody recorded (the follower died or was stopped)
  are handed out to be followed again (`to_follow`), under the follow lease, with the
  deadline counted from the success.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from gates.cluster import ClusterError
from gates.model import ActionRequest, Outcome
from gates.pipeline import ActionPipeline
from gates.store import TransitionConflict

log = logging.getLogger(__name__)

RECONCILER = "tracegate:reconciler"
INTERRUPTED = "settled after interruption"


ThreadBusy = Callable[[str], Awaitable[bool]]


class Reconciler:
    def __init__(self, pipeline: ActionPipeline, thread_busy: ThreadBusy | None = None) -> None:
        """`thread_busy(thread_key)`: whether a live run holds the thread (the bot's turn
        lease); an undecided proposal of a busy thread is still being decided. Without it,
        every undecided proposal past its lease is taken for a dead run's."""
        self.pipeline = pipeline
        self.store = pipeline.store
        self.thread_busy = thread_busy

    async def run_once(self) -> list[ActionRequest]:
        """Settle every due request; returns the ones this call moved (their cards are stale)."""
        moved = []
        for request_id in await self.store.due(time.time()):
            if (request := await self.store.find(request_id)) is None:  # past retention
                await self.store.forget(self.store.open_index, request_id)
                continue
            try:
                settled = await self._settle(request)
            except TransitionConflict:
                continue  # someone else moved it first
            except Exception:  # one request must not stop the others being settled
                log.exception("reconciling %s failed; retrying next period", request_id)
                continue
            if settled is not None:
                moved.append(settled)
        await self.count_uncounted()
        return moved

    async def count_uncounted(self) -> None:
        """Count in the breaker the ended executions nobody counted (one counted meanwhile by
        its executor is not counted again)."""
        for request_id, ended in await self.store.uncounted():
            if (request := await self.store.find(request_id)) is None:
                # past retention: nothing left to count
                await self.store.forget(self.store.uncounted_index, request_id)
                continue
            try:
                if await self.pipeline.count(request, ended):
                    log.info("counted %s (%s) in the circuit breaker", request_id, request.status)
            except Exception:  # one request must not stop the others being counted
                log.exception("counting %s failed; retrying next period", request_id)

    async def to_follow(self) -> list[ActionRequest]:
        """Succeeded executions whose rollout is not recorded yet: each is followed by
        whoever takes its follow lease (`ActionPipeline.follow_rollout`)."""
        found = []
        for request_id in await self.store.unfollowed():
            request = await self.store.find(request_id)
            # Past retention, or recorded (the mark was left by a race): nothing to follow.
            if request is None or request.rollout is not None:
                await self.store.forget(self.store.unfollowed_index, request_id)
                continue
            found.append(request)
        return found

    async def refuse_undecided(self, request: ActionRequest) -> ActionRequest:
        """proposed → refused: its gates and judge never finished (the process stopped)."""
        return await self.store.transition(
            request.id,
            "refused",
            RECONCILER,
            f"{INTERRUPTED}: stopped before the rule gates and the judge had decided; "
            "nobody was asked to approve it",
            expect="proposed",
        )

    async def _settle(self, request: ActionRequest) -> ActionRequest | None:
        if request.status == "proposed":
            if self.thread_busy is not None and await self.thread_busy(request.thread_key):
                return None  # its run is alive (a slow judge): looked at again next period
            return await self.refuse_undecided(request)
        if request.status == "pending_approval":
            return await self.pipeline.expire_if_due(request, RECONCILER)
        if request.status == "approved":
            note = f"{INTERRUPTED}: stopped before the write was sent; nothing changed"
            return await self._abort(request, note, f"not executed — {note}")
        if request.status == "executing" and request.dry_run:
            note = f"{INTERRUPTED}: the dry run did not finish; nothing changed"
            return await self._abort(request, note, note)
        if request.status == "executing":
            if request.write_precondition:
                await self._fence(request)
            return await self.pipeline.settle(
                request,
                done=f"{request.describe()}: the cluster shows the change ({INTERRUPTED})",
                failed=f"not applied: the cluster does not show the change ({INTERRUPTED})",
                actor=RECONCILER,
            )
        await self.store.forget(self.store.open_index, request.id)  # closed meanwhile
        return None

    async def _abort(self, request: ActionRequest, note: str, detail: str) -> ActionRequest:
        """approved, or executing a dry run → aborted: nothing was written to the cluster."""
        outcome = Outcome(dry_run=request.dry_run, detail=detail)
        return await self.store.transition(
            request.id, "aborted", RECONCILER, note, expect=request.status, outcome=outcome
        )

    async def _fence(self, request: ActionRequest) -> None:
        """Before reading back: make sure the executor's write, if it is still in flight
        (a stalled process, a slow API server), can no longer land after the verdict. Either
        the fence lands (that write will get 409: "not applied" is final) or the Deployment
        has changed already (the read-back sees whether it was that write)."""
        assert request.write_precondition is not None
        try:
            await self.pipeline.cluster.fence(
                request.namespace, request.deployment, request.write_precondition, request.id
            )
        except ClusterError as exc:
            # An API server that takes no writes will not apply a late one either, most
            # likely; the read-back decides, as it would without a fence.
            log.warning("cannot fence %s before settling it: %s", request.id, exc)
