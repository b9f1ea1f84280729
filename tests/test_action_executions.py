"""Approved actions executed by the workers, through real processes: a worker killed while
its write is in flight is not followed by a second write when its job is retried."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import redis.asyncio as aioredis
from saq.job import Status

from bot.turn.executions import action_queue
from gates.store import ActionStore
from sandbox import GeminiSimulator
from sandbox.fleet import Fleet
from sandbox.kubernetes import KubernetesSimulator, write_kubeconfig
from sandbox.slack import SlackSimulator
from tests.fleet_fixtures import approval_card, driver_for
from tests.gates_fixtures import APPROVER, REQUESTER, SAFE, audit_entries, until
from tests.proposals import ROLLBACK, ROLLBACK_PROPOSED


async def test_a_worker_killed_mid_write_leaves_one_execution_whoever_retries_its_job(
    fleet_for: Callable[..., Fleet],
    kube: KubernetesSimulator,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    redis_url: str,
    tmp_path: Path,
) -> None:
    fleet = fleet_for(
        WORKER_MODE="queue",
        KUBECONFIG=str(write_kubeconfig(tmp_path / "kubeconfig", kube.url)),
        ACTIONS_ENABLED="true",
        ACTION_APPROVERS=APPROVER,
        KUBE_TIMEOUT="0.5",
        ACTION_LEASE="20s",  # past the retry of the dead worker's job (heartbeat and sweep)
        RECONCILE_INTERVAL="1s",
        ROLLOUT_WATCH_TIMEOUT="5s",
    )
    serve, first = fleet.serve(), fleet.worker()
    await serve.ready()
    await first.ready()
    gemini.script(ROLLBACK, SAFE, ROLLBACK_PROPOSED)
    driver = driver_for(serve.url)
    root = slack.new_ts()
    await driver.mention("fix checkout", ts=root, user=REQUESTER)
    card, request_id = await approval_card(slack, root, fleet)
    kube.faults.hang = ("PATCH",)  # the rollback is sent and never answered

    await driver.click(
        "approve_action", request_id, user=APPROVER, channel="C1", message_ts=card.ts
    )
    await until(lambda: "PATCH" in {m for m, _ in kube.requests}, "the write in flight", 30)
    first.signal(signal.SIGKILL)
    await first.exited(10)
    kube.faults.hang = ()
    second = fleet.worker()  # retries the dead worker's job; its reconciler settles the request
    await second.ready()
    await until(
        lambda: any(word in str(card.blocks) for word in ("Failed", "Succeeded")),
        "the request settled on its card",
        60,
    )

    redis = aioredis.from_url(redis_url)
    try:
        prefix = fleet.env["REDIS_PREFIX"]
        queue = action_queue(redis, prefix)

        async def job_ended() -> bool:  # the dead worker's job, retried by the second one
            job = await queue.job(f"execute:{request_id}")
            return job is not None and job.status == Status.COMPLETE and job.attempts >= 2

        await until(job_ended, "the retried execution job to end", 60)
        entries = await audit_entries(ActionStore(redis, prefix), request_id)
    finally:
        await redis.aclose()
    started = [e for e in entries if e["to"] == "executing"]
    assert len(started) == 1, started  # one execution started, by the killed worker
    # Stored: only the reconciler's fence; the rollback the dead worker sent never landed,
    # and the retried job did not send it again.
    (fence,) = kube.writes
    assert fence.body[-1]["path"] == "/metadata/annotations/tracegate.io~1fenced-by"
