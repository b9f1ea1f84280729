"""Each rule gate refuses its case, with its name and reason (real Redis, Kubernetes simulator)."""

import asyncio
import time
from typing import Any

import pytest

from gates.pipeline import RULE_GATES, ActionPipeline
from sandbox import GeminiSimulator
from tests.gates_fixtures import REQUESTER, SAFE, PipelineFactory
from tests.proposals import propose_rollback


def test_the_gates_run_in_the_documented_order() -> None:
    assert [g.name for g in RULE_GATES] == [
        "validation",
        "kill_switch",
        "policy",
        "blast_radius",
        "circuit_breaker",
        "duplicate",
    ]


@pytest.mark.parametrize(
    ("proposal", "gate", "reason"),
    [
        ({"action": "scale", "replicas": 0}, "blast_radius", "scaling to 0"),
        ({"action": "scale", "replicas": 4}, "blast_radius", "already runs 4 replicas"),
        ({"action": "scale", "replicas": 44}, "blast_radius", "more than 10× the current"),
        (
            {"action": "scale", "replicas": 60, "deployment": "fresh-svc"},
            "blast_radius",
            "MAX_REPLICAS",
        ),
        ({"deployment": "*"}, "validation", "is not one named object"),
        ({"deployment": "all"}, "validation", "is not one named object"),
        ({"deployment": "Payment_API"}, "validation", "not a valid DNS-1123 name"),
        ({"deployment": "payment-api\n"}, "validation", "not a valid DNS-1123 name"),
        ({"namespace": "shop,x"}, "validation", "not a valid DNS-1123 name"),
        ({"action": "delete"}, "validation", "unknown action 'delete'"),
        ({"action": "scale"}, "validation", "scale needs a replica count"),
        ({"namespace": "kube-system", "deployment": "coredns"}, "policy", "is protected"),
        ({"deployment": "fresh-svc"}, "blast_radius", "has no previous revision to roll back"),
        ({"to_revision": 9}, "blast_radius", "payment-api has no revision 9 to roll back to"),
        ({"deployment": "frozen-svc"}, "blast_radius", "is paused"),
        ({"deployment": "ghost"}, "blast_radius", "does not exist"),
    ],
)
async def test_a_gate_refuses_its_case_with_a_reason(
    pipeline: ActionPipeline, proposal: dict[str, Any], gate: str, reason: str
) -> None:
    refused = await propose_rollback(pipeline, **proposal)
    assert refused.status == "refused"
    assert refused.refusal is not None
    assert (refused.refusal.gate, reason in refused.refusal.reason) == (gate, True), refused.refusal


async def test_a_namespace_outside_the_allowlist_is_refused(pipeline_for: PipelineFactory) -> None:
    pipeline = pipeline_for(allowed_namespaces=frozenset({"billing"}))
    refused = await propose_rollback(pipeline)
    assert refused.refusal is not None
    assert refused.refusal.gate == "policy"
    assert "not in ALLOWED_NAMESPACES" in refused.refusal.reason


async def test_a_protected_deployment_is_refused(pipeline_for: PipelineFactory) -> None:
    pipeline = pipeline_for(protected_deployments=frozenset({"shop/payment-api"}))
    refused = await propose_rollback(pipeline)
    assert refused.refusal is not None
    assert "is protected (PROTECTED_DEPLOYMENTS)" in refused.refusal.reason


async def test_an_open_breaker_refuses_until_an_approver_resets_it(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator
) -> None:
    pipeline = pipeline_for(breaker_max_per_target=10)
    for i in range(3):
        await pipeline.breaker.record("shop/payment-api", False, f"act-{i}")
    refused = await propose_rollback(pipeline)
    assert refused.refusal is not None
    assert refused.refusal.gate == "circuit_breaker"
    assert "is open (3 consecutive failed actions" in refused.refusal.reason

    reset, message = await pipeline.reset_breaker("shop/payment-api", REQUESTER, False)
    assert not reset and message.startswith("only an approver may reset the circuit breaker")
    await pipeline.reset_breaker("shop/payment-api", "U_APPROVER", False)
    still_global = await propose_rollback(pipeline)
    assert still_global.refusal is not None
    assert "the breaker for the cluster is open" in still_global.refusal.reason
    await pipeline.reset_breaker(None, "U_APPROVER", False)
    gemini.script(SAFE)
    assert (await propose_rollback(pipeline)).status == "pending_approval"


async def test_too_many_recent_actions_on_a_target_trip_the_rate_window(
    pipeline: ActionPipeline,
) -> None:
    for i in range(3):
        await pipeline.breaker.record("shop/payment-api", True, f"act-{i}")
    refused = await propose_rollback(pipeline)
    assert refused.refusal is not None
    assert (
        "3 actions ran on shop/payment-api in the last 30 min (limit 3)" in refused.refusal.reason
    )


async def test_the_same_proposal_twice_in_one_incident_is_refused_as_duplicate(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    gemini.script(SAFE)
    first = await propose_rollback(pipeline)
    second = await propose_rollback(pipeline)
    assert first.status == "pending_approval"
    assert second.refusal is not None
    assert second.refusal.gate == "duplicate"
    assert f"already pending_approval as {first.id}" in second.refusal.reason


async def test_the_same_proposal_twice_at_once_is_one_pending_request(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    gemini.script(SAFE, SAFE)  # the agent's one response called propose_action twice

    both = await asyncio.gather(propose_rollback(pipeline), propose_rollback(pipeline))

    assert sorted(r.status for r in both) == ["pending_approval", "refused"]
    refused = next(r for r in both if r.status == "refused")
    assert refused.refusal is not None and refused.refusal.gate == "duplicate"


async def test_a_proposal_that_claimed_the_action_and_is_not_pending_yet_is_a_duplicate(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    """Between its claim and its move to pending_approval, the first proposal is still
    `proposed`: an identical one decided in that moment is a duplicate of it."""
    gemini.script(SAFE)
    first = await propose_rollback(pipeline)
    # The same proposal again, as far as its claim: recorded, gated, judged, claimed.
    claimer = first.model_copy(update={"id": "claimed-not-pending", "status": "proposed"})
    await pipeline.store.create(claimer)
    holder = await pipeline.store.fingerprint_holder(first.thread_key, first.fingerprint)
    await pipeline.store.claim_fingerprint(
        first.thread_key, first.fingerprint, claimer.id, seen=holder
    )

    second = await propose_rollback(pipeline)

    assert second.refusal is not None and second.refusal.gate == "duplicate"
    assert "already proposed as claimed-not-pending" in second.refusal.reason


async def test_a_proposal_past_its_window_does_not_block_the_same_proposal(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    gemini.script(SAFE, SAFE)
    first = await propose_rollback(pipeline)
    await pipeline.store.update(first.id, "test", "test", "window passed", expires_at=time.time())
    second = await propose_rollback(pipeline)  # before any reconciler has marked the first expired
    assert second.status == "pending_approval", second.refusal


async def test_the_same_proposal_in_another_incident_is_not_a_duplicate(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    gemini.script(SAFE, SAFE)
    await propose_rollback(pipeline)
    other = await propose_rollback(pipeline, thread_key="T1:C9:1700000099.000100")
    assert other.status == "pending_approval"


async def test_with_the_kill_switch_off_proposals_are_still_evaluated_and_shown(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator
) -> None:
    gemini.script(SAFE)
    pending = await propose_rollback(pipeline_for(actions_enabled=False))
    kill_switch = next(d for d in pending.gate_decisions if d.gate == "kill_switch")
    assert pending.status == "pending_approval"
    assert "Approve runs a server-side dry run only" in kill_switch.reason


async def test_an_allowed_proposal_records_snapshot_fingerprint_and_expiry(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    gemini.script(SAFE)
    pending = await propose_rollback(pipeline, evidence=["4bf92f3577b34da6a3ce929d0e0e4736"])
    assert pending.snapshot is not None
    assert (pending.snapshot.replicas, pending.snapshot.current_revision) == (4, 3)
    assert len(pending.fingerprint) == 20
    assert 900 <= pending.expires_at - pending.created_at < 910  # from when it became pending
    assert [t.to_status for t in pending.history] == ["pending_approval"]
