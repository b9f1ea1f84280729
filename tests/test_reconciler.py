"""The reconciler: what a killed process left in `approved`/`executing` is settled by reading
the cluster; stale proposals expire, card or no card. Crashes are real processes killed with
SIGKILL; real Redis, real kubernetes_asyncio against the simulator."""

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from bot.turn.store import TurnStore
from gates.model import ActionRequest
from gates.pipeline import ActionPipeline
from gates.reconciler import Reconciler
from gates.store import ActionStore, TransitionConflict
from sandbox import GeminiSimulator, Reply
from sandbox.kubernetes import KubernetesSimulator
from tests.gates_fixtures import (
    APPROVER,
    REQUESTER,
    SAFE,
    PipelineFactory,
    audit_entries,
    kill_mid_approval,
    propose_scale,
    until,
)

THREAD = "T1:C1:1700000000.000300"
LEASE_S = 0.5


async def _propose(
    pipeline: ActionPipeline, gemini: GeminiSimulator, **kwargs: Any
) -> ActionRequest:
    return await propose_scale(pipeline, gemini, THREAD, **kwargs)


async def _settle(pipeline: ActionPipeline, request_id: str) -> ActionRequest:
    """Run the reconciler each period until the request is terminal (bounded)."""
    reconciler = Reconciler(pipeline)

    async def terminal() -> bool:
        await reconciler.run_once()
        return (await pipeline.store.get(request_id)).status in ("succeeded", "failed", "aborted")

    await until(terminal, f"{request_id} to be settled")
    return await pipeline.store.get(request_id)


@pytest.fixture
def crashable(pipeline_for: PipelineFactory) -> ActionPipeline:
    return pipeline_for(lease_s=LEASE_S)


Kill = Callable[[ActionRequest, Callable[[], bool | Awaitable[bool]]], Awaitable[None]]


@pytest.fixture
def killed(crashable: ActionPipeline, redis_url: str, kubeconfig: Path) -> Kill:
    """Approve a request of `crashable` in a process of its own; SIGKILL it once `at()` holds."""

    async def kill(request: ActionRequest, at: Callable[[], bool | Awaitable[bool]]) -> None:
        await kill_mid_approval(
            redis_url=redis_url,
            prefix=crashable.store.prefix,
            kubeconfig=kubeconfig,
            request_id=request.id,
            lease_s=LEASE_S,
            at=at,
        )

    return kill


async def test_killed_after_approval_before_the_write_is_aborted(
    crashable: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator, killed: Kill
) -> None:
    request = await _propose(crashable, gemini)
    kube.faults.hang = ("GET",)  # the re-check's read never returns
    seen = len(kube.requests)

    async def approved_and_reading() -> bool:
        status = (await crashable.store.get(request.id)).status
        return status == "approved" and len(kube.requests) > seen

    await killed(request, approved_and_reading)
    kube.faults.hang = ()
    settled = await _settle(crashable, request.id)
    assert settled.status == "aborted"
    assert settled.outcome is not None
    assert "settled after interruption: stopped before the write was sent" in settled.outcome.detail
    assert kube.writes == []
    assert (await crashable.breaker.state("shop/payment-api")).recent_executions == 0


async def test_killed_after_the_write_was_applied_is_succeeded(
    crashable: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator, killed: Kill
) -> None:
    request = await _propose(crashable, gemini)
    kube.faults.after_write = "late"  # applied; the answer never comes before the kill
    await killed(request, lambda: len(kube.writes) == 1)
    settled = await _settle(crashable, request.id)
    assert settled.status == "succeeded"
    assert settled.outcome is not None
    assert settled.outcome.detail == (
        "scale shop/payment-api from 4 to 6 replicas: the cluster shows the change "
        "(settled after interruption)"
    )
    state = await crashable.breaker.state("shop/payment-api")
    assert (state.recent_executions, state.consecutive_failures) == (1, 0)
    audit = await audit_entries(crashable.store, request.id)
    assert (audit[-1]["to"], audit[-1]["actor"]) == ("succeeded", "tracegate:reconciler")


async def test_killed_while_the_write_hangs_unapplied_is_failed(
    crashable: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator, killed: Kill
) -> None:
    request = await _propose(crashable, gemini, action="rollout_undo", replicas=None)
    kube.faults.hang = ("PATCH",)
    await killed(request, lambda: any(method == "PATCH" for method, _ in kube.requests))
    settled = await _settle(crashable, request.id)
    assert settled.status == "failed"
    assert settled.outcome is not None
    assert "not applied: the cluster does not show the change" in settled.outcome.detail
    state = await crashable.breaker.state("shop/payment-api")
    assert (state.recent_executions, state.consecutive_failures) == (1, 1)


async def test_a_dry_run_its_process_left_executing_is_aborted_not_counted(
    crashable: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _propose(crashable, gemini)
    assert (await crashable.authorise(request.id, APPROVER)).verdict == "approved"
    # what a process that began the dry run and died leaves behind
    await crashable.store.transition(
        request.id, "executing", APPROVER, "dry run", expect="approved", dry_run=True
    )
    settled = await _settle(crashable, request.id)
    assert settled.status == "aborted"
    assert settled.outcome is not None and settled.outcome.dry_run
    assert (
        settled.outcome.detail
        == "settled after interruption: the dry run did not finish; nothing changed"
    )
    assert kube.writes == []
    assert (await crashable.breaker.state("shop/payment-api")).recent_executions == 0


async def test_ids_whose_requests_retention_removed_leave_the_reconcilers_indexes(
    pipeline: ActionPipeline,
) -> None:
    store = pipeline.store
    await store.redis.zadd(store.open_index, {"gone-open": time.time() - 60})
    await store.redis.zadd(store.uncounted_index, {"gone-uncounted": time.time() - 60})
    assert await Reconciler(pipeline).run_once() == []
    assert await store.due(time.time()) == []
    assert await store.uncounted() == []


async def test_a_request_inside_its_lease_is_left_alone(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator
) -> None:
    pipeline = pipeline_for(lease_s=3600)
    request = await _propose(pipeline, gemini)
    await pipeline.store.transition(request.id, "approved", APPROVER, expect="pending_approval")
    assert await Reconciler(pipeline).run_once() == []
    assert (await pipeline.store.get(request.id)).status == "approved"


async def test_two_reconcilers_settle_a_request_once_and_count_it_once(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    first, second = pipeline_for(lease_s=0), pipeline_for(lease_s=0)
    request = await _propose(first, gemini)
    await first.store.transition(request.id, "approved", APPROVER, expect="pending_approval")
    await first.store.transition(request.id, "executing", APPROVER, expect="approved")
    kube.deployments[("shop", "payment-api")]["spec"]["replicas"] = 6  # the write landed
    settled = await asyncio.gather(Reconciler(first).run_once(), Reconciler(second).run_once())
    assert sum(len(moved) for moved in settled) == 1
    assert (await first.store.get(request.id)).status == "succeeded"
    assert (await first.breaker.state("shop/payment-api")).recent_executions == 1


async def test_a_proposal_without_a_card_expires_on_time_and_can_be_proposed_again(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    request = await _propose(pipeline, gemini)
    reconciler = Reconciler(pipeline)
    assert await reconciler.run_once() == []  # its window is still open
    await pipeline.store.update(request.id, "test", "test", "window passed", expires_at=time.time())
    (expired,) = await reconciler.run_once()
    assert (expired.id, expired.status, expired.card) == (request.id, "expired", None)
    again = await _propose(pipeline, gemini)
    assert again.status == "pending_approval", again.refusal


async def test_a_compare_and_set_lost_between_read_and_write_changes_nothing(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    request = await _propose(pipeline, gemini)
    other = ActionStore(pipeline.store.redis, pipeline.store.prefix)

    class ReadThenInterleave(ActionStore):
        """Lets `other` approve right after this store's first read: the race, forced."""

        interleaved = False

        async def get(self, request_id: str) -> ActionRequest:
            current = await super().get(request_id)
            if not self.interleaved:
                self.interleaved = True
                await other.transition(request_id, "approved", APPROVER, expect="pending_approval")
            return current

    racing = ReadThenInterleave(pipeline.store.redis, pipeline.store.prefix)
    with pytest.raises(TransitionConflict, match="is already approved"):
        await racing.transition(request.id, "rejected", REQUESTER, expect="pending_approval")
    assert (await pipeline.store.get(request.id)).status == "approved"


async def test_a_write_still_in_flight_cannot_land_after_the_reconciler_said_failed(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    executor, other_process = pipeline_for(lease_s=LEASE_S), pipeline_for(lease_s=LEASE_S)
    request = await _propose(executor, gemini)
    kube.faults.slow_writes, kube.faults.slow_write_s = 1, 2.0  # the executor's write lingers
    approving = asyncio.create_task(executor.approve(request.id, APPROVER))

    async def executing() -> bool:
        return (await executor.store.get(request.id)).status == "executing"

    await until(executing, "the request to be executing")
    await asyncio.sleep(LEASE_S + 0.1)
    (settled,) = await Reconciler(other_process).run_once()
    result = await approving

    assert settled.status == "failed" and result.verdict == "failed"
    assert kube.deployments[("shop", "payment-api")]["spec"]["replicas"] == 4  # 409 for it
    breaker = await executor.breaker.state("shop/payment-api")
    assert (breaker.recent_executions, breaker.consecutive_failures) == (1, 1)


async def test_a_write_that_landed_before_the_fence_is_settled_as_succeeded(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    first = pipeline_for(lease_s=0)
    request = await _propose(first, gemini)
    await first.store.transition(request.id, "approved", APPROVER, expect="pending_approval")
    precondition = kube.deployments[("shop", "payment-api")]["metadata"]["resourceVersion"]
    await first.store.transition(
        request.id, "executing", APPROVER, expect="approved", write_precondition=precondition
    )
    planned = first.cluster.plan_scale("shop", "payment-api", 6, precondition)
    await planned.send(False)  # the write landed; its executor died before reading back

    (settled,) = await Reconciler(first).run_once()

    assert settled.status == "succeeded"
    assert kube.deployments[("shop", "payment-api")]["spec"]["replicas"] == 6


def _undecided() -> ActionRequest:
    """A proposal as `propose` records it before its gates and judge decide."""
    return ActionRequest(
        action="scale",
        namespace="shop",
        deployment="payment-api",
        replicas=6,
        thread_key=THREAD,
        requester=REQUESTER,
        reason="saturated since 13:58",
    )


async def test_a_proposal_its_process_died_deciding_is_refused_once_its_lease_ends(
    crashable: ActionPipeline,
) -> None:
    request = _undecided()
    await crashable.store.create(request)  # what a process dying in the gates or judge leaves
    reconciler = Reconciler(crashable)

    within_lease = await reconciler.run_once()
    await asyncio.sleep(LEASE_S + 0.1)
    after_lease = await reconciler.run_once()
    stored = await crashable.store.get(request.id)

    assert within_lease == []
    assert [r.id for r in after_lease] == [request.id]
    assert stored.status == "refused"
    assert "stopped before the rule gates and the judge had decided" in stored.history[-1].note
    assert await crashable.store.due(time.time() + 3600) == []  # closed for good


async def test_a_proposal_a_live_run_is_still_deciding_is_left_alone_until_the_run_ends(
    crashable: ActionPipeline, redis_url: str
) -> None:
    redis = aioredis.from_url(redis_url)
    turns = TurnStore(redis, 3600, crashable.store.prefix)
    await turns.renew(THREAD, "live-run", 60)  # the run's lease on the thread
    request = _undecided()
    await crashable.store.create(request)
    reconciler = Reconciler(crashable, thread_busy=turns.leased)
    await asyncio.sleep(LEASE_S + 0.1)

    while_held = await reconciler.run_once()  # a slow judge, not a dead run
    await turns.release(THREAD, "live-run")  # the run is gone
    after = await reconciler.run_once()
    await redis.aclose()

    assert while_held == []
    assert [r.id for r in after] == [request.id]
    assert (await crashable.store.get(request.id)).status == "refused"


async def test_a_proposal_refused_under_its_slow_judge_is_answered_refused_not_as_an_error(
    crashable: ActionPipeline, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply(parts=SAFE.parts, delay_s=LEASE_S + 1.0))
    args = _undecided().model_dump(include={"action", "namespace", "deployment", "replicas"})
    proposing = asyncio.create_task(
        crashable.propose(**args, thread_key=THREAD, requester=REQUESTER, reason="saturated")
    )
    await until(lambda: len(gemini.requests) == 1, "the judge to be asked")
    await asyncio.sleep(LEASE_S + 0.1)
    await Reconciler(crashable).run_once()  # no thread_busy: taken for a dead run's

    decided = await proposing

    assert decided.status == "refused"
    assert "stopped before the rule gates and the judge had decided" in decided.history[-1].note
