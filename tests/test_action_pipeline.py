"""The action pipeline as every process assembles it (`build_pipeline`): real Redis, real
kubernetes_asyncio against the simulator."""

import uuid

import redis.asyncio as aioredis

from gates.cluster import KubernetesCluster
from gates.config import ActionPolicy
from gates.pipeline import build_pipeline
from graph.config import ModelSpec
from graph.model import make_chat_model
from sandbox import GeminiSimulator
from tests.gates_fixtures import APPROVER, propose_scale


async def test_two_redis_prefixes_keep_their_own_requests_and_circuit_breakers(
    redis_client: aioredis.Redis,
    cluster: KubernetesCluster,
    model_spec: ModelSpec,
    gemini: GeminiSimulator,
) -> None:
    policy = ActionPolicy(approvers=frozenset({APPROVER}))
    tripped, other = (
        build_pipeline(
            redis_client, cluster, policy, make_chat_model(model_spec), prefix=uuid.uuid4().hex
        )
        for _ in range(2)
    )
    for i in range(policy.breaker_failure_threshold):
        await tripped.breaker.record("shop/payment-api", False, f"act-{i}")

    refused = await propose_scale(tripped, gemini, "T1:C1:1")
    allowed = await propose_scale(other, gemini, "T1:C1:1")

    assert refused.refusal is not None and refused.refusal.gate == "circuit_breaker"
    assert allowed.status == "pending_approval", allowed.refusal
    assert await other.store.for_thread("T1:C1:1") == [allowed]
