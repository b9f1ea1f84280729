"""Fixtures for the action floor: the Kubernetes simulator behind a kubeconfig, the pipeline."""

from __future__ import annotations

import asyncio
import inspect
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
import yaml

from bot.process.redis_client import RedisSpec, connect_redis
from gates.cluster import KubernetesCluster
from gates.config import ActionPolicy
from gates.model import ActionRequest
from gates.pipeline import ActionPipeline, build_pipeline
from gates.store import DEFAULT_LEASE_S, ActionStore, as_text
from graph.config import ModelSpec
from graph.model import make_chat_model
from sandbox import GeminiSimulator, Reply
from sandbox.kubernetes import KubernetesSimulator, write_kubeconfig
from sandbox.prefork import forked

REPOSITORY = Path(__file__).resolve().parent.parent
APPROVER = "U_APPROVER"
SECOND_APPROVER = "U_SECOND"
REQUESTER = "U_ONCALL"
OUTSIDER = "U_OUTSIDER"
ROLE = REPOSITORY / "deploy" / "kubernetes" / "target-namespace" / "role.yaml"
SAFE = Reply.json({"safe_to_proceed": True, "reason": "the errors started with revision 42"})


def shipped_roles() -> dict[str, list[dict[str, Any]]]:
    """The Roles deploy/kubernetes grants in each target namespace: name -> rules."""
    roles = [doc for doc in yaml.safe_load_all(ROLE.read_text()) if doc]
    assert {role["kind"] for role in roles} == {"Role"}
    return {role["metadata"]["name"]: list(role["rules"]) for role in roles}


def shipped_role_rules() -> list[dict[str, Any]]:
    """The rules of the workers' Role: every call gates/cluster.py makes."""
    return shipped_roles()["tracegate-worker"]


@pytest.fixture
async def kube() -> AsyncIterator[KubernetesSimulator]:
    """The cluster as tracegate's ServiceAccount sees it: only what the shipped Role grants."""
    async with KubernetesSimulator(rules=shipped_role_rules()) as sim:
        sim.add_deployment(
            "shop",
            "payment-api",
            [
                "registry/payment-api:1.40.0",
                "registry/payment-api:1.41.3",
                "registry/payment-api:1.42.0",
            ],
            replicas=4,
        )
        sim.add_deployment("shop", "fresh-svc", ["registry/fresh:1.0.0"], replicas=2)
        sim.add_deployment(
            "shop", "frozen-svc", ["registry/frozen:1", "registry/frozen:2"], paused=True
        )
        sim.add_deployment("kube-system", "coredns", ["coredns:1.11", "coredns:1.12"])
        sim.add_deployment("billing", "ledger", ["ledger:1", "ledger:2"])
        yield sim


@pytest.fixture
def kubeconfig(kube: KubernetesSimulator, tmp_path: Path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", kube.url)


@pytest.fixture
async def cluster(kubeconfig: Path) -> AsyncIterator[KubernetesCluster]:
    connected = await KubernetesCluster.connect(str(kubeconfig), timeout_s=2.0)
    yield connected
    await connected.close()


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """The product's client (bot/process/redis_client.py) on the tests' Redis."""
    client = connect_redis(RedisSpec(redis_url))
    yield client
    await client.aclose()


PipelineFactory = Callable[..., ActionPipeline]


@pytest.fixture
def pipeline_for(
    redis_client: aioredis.Redis, cluster: KubernetesCluster, model_spec: ModelSpec
) -> PipelineFactory:
    """Pipelines sharing a private Redis prefix; `lease_s` is the store's lease, other
    keyword arguments override ActionPolicy."""
    prefix = f"test-{uuid.uuid4().hex[:8]}"

    def build(lease_s: float = DEFAULT_LEASE_S, **policy: Any) -> ActionPipeline:
        settings = {"actions_enabled": True, "approvers": frozenset({APPROVER, SECOND_APPROVER})}
        settings.update(policy)
        return build_pipeline(
            redis_client,
            cluster,
            ActionPolicy(**settings),
            make_chat_model(model_spec),
            prefix=prefix,
            lease_s=lease_s,
        )

    return build


@pytest.fixture
def pipeline(pipeline_for: PipelineFactory) -> ActionPipeline:
    return pipeline_for()


async def audit_entries(store: ActionStore, request_id: str | None = None) -> list[dict[str, str]]:
    """The audit stream's entries (of one request, if given), oldest first, as text."""
    decoded = [
        {as_text(k): as_text(v) for k, v in fields.items()}
        for _, fields in await store.redis.xrange(store.audit_stream)
    ]
    return [e for e in decoded if request_id is None or e["request_id"] == request_id]


async def until(
    condition: Callable[[], bool | Awaitable[bool]], what: str, timeout_s: float = 20.0
) -> None:
    """Wait for `condition`, polling; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        outcome = condition()
        if await outcome if inspect.isawaitable(outcome) else outcome:
            return
        assert time.monotonic() < deadline, f"gave up waiting for {what} after {timeout_s:g}s"
        await asyncio.sleep(0.02)


async def kill_mid_approval(
    *,
    redis_url: str,
    prefix: str,
    kubeconfig: Path,
    request_id: str,
    lease_s: float,
    at: Callable[[], bool | Awaitable[bool]],
) -> None:
    """Approve `request_id` (as APPROVER) in a process of its own and SIGKILL it the moment
    `at()` holds — a crash at a chosen step, not a cancelled coroutine."""
    argv = [redis_url, prefix, str(kubeconfig), request_id, APPROVER, str(lease_s)]
    with tempfile.TemporaryDirectory(prefix="tracegate-approval-") as folder:
        log = Path(folder, "output")
        process = forked(argv, dict(os.environ), REPOSITORY, log, module="tests.approval_process")

        async def reached() -> bool:
            if process.poll() is not None:
                output = (await asyncio.to_thread(log.read_text))[-2000:]
                raise AssertionError(f"the approval process ended before the kill:\n{output}")
            outcome = at()
            return bool(await outcome if inspect.isawaitable(outcome) else outcome)

        try:
            await until(reached, "the approval process to reach the step", timeout_s=90)
        finally:
            process.kill()  # SIGKILL
            await asyncio.to_thread(process.wait)


async def propose_scale(
    pipeline: ActionPipeline, gemini: GeminiSimulator, thread_key: str, **overrides: Any
) -> ActionRequest:
    """A scale of shop/payment-api from 4 to 6 that the judge allows (overrides change it)."""
    args: dict[str, Any] = {
        "action": "scale",
        "namespace": "shop",
        "deployment": "payment-api",
        "replicas": 6,
        "thread_key": thread_key,
        "requester": REQUESTER,
        "reason": "saturated since 13:58",
    }
    args.update(overrides)
    gemini.script(SAFE)
    return await pipeline.propose(**args)
