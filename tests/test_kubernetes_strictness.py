"""The Kubernetes simulator is as strict as a cluster tracegate is installed in: the Role is
granted only in namespaces that have its RoleBinding, and the deployment controller observes
a write's new generation a step after it, so the rollout check has to wait for it. The real
kubernetes_asyncio client (gates/cluster.py) against the simulator."""

from __future__ import annotations

import asyncio
import time

import pytest

from gates.cluster import ClusterError, KubernetesCluster
from sandbox.kubernetes import KubernetesSimulator


async def test_a_namespace_without_the_rolebinding_is_forbidden(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    kube.role_bindings = {"shop"}  # billing has a Deployment but no RoleBinding
    with pytest.raises(
        ClusterError, match=r'HTTP 403: .*cannot get resource "deployments" .* "billing"'
    ):
        await cluster.snapshot("billing", "ledger")
    assert (await cluster.snapshot("shop", "fresh-svc")).resource_version


async def test_a_new_generation_is_observed_a_step_after_the_write(
    cluster: KubernetesCluster, kube: KubernetesSimulator
) -> None:
    kube.observe_after_s = 0.3
    snap = await cluster.snapshot("shop", "fresh-svc")
    await cluster.plan_scale("shop", "fresh-svc", 3, snap.resource_version).send(False)

    first = await cluster.rollout_status("shop", "fresh-svc")
    assert first.observed_generation < first.generation
    assert not first.healthy
    deadline = time.monotonic() + 3
    while not (status := await cluster.rollout_status("shop", "fresh-svc")).healthy:
        assert time.monotonic() < deadline, status
        await asyncio.sleep(0.05)
    assert status.observed_generation == status.generation
