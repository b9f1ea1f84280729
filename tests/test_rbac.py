"""The shipped Role (deploy/kubernetes/target-namespace/role.yaml) against the calls the code
makes: the simulator enforces it like the API server, so a missing verb fails the action and
tool tests, and the test below finds a verb nobody uses."""

import aiohttp
import pytest

from gates.cluster import ClusterError, KubernetesCluster
from gates.model import rollback_target
from sandbox.kubernetes import KubernetesSimulator
from tests.gates_fixtures import shipped_role_rules


def _granted() -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in shipped_role_rules()
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


async def test_the_role_grants_exactly_the_calls_that_every_cluster_operation_makes(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    # Every operation of gates/cluster.py, the only module that talks to the API server.
    snap = await cluster.snapshot("shop", "payment-api")  # get_rollout_history, the gates
    await cluster.rollout_status("shop", "payment-api")  # the rollout watch
    fresh = await cluster.snapshot("shop", "fresh-svc")
    scale = cluster.plan_scale("shop", "fresh-svc", 3, fresh.resource_version)
    await scale.send(True)
    await scale.send(False)
    target = rollback_target(snap.revisions, None)
    assert target is not None
    rollback = await cluster.plan_rollback("shop", "payment-api", target, snap.resource_version)
    await rollback.send(True)
    await rollback.send(False)
    # The investigation's reads: pods, events, a log tail.
    (pod, *_) = kube.add_pods("shop", "payment-api")
    name = pod["metadata"]["name"]
    await cluster.workload_pods("shop", "payment-api", limit=10)
    await cluster.events("shop", limit=10)
    await _log(cluster, name)

    assert kube.rbac_used == _granted()


@pytest.mark.parametrize(
    ("resource", "verb", "read"),
    [
        ("pods", "list", "pods"),
        ("pods", "get", "logs"),
        ("events", "list", "events"),
        ("pods/log", "get", "logs"),
    ],
)
async def test_each_read_of_the_investigation_needs_its_rule(
    cluster: KubernetesCluster, kube: KubernetesSimulator, resource: str, verb: str, read: str
) -> None:
    (pod, *_) = kube.add_pods("shop", "payment-api")
    name = pod["metadata"]["name"]
    kube.rules = [
        {**rule, "verbs": [v for v in rule["verbs"] if v != verb]}
        if rule["apiGroups"] == [""] and resource in rule["resources"]
        else rule
        for rule in shipped_role_rules()
    ]
    calls = {
        "pods": lambda: cluster.workload_pods("shop", "payment-api", limit=10),
        "events": lambda: cluster.events("shop", limit=10),
        "logs": lambda: _log(cluster, name),
    }
    with pytest.raises(ClusterError, match=rf'HTTP 403: .*cannot {verb} resource "{resource}"'):
        await calls[read]()


async def _log(cluster: KubernetesCluster, pod: str) -> str:
    await cluster.pod("shop", pod)
    return await cluster.pod_log(
        "shop", pod, "payment-api", tail_lines=5, limit_bytes=100, previous=False
    )


async def test_a_call_the_role_does_not_grant_is_forbidden(kube: KubernetesSimulator) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.delete(f"{kube.url}/apis/apps/v1/namespaces/shop/deployments/payment-api") as got,
    ):
        body = await got.json()
    assert got.status == 403
    assert 'cannot delete resource "deployments" in API group "apps"' in body["message"]
    assert ("shop", "payment-api") in kube.deployments


async def test_a_forbidden_call_reaches_the_code_as_the_api_servers_message(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    kube.rules = [r for r in shipped_role_rules() if "deployments/scale" not in r["resources"]]
    snap = await cluster.snapshot("shop", "fresh-svc")
    scale = cluster.plan_scale("shop", "fresh-svc", 3, snap.resource_version)
    with pytest.raises(
        ClusterError, match=r'HTTP 403: .*cannot patch resource "deployments/scale"'
    ):
        await scale.send(False)
    assert kube.writes == []
