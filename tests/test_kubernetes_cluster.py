"""The executor's Kubernetes calls: real kubernetes_asyncio against the simulator."""

import pytest

from gates.cluster import ClusterError, DeploymentNotFound, KubernetesCluster, NothingToUndo
from sandbox.kubernetes import KubernetesSimulator


async def test_a_snapshot_shows_replicas_revision_and_history(cluster: KubernetesCluster) -> None:
    snap = await cluster.snapshot("shop", "payment-api")
    assert (snap.replicas, snap.current_revision, snap.paused) == (4, 3, False)
    assert snap.images == ["registry/payment-api:1.42.0"]
    assert [r.revision for r in snap.revisions] == [1, 2, 3]
    assert snap.revisions[1].change_cause == "deploy 1.41.3"


async def test_a_missing_deployment_is_reported_as_such(cluster: KubernetesCluster) -> None:
    with pytest.raises(DeploymentNotFound, match=r'deployments\.apps "nope" not found'):
        await cluster.snapshot("shop", "nope")


async def test_rollout_undo_restores_the_previous_template_exactly_as_kubectl(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    before = await cluster.snapshot("shop", "payment-api")
    previous_rs = next(
        rs
        for rs in kube.replicasets.values()
        if rs["metadata"]["name"].startswith("payment-api")
        and rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    )
    expected = {
        "metadata": {"labels": {"app": "payment-api"}},
        "spec": previous_rs["spec"]["template"]["spec"],
    }
    detail = await cluster.rollout_undo(
        "shop", "payment-api", None, before.resource_version, dry_run=False
    )
    stored = kube.deployments[("shop", "payment-api")]
    assert stored["spec"]["template"] == expected  # pod-template-hash removed
    assert stored["metadata"]["annotations"]["kubernetes.io/change-cause"] == "deploy 1.41.3"
    assert stored["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "4"
    assert detail == "rolled back shop/payment-api to revision 2 (registry/payment-api:1.41.3)"


async def test_rollout_undo_sends_kubectls_json_patch(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    before = await cluster.snapshot("shop", "payment-api")
    await cluster.rollout_undo("shop", "payment-api", None, before.resource_version, dry_run=False)
    (write,) = kube.writes
    assert write.content_type == "application/json-patch+json"
    assert [(op["op"], op["path"]) for op in write.body] == [
        ("replace", "/metadata/resourceVersion"),
        ("replace", "/spec/template"),
        ("replace", "/metadata/annotations"),
    ]


async def test_a_dry_run_changes_nothing(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    before = await cluster.snapshot("shop", "payment-api")
    stored_before = kube.deployments[("shop", "payment-api")]
    detail = await cluster.rollout_undo(
        "shop", "payment-api", None, before.resource_version, dry_run=True
    )
    await cluster.scale("shop", "payment-api", 8, before.resource_version, dry_run=True)
    assert kube.deployments[("shop", "payment-api")] is stored_before
    assert kube.writes == []
    assert detail.startswith("would roll back shop/payment-api to revision 2")


async def test_scale_uses_the_scale_subresource(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    before = await cluster.snapshot("shop", "payment-api")
    await cluster.scale("shop", "payment-api", 8, before.resource_version, dry_run=False)
    (write,) = kube.writes
    assert write.path.endswith("/deployments/payment-api/scale")
    assert kube.deployments[("shop", "payment-api")]["spec"]["replicas"] == 8


async def test_a_write_on_a_stale_resource_version_is_refused(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    before = await cluster.snapshot("shop", "payment-api")
    await cluster.scale("shop", "payment-api", 5, before.resource_version, dry_run=False)
    with pytest.raises(ClusterError, match="HTTP 409: Operation cannot be fulfilled"):
        await cluster.scale("shop", "payment-api", 6, before.resource_version, dry_run=False)


async def test_undo_without_a_previous_revision_is_refused(cluster: KubernetesCluster) -> None:
    snap = await cluster.snapshot("shop", "fresh-svc")
    with pytest.raises(NothingToUndo, match="no previous revision"):
        await cluster.rollout_undo("shop", "fresh-svc", None, snap.resource_version, False)


async def test_undo_of_a_paused_deployment_is_refused(cluster: KubernetesCluster) -> None:
    snap = await cluster.snapshot("shop", "frozen-svc")
    with pytest.raises(ClusterError, match="is paused"):
        await cluster.rollout_undo("shop", "frozen-svc", None, snap.resource_version, False)


async def test_an_api_error_carries_the_api_servers_message(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    kube.faults.status = 403
    with pytest.raises(ClusterError, match="HTTP 403: injected 403"):
        await cluster.snapshot("shop", "payment-api")


async def test_a_hanging_api_times_out(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    kube.faults.latency_s = 5
    with pytest.raises(ClusterError, match="did not answer within 2s"):
        await cluster.snapshot("shop", "payment-api")
