"""How an approved action ends: read back from the cluster, never guessed from the API's
answer; the breaker counts what really happened; the rollout is followed afterwards.
Real kubernetes_asyncio against the simulator's faults, real Redis."""

from typing import Any

from gates.model import ActionRequest
from gates.pipeline import ActionPipeline
from sandbox import GeminiSimulator
from sandbox.kubernetes import REVISION, KubernetesSimulator
from tests.gates_fixtures import (
    APPROVER,
    REQUESTER,
    PipelineFactory,
    audit_entries,
    propose_scale,
)

THREAD = "T1:C1:1700000000.000200"


async def _pending(
    pipeline: ActionPipeline, gemini: GeminiSimulator, **kwargs: Any
) -> ActionRequest:
    request = await propose_scale(pipeline, gemini, THREAD, **kwargs)
    assert request.status == "pending_approval", request.refusal
    return request


async def _breaker_counts(pipeline: ActionPipeline) -> tuple[int, int]:
    """shop/payment-api's circuit breaker: (recent executions, consecutive failures)."""
    state = await pipeline.breaker.state("shop/payment-api")
    return state.recent_executions, state.consecutive_failures


def _replicas(kube: KubernetesSimulator) -> int:
    replicas: int = kube.deployments[("shop", "payment-api")]["spec"]["replicas"]
    return replicas


async def test_a_connection_dropped_after_the_write_was_applied_ends_succeeded(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    kube.faults.after_write = "drop"
    result = await pipeline.approve(request.id, APPROVER)
    assert result.verdict == "succeeded"
    assert _replicas(kube) == 6
    assert result.message.startswith("scaled shop/payment-api to 6 replicas (the API answered:")
    assert await _breaker_counts(pipeline) == (1, 0)


async def test_an_execution_whose_cluster_cannot_be_read_back_stays_executing_and_is_audited(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    await pipeline.authorise(request.id, APPROVER)
    executing = await pipeline.store.transition(
        request.id, "executing", APPROVER, "executing", expect="approved"
    )
    kube.faults.status, kube.faults.methods = 500, ("GET",)  # the read-back fails
    settled = await pipeline.settle(executing, done="done", failed="failed")
    assert settled is None  # unknown: left for the reconciler, not guessed
    assert (await pipeline.store.get(request.id)).status == "executing"
    audit = await audit_entries(pipeline.store, request.id)
    assert (audit[-1]["event"], audit[-1]["note"]) == ("outcome_unknown", "cannot read the cluster")
    assert await _breaker_counts(pipeline) == (0, 0)


async def test_a_late_answer_after_the_write_was_applied_ends_succeeded(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    kube.faults.after_write = "late"
    result = await pipeline.approve(request.id, APPROVER)
    assert result.verdict == "succeeded"
    assert "did not answer within 2s" in result.message
    assert len(kube.writes) == 1 and _replicas(kube) == 6
    assert await _breaker_counts(pipeline) == (1, 0)


async def test_a_late_answer_to_a_rollback_is_not_retried_into_a_second_rollback(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini, action="rollout_undo", replicas=None)
    kube.faults.after_write = "late"
    result = await pipeline.approve(request.id, APPROVER)
    assert result.verdict == "succeeded"
    assert len(kube.writes) == 1
    image = kube.deployments[("shop", "payment-api")]["spec"]["template"]["spec"]["containers"]
    assert image[0]["image"] == "registry/payment-api:1.41.3"


async def test_a_write_that_hangs_unapplied_ends_failed_and_feeds_the_breaker(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    kube.faults.hang = ("PATCH",)
    result = await pipeline.approve(request.id, APPROVER)
    assert result.verdict == "failed"
    assert result.message == ("not applied: the Kubernetes API did not answer within 2s")
    assert _replicas(kube) == 4
    assert await _breaker_counts(pipeline) == (1, 1)


async def test_an_api_refusal_of_the_write_ends_failed(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    kube.faults.status, kube.faults.methods = 403, ("PATCH",)
    result = await pipeline.approve(request.id, APPROVER)
    assert result.verdict == "failed"
    assert result.message == "not applied: HTTP 403: injected 403 for " + (
        "/apis/apps/v1/namespaces/shop/deployments/payment-api/scale"
    )
    state = await pipeline.breaker.state("shop/payment-api")
    assert state.consecutive_failures == 1


async def test_a_problem_before_the_write_aborts_with_the_reason_and_sends_nothing(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini, action="rollout_undo", replicas=None)
    assert request.target_revision is not None and request.target_revision.revision == 2
    pinned = next(
        rs
        for rs in kube.replicasets.values()
        if rs["metadata"]["name"].startswith("payment-api")
        and rs["metadata"]["annotations"][REVISION] == "2"
    )
    pinned["metadata"]["annotations"][REVISION] = "abc"  # no longer a revision to kubectl
    result = await pipeline.approve(request.id, APPROVER)
    assert result.verdict == "aborted"
    assert result.message == (
        "not executed — NothingToUndo: shop/payment-api no longer has revision 2 as proposed; "
        "ask again"
    )
    assert kube.writes == []
    state = await pipeline.breaker.state("shop/payment-api")
    assert state.recent_executions == 0


async def test_a_config_only_rollback_is_proposed_and_executed(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    kube.add_deployment(
        "shop",
        "checkout",
        ["registry/checkout:2.0", "registry/checkout:2.0"],
        envs=[{"POOL_SIZE": "20"}, {"POOL_SIZE": "2"}],
    )
    request = await _pending(
        pipeline, gemini, action="rollout_undo", deployment="checkout", replicas=None
    )
    blast = next(d for d in request.gate_decisions if d.gate == "blast_radius")
    assert blast.reason.endswith("same images, other pod settings")
    result = await pipeline.approve(request.id, APPROVER)
    assert result.verdict == "succeeded"
    container = kube.deployments[("shop", "checkout")]["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "POOL_SIZE", "value": "20"}]


async def test_a_rollback_to_the_running_template_is_refused_at_proposal(
    pipeline: ActionPipeline, kube: KubernetesSimulator
) -> None:
    kube.add_deployment("shop", "search", ["registry/search:1"])
    kube.add_deployment("shop", "search", ["registry/search:1", "registry/search:2"])
    deployment = kube.deployments[("shop", "search")]
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "registry/search:1"
    refused = await pipeline.propose(
        action="rollout_undo",
        namespace="shop",
        deployment="search",
        thread_key=THREAD,
        requester=REQUESTER,
        reason="errors",
    )
    assert refused.refusal is not None
    assert refused.refusal.reason == "shop/search already runs revision 1's pod template"


async def test_a_healthy_rollout_is_reported_once_its_pods_are_available(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    pipeline = pipeline_for(rollout_watch_s=10, rollout_poll_s=0.05)
    kube.rollout_delay_s = 0.3
    request = await _pending(pipeline, gemini)
    await pipeline.approve(request.id, APPROVER)
    followed = await pipeline.follow_rollout(await pipeline.store.get(request.id))
    assert followed is not None and followed.rollout is not None
    assert (followed.rollout.healthy, followed.rollout.detail) == (
        True,
        "rolled out: 6/6 available",
    )


async def test_a_rollback_is_not_healthy_while_old_pods_still_serve(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    pipeline = pipeline_for(rollout_watch_s=0.5, rollout_poll_s=0.05)
    kube.rollout_delay_s = 30
    request = await _pending(pipeline, gemini, action="rollout_undo", replicas=None)
    await pipeline.approve(request.id, APPROVER)
    followed = await pipeline.follow_rollout(await pipeline.store.get(request.id))
    assert followed is not None and followed.rollout is not None
    assert followed.rollout.detail == (
        "not healthy after 0.5 s: 4/4 available, 4 old pods not replaced yet"
    )


async def test_an_unhealthy_rollout_names_the_reverse_action_and_runs_nothing(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    pipeline = pipeline_for(rollout_watch_s=1, rollout_poll_s=0.05)
    kube.faults.pods_never_available = True
    request = await _pending(pipeline, gemini)
    await pipeline.approve(request.id, APPROVER)
    followed = await pipeline.follow_rollout(await pipeline.store.get(request.id))
    assert followed is not None and followed.rollout is not None
    assert followed.rollout.model_dump() == {
        "healthy": False,
        "detail": "not healthy after 1 s: 4/6 available",
        "reverse": "scale shop/payment-api back to 4 replicas",
    }
    assert len(kube.writes) == 1  # the reverse action is only named


async def test_a_rollout_past_its_progress_deadline_is_reported_at_once(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    pipeline = pipeline_for(rollout_watch_s=60, rollout_poll_s=0.05)
    kube.faults.pods_never_available = True
    kube.deployments[("shop", "payment-api")]["spec"]["progressDeadlineSeconds"] = 0
    request = await _pending(pipeline, gemini, action="rollout_undo", replicas=None)
    await pipeline.approve(request.id, APPROVER)
    followed = await pipeline.follow_rollout(await pipeline.store.get(request.id))
    assert followed is not None and followed.rollout is not None
    assert followed.rollout.detail == (
        "progress deadline exceeded: 4/4 available, 4 old pods not replaced yet"
    )
    assert followed.rollout.reverse == "roll shop/payment-api back to revision 3"


async def test_a_dry_run_the_api_refuses_ends_failed_and_says_why(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    pipeline = pipeline_for(actions_enabled=False)
    request = await _pending(pipeline, gemini)
    kube.faults.status, kube.faults.methods = 403, ("PATCH",)
    result = await pipeline.approve(request.id, APPROVER)
    assert result.verdict == "failed"
    assert result.request is not None and result.request.outcome is not None
    assert result.request.outcome.dry_run
    assert result.message.startswith("dry run refused: HTTP 403")
    assert _replicas(kube) == 4
