"""One approval in a process of its own, so a test can SIGKILL it at a chosen step.

    python -m tests.approval_process REDIS_URL PREFIX KUBECONFIG REQUEST_ID APPROVER LEASE_S

(the tests fork it from the fork server: `main(argv)`, sandbox/prefork.py).

The pipeline is built as `serve` builds it (real Redis, kubernetes_asyncio on the
kubeconfig); the judge is never asked during an approval, so its model points nowhere.
"""

from __future__ import annotations

import asyncio
import sys

import redis.asyncio as aioredis

from gates.cluster import KubernetesCluster
from gates.config import ActionPolicy
from gates.pipeline import build_pipeline
from graph.config import ModelSpec
from graph.model import make_chat_model

KUBE_TIMEOUT_S = 60.0  # longer than any test waits: the process dies by SIGKILL, not a timeout


async def approve(
    redis_url: str, prefix: str, kubeconfig: str, request_id: str, approver: str, lease_s: float
) -> None:
    redis = aioredis.from_url(redis_url)
    cluster = await KubernetesCluster.connect(kubeconfig, KUBE_TIMEOUT_S)
    policy = ActionPolicy(actions_enabled=True, approvers=frozenset({approver}))
    unused_model = make_chat_model(ModelSpec(api_key="unused", base_url="http://127.0.0.1:9"))
    pipeline = build_pipeline(redis, cluster, policy, unused_model, prefix=prefix, lease_s=lease_s)
    await pipeline.approve(request_id, approver)


def main(argv: list[str]) -> int:
    url, prefix, kubeconfig, request_id, approver, lease = argv[:6]
    asyncio.run(approve(url, prefix, kubeconfig, request_id, approver, float(lease)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
