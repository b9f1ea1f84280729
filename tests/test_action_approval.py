"""Approve / reject: authorisation, exactly-once execution, re-checks, the audit trail."""

import asyncio
import time
from typing import Any

import pytest

from gates.model import ActionRequest
from gates.pipeline import ActionPipeline
from sandbox import GeminiRequest, GeminiSimulator, Reply
from sandbox.kubernetes import KubernetesSimulator
from tests.gates_fixtures import (
    APPROVER,
    OUTSIDER,
    REQUESTER,
    SAFE,
    SECOND_APPROVER,
    PipelineFactory,
    audit_entries,
)
from tests.proposals import propose_rollback


async def _pending(
    pipeline: ActionPipeline, gemini: GeminiSimulator, **kwargs: Any
) -> ActionRequest:
    gemini.script(SAFE)
    request = await propose_rollback(pipeline, **kwargs)
    assert request.status == "pending_approval", request.refusal
    return request


async def test_fifty_concurrent_approvals_execute_exactly_once(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    results = await asyncio.gather(
        *(pipeline.approve(request.id, APPROVER if i % 2 else SECOND_APPROVER) for i in range(50))
    )
    verdicts = [r.verdict for r in results]
    assert verdicts.count("succeeded") == 1
    assert verdicts.count("already_handled") == 49
    assert len(kube.writes) == 1
    final = await pipeline.store.get(request.id)
    assert final.status == "succeeded"


async def test_approval_rolls_back_and_records_the_outcome(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    result = await pipeline.approve(request.id, APPROVER)
    assert result.request is not None and result.request.outcome is not None
    assert result.request.outcome.detail == (
        "rolled back shop/payment-api to revision 2 (registry/payment-api:1.41.3)"
    )
    image = kube.deployments[("shop", "payment-api")]["spec"]["template"]["spec"]["containers"][0]
    assert image["image"] == "registry/payment-api:1.41.3"


async def test_scale_approval_changes_the_replicas(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini, action="scale", replicas=8)
    await pipeline.approve(request.id, APPROVER)
    assert kube.deployments[("shop", "payment-api")]["spec"]["replicas"] == 8


async def test_an_unauthorised_user_is_refused_and_audited(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    result = await pipeline.approve(request.id, OUTSIDER)
    assert (result.verdict, result.message) == (
        "denied",
        "you are not an approver (ACTION_APPROVERS / ACTION_APPROVER_GROUP)",
    )
    assert kube.writes == []
    audit = await audit_entries(pipeline.store, request.id)
    assert (audit[-1]["event"], audit[-1]["actor"]) == ("approval_denied", OUTSIDER)


async def test_a_click_on_a_request_already_rejected_is_refused_and_audited(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    await pipeline.reject(request.id, SECOND_APPROVER)
    result = await pipeline.approve(request.id, APPROVER)
    assert (result.verdict, result.message) == ("already_handled", "already rejected")
    assert kube.writes == []
    audit = await audit_entries(pipeline.store, request.id)
    assert [audit[-1][k] for k in ("event", "actor", "note")] == [
        "approval_denied",
        APPROVER,
        "already rejected",
    ]


async def test_a_member_of_the_approver_group_may_approve(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    result = await pipeline.approve(request.id, OUTSIDER, in_approver_group=True)
    assert result.verdict == "succeeded"


async def test_self_approval_is_refused_unless_allowed(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    strict = pipeline_for(approvers=frozenset({REQUESTER}))
    request = await _pending(strict, gemini)
    refused = await strict.approve(request.id, REQUESTER)
    assert refused.verdict == "denied"
    assert "someone else must approve it" in refused.message
    assert kube.writes == []
    audit = await audit_entries(strict.store, request.id)
    assert (audit[-1]["event"], audit[-1]["actor"]) == ("approval_denied", REQUESTER)

    lenient = pipeline_for(approvers=frozenset({REQUESTER}), allow_self_approval=True)
    other = await _pending(lenient, gemini, thread_key="T1:C2:1")
    assert (await lenient.approve(other.id, REQUESTER)).verdict == "succeeded"


async def test_an_expired_request_is_refused_and_marked_expired(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    await pipeline.store.redis.hset(
        pipeline.store.key(request.id),
        "doc",
        request.model_copy(update={"expires_at": time.time() - 1}).model_dump_json(),
    )
    result = await pipeline.approve(request.id, APPROVER)
    assert result.verdict == "expired"
    assert (await pipeline.store.get(request.id)).status == "expired"
    assert kube.writes == []
    audit = await audit_entries(pipeline.store, request.id)
    assert [(e["to"], e["actor"]) for e in audit[-2:]] == [
        ("expired", "tracegate"),
        ("expired", APPROVER),
    ]


async def test_a_deployment_changed_after_the_proposal_aborts_without_executing(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    kube.deployments[("shop", "payment-api")]["metadata"]["resourceVersion"] = "99999"
    result = await pipeline.approve(request.id, APPROVER)
    assert result.request is not None
    assert result.request.status == "aborted"
    assert "the deployment changed since this was proposed; ask again" in result.message
    assert kube.writes == []


async def test_approval_re_runs_the_rule_gates_on_fresh_state(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    kube.deployments[("shop", "payment-api")]["spec"]["paused"] = True
    result = await pipeline.approve(request.id, APPROVER)
    assert result.request is not None
    assert result.request.status == "aborted"
    assert "blast_radius: shop/payment-api is paused" in result.message


async def test_with_the_kill_switch_off_approve_only_dry_runs(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    pipeline = pipeline_for(actions_enabled=False)
    before = kube.deployments[("shop", "payment-api")]
    request = await _pending(pipeline, gemini)
    result = await pipeline.approve(request.id, APPROVER)
    assert result.request is not None and result.request.outcome is not None
    assert result.request.status == "succeeded"
    assert result.request.outcome.dry_run
    assert result.message.startswith("would roll back shop/payment-api to revision 2")
    assert kube.deployments[("shop", "payment-api")] is before
    assert kube.writes == []


async def test_an_api_failure_during_execution_ends_failed_and_feeds_the_breaker(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    request = await _pending(pipeline, gemini, action="scale", replicas=6)
    kube.faults.status, kube.faults.methods = 403, ("PATCH",)
    result = await pipeline.approve(request.id, APPROVER)
    assert result.request is not None
    assert result.request.status == "failed"
    assert "HTTP 403" in result.message
    state = await pipeline.breaker.state("shop/payment-api")
    assert state.consecutive_failures == 1


async def test_reject_by_an_approver_or_the_requester(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    first = await _pending(pipeline, gemini)
    assert (await pipeline.reject(first.id, OUTSIDER)).verdict == "denied"
    assert (await pipeline.reject(first.id, REQUESTER, "wrong service")).verdict == "rejected"
    assert (await pipeline.approve(first.id, APPROVER)).verdict == "already_handled"
    assert kube.writes == []


async def test_every_transition_is_audited_with_its_actor(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    request = await _pending(pipeline, gemini)
    await pipeline.approve(request.id, APPROVER)
    trail = [
        (e["from"], e["to"], e["actor"])
        for e in await audit_entries(pipeline.store, request.id)
        if e["event"] in ("created", "transition")
    ]
    assert trail == [
        ("", "proposed", REQUESTER),
        ("proposed", "pending_approval", "tracegate"),
        ("pending_approval", "approved", APPROVER),
        ("approved", "executing", APPROVER),
        ("executing", "succeeded", "tracegate"),
    ]


async def test_the_judge_blocks_a_rollback_when_the_cause_is_a_database(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    def judge(request: GeminiRequest) -> Reply:
        overloaded = "connection pool exhausted" in request.text()
        return Reply.json(
            {
                "safe_to_proceed": not overloaded,
                "reason": "the database is overloaded; a rollback will not help"
                if overloaded
                else "fits the evidence",
            }
        )

    gemini.script(judge)
    refused = await propose_rollback(
        pipeline, context="postgres: connection pool exhausted, p99 4s on every query since 13:58"
    )
    shown = gemini.requests[0]
    assert refused.status == "refused"
    assert refused.judge is not None and not refused.judge.safe_to_proceed
    assert refused.judge.reason == "the database is overloaded; a rollback will not help"
    assert shown.wants_json
    assert "roll back shop/payment-api" in shown.text() and "untrusted" in shown.text()


async def test_a_judge_error_refuses_in_closed_mode(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.error(500))
    refused = await propose_rollback(pipeline)
    assert refused.status == "refused"
    assert refused.judge is not None and not refused.judge.available
    assert "JUDGE_FAIL_MODE=closed" in refused.judge.reason


@pytest.mark.parametrize(
    "reply",
    [
        Reply.blocked(),
        Reply.cut_off('{"safe_to_proceed": tr'),
        # Parseable, yet the model did not finish: still no judgement.
        Reply.cut_off('{"safe_to_proceed": true, "reason": "fits the evidence"}'),
    ],
    ids=["withheld-by-safety-filters", "cut-off-at-the-output-limit", "cut-off-yet-parseable"],
)
async def test_a_judgement_that_did_not_finish_refuses_in_closed_mode(
    pipeline: ActionPipeline, gemini: GeminiSimulator, reply: Reply
) -> None:
    gemini.script(reply)
    refused = await propose_rollback(pipeline)
    assert refused.status == "refused"
    assert refused.judge is not None and not refused.judge.available
    assert "JUDGE_FAIL_MODE=closed" in refused.judge.reason


async def test_a_judge_error_allows_with_a_warning_in_open_mode(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text("not json at all"))
    pending = await propose_rollback(pipeline_for(judge_fail_mode="open"))
    assert pending.status == "pending_approval"
    assert pending.judge is not None and not pending.judge.available
    assert "judge unavailable" in pending.judge.reason


async def test_the_audit_stream_holds_every_transition_of_every_request(
    pipeline: ActionPipeline, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    refused = await propose_rollback(pipeline, action="scale", replicas=0)
    rejected = await _pending(pipeline, gemini, thread_key="T1:C1:a")
    await pipeline.reject(rejected.id, APPROVER, "not now")
    succeeded = await _pending(pipeline, gemini, thread_key="T1:C1:b")
    await pipeline.approve(succeeded.id, APPROVER)
    aborted = await _pending(pipeline, gemini, action="scale", replicas=5, thread_key="T1:C1:c")
    kube.deployments[("shop", "payment-api")]["metadata"]["resourceVersion"] = "1"
    await pipeline.approve(aborted.id, APPROVER)

    for request_id in (refused.id, rejected.id, succeeded.id, aborted.id):
        stored = await pipeline.store.get(request_id)
        audited = [
            (e["from"], e["to"], e["actor"])
            for e in await audit_entries(pipeline.store, request_id)
            if e["event"] == "transition"
        ]
        assert audited == [(t.from_status, t.to_status, t.actor) for t in stored.history]
        assert stored.status in ("refused", "rejected", "succeeded", "aborted")
