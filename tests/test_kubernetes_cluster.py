"""The executor's Kubernetes calls: real kubernetes_asyncio against the simulator."""

from typing import Any

import pytest

from gates.cluster import REVISION, ClusterError, KubernetesCluster, NotFound
from gates.model import Revision, rollback_target
from sandbox.kubernetes import KubernetesSimulator


async def test_a_snapshot_shows_replicas_revision_and_history(cluster: KubernetesCluster) -> None:
    snap = await cluster.snapshot("shop", "payment-api")
    assert (snap.replicas, snap.current_revision, snap.paused) == (4, 3, False)
    assert snap.images == ["registry/payment-api:1.42.0"]
    assert [r.revision for r in snap.revisions] == [1, 2, 3]
    assert snap.revisions[1].change_cause == "deploy 1.41.3"


async def test_a_missing_deployment_is_reported_as_such(cluster: KubernetesCluster) -> None:
    with pytest.raises(NotFound, match=r'deployments\.apps "nope" not found'):
        await cluster.snapshot("shop", "nope")


async def _roll_back(
    cluster: KubernetesCluster, name: str = "payment-api", dry_run: bool = False
) -> str:
    """What the executor does for a rollback, with the target chosen as at proposal."""
    snap = await cluster.snapshot("shop", name)
    target = rollback_target(snap.revisions, None)
    assert target is not None
    planned = await cluster.plan_rollback("shop", name, target, snap.resource_version)
    await planned.send(dry_run)
    return planned.would if dry_run else planned.done


def _replica_set(kube: KubernetesSimulator, name: str, revision: str) -> dict[str, Any]:
    return next(
        rs
        for rs in kube.replicasets.values()
        if rs["metadata"]["name"].startswith(name)
        and rs["metadata"].get("annotations", {}).get(REVISION) == revision
    )


async def test_rollout_undo_restores_the_previous_template_exactly_as_kubectl(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    previous_rs = _replica_set(kube, "payment-api", "2")
    expected = {
        "metadata": {"labels": {"app": "payment-api"}},
        "spec": previous_rs["spec"]["template"]["spec"],
    }
    detail = await _roll_back(cluster)
    stored = kube.deployments[("shop", "payment-api")]
    assert stored["spec"]["template"] == expected  # pod-template-hash removed
    assert stored["metadata"]["annotations"]["kubernetes.io/change-cause"] == "deploy 1.41.3"
    assert stored["metadata"]["annotations"][REVISION] == "4"
    assert detail == "rolled back shop/payment-api to revision 2 (registry/payment-api:1.41.3)"


async def test_rollout_undo_sends_kubectls_json_patch(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    await _roll_back(cluster)
    (write,) = kube.writes
    assert write.content_type == "application/json-patch+json"
    assert [(op["op"], op["path"]) for op in write.body] == [
        ("replace", "/metadata/resourceVersion"),
        ("replace", "/spec/template"),
        ("replace", "/metadata/annotations"),
    ]


async def test_a_rollback_copies_the_replica_sets_annotations_except_kubectls_skip_list(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    rs = _replica_set(kube, "payment-api", "2")
    rs["metadata"]["annotations"]["example.com/sentinel"] = "from revision 2"
    rs["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] = "99"
    deployment = kube.deployments[("shop", "payment-api")]
    deployment["metadata"]["annotations"]["example.com/only-on-the-deployment"] = "dropped"
    deployment["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] = "5"
    await _roll_back(cluster)
    annotations = kube.deployments[("shop", "payment-api")]["metadata"]["annotations"]
    assert annotations["example.com/sentinel"] == "from revision 2"
    assert "example.com/only-on-the-deployment" not in annotations
    assert annotations["deployment.kubernetes.io/max-replicas"] == "5"  # the Deployment's own
    assert "deployment.kubernetes.io/desired-replicas" not in annotations  # the RS's is skipped


async def test_replica_sets_without_annotations_or_a_parsable_revision_follow_kubectl(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    kube.add_deployment(
        "shop", "cart", ["registry/cart:1", "registry/cart:2", "registry/cart:3", "registry/cart:4"]
    )
    del _replica_set(kube, "cart", "1")["metadata"]["annotations"]  # revision 0 to kubectl
    _replica_set(kube, "cart", "3")["metadata"]["annotations"][REVISION] = "abc"  # skipped
    snap = await cluster.snapshot("shop", "cart")
    assert [r.revision for r in snap.revisions] == [0, 2, 4]
    detail = await _roll_back(cluster, "cart")
    assert detail == "rolled back shop/cart to revision 2 (registry/cart:2)"
    image = kube.deployments[("shop", "cart")]["spec"]["template"]["spec"]["containers"][0]
    assert image["image"] == "registry/cart:2"


def test_the_rollback_target_is_the_second_highest_revision_or_the_one_asked_for() -> None:
    revisions = [Revision(revision=n, images=[f"img:{n}"]) for n in (0, 4, 2)]
    assert rollback_target(revisions, None) == revisions[2]
    assert rollback_target(revisions, 4) == revisions[1]
    assert rollback_target(revisions, 3) is None
    assert rollback_target(revisions[1:2], None) is None  # nothing to undo


async def test_a_dry_run_changes_nothing(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    before = await cluster.snapshot("shop", "payment-api")
    stored_before = kube.deployments[("shop", "payment-api")]
    detail = await _roll_back(cluster, dry_run=True)
    await cluster.plan_scale("shop", "payment-api", 8, before.resource_version).send(True)
    assert kube.deployments[("shop", "payment-api")] is stored_before
    assert kube.writes == []
    assert detail.startswith("would roll back shop/payment-api to revision 2")


async def test_scale_uses_the_scale_subresource(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    before = await cluster.snapshot("shop", "payment-api")
    await cluster.plan_scale("shop", "payment-api", 8, before.resource_version).send(False)
    (write,) = kube.writes
    assert write.path.endswith("/deployments/payment-api/scale")
    assert kube.deployments[("shop", "payment-api")]["spec"]["replicas"] == 8


async def test_a_write_on_a_stale_resource_version_is_refused(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    before = await cluster.snapshot("shop", "payment-api")
    await cluster.plan_scale("shop", "payment-api", 5, before.resource_version).send(False)
    with pytest.raises(ClusterError, match="HTTP 409: Operation cannot be fulfilled"):
        await cluster.plan_scale("shop", "payment-api", 6, before.resource_version).send(False)


async def test_a_rollback_planned_on_a_stale_resource_version_is_refused(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    before = await cluster.snapshot("shop", "payment-api")
    target = rollback_target(before.revisions, None)
    assert target is not None
    await cluster.plan_scale("shop", "payment-api", 5, before.resource_version).send(False)
    planned = await cluster.plan_rollback("shop", "payment-api", target, before.resource_version)
    with pytest.raises(ClusterError, match="HTTP 409: Operation cannot be fulfilled"):
        await planned.send(False)
    assert kube.deployments[("shop", "payment-api")]["metadata"]["annotations"][REVISION] == "3"


async def test_undo_of_a_paused_deployment_is_refused(cluster: KubernetesCluster) -> None:
    with pytest.raises(ClusterError, match="is paused"):
        await _roll_back(cluster, "frozen-svc")


async def test_a_dropped_connection_is_a_cluster_error(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    before = await cluster.snapshot("shop", "payment-api")
    kube.faults.after_write = "drop"
    with pytest.raises(ClusterError, match="cannot reach the Kubernetes API"):
        await cluster.plan_scale("shop", "payment-api", 6, before.resource_version).send(False)
    assert kube.deployments[("shop", "payment-api")]["spec"]["replicas"] == 6  # yet applied


@pytest.mark.parametrize(
    ("fault", "value", "says"),
    [
        pytest.param(
            "status", 403, "HTTP 403: injected 403", id="an_api_error_carries_its_message"
        ),
        pytest.param("latency_s", 5, "did not answer within 2s", id="a_hanging_api_times_out"),
    ],
)
async def test_an_api_that_fails_is_a_cluster_error_saying_how(
    cluster: KubernetesCluster, kube: KubernetesSimulator, fault: str, value: float, says: str
) -> None:
    setattr(kube.faults, fault, value)
    with pytest.raises(ClusterError, match=says):
        await cluster.snapshot("shop", "payment-api")
