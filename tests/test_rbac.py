"""The shipped Roles (deploy/kubernetes/target-namespace/role.yaml) against the calls each
process makes: the simulator enforces them like the API server, so a missing verb fails the
action and tool tests; the first test finds a verb the workers never use, and the process
test shows `serve`, granted nothing, makes no call while an approval is executed."""

from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from gates.cluster import ClusterError, KubernetesCluster
from gates.model import rollback_target
from sandbox import GeminiSimulator
from sandbox.fleet import Fleet
from sandbox.kubernetes import KubernetesSimulator, write_kubeconfig
from sandbox.slack import SlackSimulator
from tests.fleet_fixtures import approval_card, driver_for
from tests.gates_fixtures import (
    APPROVER,
    REQUESTER,
    SAFE,
    shipped_role_rules,
    shipped_roles,
    until,
)
from tests.proposals import ROLLBACK, ROLLBACK_PROPOSED


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


WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


def test_the_serve_role_grants_no_write() -> None:
    verbs = {verb for rule in shipped_roles()["tracegate-serve"] for verb in rule["verbs"]}
    assert not verbs & WRITE_VERBS


async def test_serve_makes_no_kubernetes_call_and_a_worker_executes_the_approval(
    fleet_for: Callable[..., Fleet],
    kube: KubernetesSimulator,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    tmp_path: Path,
) -> None:
    """WORKER_MODE=queue, each process with its own ServiceAccount token, authorized as the
    shipped Roles say: the proposal (a worker's turn), the click (serve) and the execution
    (a worker) all work, and the account `serve` runs as made no call at all."""
    roles = shipped_roles()
    kube.accounts = {
        "serve-token": ("tracegate-serve", roles["tracegate-serve"]),
        "worker-token": ("tracegate-worker", roles["tracegate-worker"]),
    }
    fleet = fleet_for(
        WORKER_MODE="queue",
        ACTIONS_ENABLED="true",
        ACTION_APPROVERS=APPROVER,
        RECONCILE_INTERVAL="1s",
        ROLLOUT_WATCH_TIMEOUT="5s",
    )
    serve = fleet.serve(
        KUBECONFIG=str(write_kubeconfig(tmp_path / "serve.kubeconfig", kube.url, "serve-token"))
    )
    worker = fleet.worker(
        KUBECONFIG=str(write_kubeconfig(tmp_path / "worker.kubeconfig", kube.url, "worker-token"))
    )
    await serve.ready()
    await worker.ready()
    gemini.script(ROLLBACK, SAFE, ROLLBACK_PROPOSED)
    driver = driver_for(serve.url)
    root = slack.new_ts()
    await driver.mention("fix checkout", ts=root, user=REQUESTER)

    posted, request_id = await approval_card(slack, root, fleet)
    await driver.click(
        "approve_action", request_id, user=APPROVER, channel="C1", message_ts=posted.ts
    )
    await until(lambda: "Succeeded" in str(posted.blocks), "the execution's outcome", 30)

    assert len(kube.writes) == 1
    assert kube.calls_by.get("tracegate-serve", 0) == 0, fleet.logs()
    assert ("apps", "deployments", "patch") in kube.rbac_used_by["tracegate-worker"]


async def test_a_token_no_account_holds_is_unauthorized(kube: KubernetesSimulator) -> None:
    kube.accounts = {"worker-token": ("tracegate-worker", shipped_role_rules())}
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{kube.url}/apis/apps/v1/namespaces/shop/deployments/payment-api",
            headers={"Authorization": "Bearer stolen"},
        ) as got,
    ):
        assert got.status == 401
