"""The agent reads rollout history and proposes actions; it can never execute them."""

from gates.pipeline import ActionPipeline
from graph.runner import Investigator
from sandbox import GeminiSimulator, Reply
from sandbox.kubernetes import KubernetesSimulator
from sandbox.scenarios import Scenario
from tests.gates_fixtures import SAFE
from tests.proposals import propose


async def test_rollout_history_is_shown_to_the_model(
    agent: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(
        Reply.call("get_rollout_history", namespace="shop", deployment="payment-api"),
        Reply.text("revision 3 went out an hour ago"),
    )
    await agent.investigate(thread_id, "what changed?", "U1")
    shown = gemini.requests[1].text()
    assert "shop/payment-api: 4/4 replicas ready, current revision 3" in shown
    assert "- 2: registry/payment-api:1.41.3 — deploy 1.41.3" in shown


async def test_a_proposal_reaches_approval_and_is_reported_plainly(
    agent: Investigator,
    gemini: GeminiSimulator,
    scenario: Scenario,
    kube: KubernetesSimulator,
    pipeline: ActionPipeline,
    thread_id: str,
) -> None:
    evidence = scenario.error_trace_ids[0]
    gemini.script(
        Reply.call("get_trace", trace_id=evidence),
        propose("rollout_undo", reason=f"NullPointerException since 1.42.0, e.g. {evidence}"),
    )
    gemini.script(SAFE, Reply.text(f"Rollback proposed; evidence {evidence}."))  # judge, agent
    result = await agent.investigate(thread_id, "fix checkout", "U_ONCALL")

    (request_id,) = result.action_request_ids
    request = await pipeline.store.get(request_id)
    told = gemini.requests[-1].text()
    assert f"Proposed as {request_id}, awaiting human approval" in told
    assert (request.status, request.requester, request.thread_key) == (
        "pending_approval",
        "U_ONCALL",
        thread_id,
    )
    assert request.evidence == [evidence]
    assert kube.writes == []  # proposing never executes


async def test_a_refused_proposal_tells_the_model_which_gate_and_why(
    agent: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(
        propose("scale", replicas=0, reason="stop the bleeding"),
        Reply.text("I could not scale it down."),
    )
    await agent.investigate(thread_id, "turn it off", "U1")
    assert "Refused by blast_radius: scaling to 0" in gemini.requests[1].text()


async def test_a_kubernetes_api_failure_fails_the_tool_call_and_tells_the_model_why(
    agent: Investigator, gemini: GeminiSimulator, kube: KubernetesSimulator, thread_id: str
) -> None:
    kube.faults.status = 503
    gemini.script(
        Reply.call("get_rollout_history", namespace="shop", deployment="payment-api"),
        Reply.text("I could not read the rollout history."),
    )
    result = await agent.investigate(thread_id, "what changed?", "U1")

    (finished,) = [e for e in result.events if e["type"] == "tool_finished"]
    assert (finished["status"], finished["outcome"]) == ("error", "failed")
    shown = gemini.requests[1].text()
    assert "The Kubernetes API could not be read for shop/payment-api" in shown
    assert "The same call may work if retried later." in shown
    assert "Traceback" not in shown
    assert any("Failed this turn: get_rollout_history" in n for n in result.notices)
