"""The grounding check in the graph: a draft's facts against what the turn's tools showed.

Real ChatGoogleGenerativeAI, httpx and kubernetes_asyncio against the simulators, real Redis.
"""

import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from bot.outbound.blocks import how_it_was_reached
from gates.pipeline import ActionPipeline
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.context import AlertHint, ThreadContext
from graph.runner import Investigator, open_investigator
from sandbox import GeminiSimulator, Reply
from sandbox.kubernetes import KubernetesSimulator
from sandbox.scenarios import PAYMENT_PODS_NEW, Scenario
from tests.shared_redis import PREFIX

# A time no evidence is near: the simulators' rollouts and traces are all in the past.
AT = time.strftime("%H:%M", time.gmtime(time.time() + 1800))
INVENTED = (
    f"deployment payment-api rolled out v9.9.9-invented (revision 17) at {AT}; pod "
    "payment-api-5c6d7e8f9-qqqqq returns 503 to checkout."
)
POD = PAYMENT_PODS_NEW[0].pod or ""


def real_values() -> str:
    return (
        f"deployment payment-api rolled out v1.42.0 (revision 3); pod {POD} returns 503 "
        "to checkout."
    )


@pytest.fixture
async def opened(
    model_spec: ModelSpec,
    tempo_spec: TempoSpec,
    redis_client: aioredis.Redis,
    pipeline: ActionPipeline,
) -> AsyncIterator[dict[str, Investigator]]:
    """An investigator per GROUNDING_MODE, both reading the cluster through the pipeline."""
    async with (
        open_investigator(
            model_spec, tempo_spec, GraphLimits(), redis_client, prefix=PREFIX, actions=pipeline
        ) as remove,
        open_investigator(
            model_spec,
            tempo_spec,
            GraphLimits(grounding_mode="mark", grounding_max_revisions=0),
            redis_client,
            prefix=PREFIX,
            actions=pipeline,
        ) as mark,
    ):
        yield {"remove": remove, "mark": mark}


def removed_total() -> float:
    return REGISTRY.get_sample_value("tracegate_grounding_removed_total") or 0.0


def looked(scenario: Scenario) -> tuple[Reply, ...]:
    """The agent reads a failing trace and payment-api's rollout history."""
    return (
        Reply.call("get_trace", trace_id=scenario.error_trace_ids[0]),
        Reply.call("get_rollout_history", namespace="shop", deployment="payment-api"),
    )


async def test_invented_facts_are_sent_back_then_removed_never_posted(
    opened: dict[str, Investigator], gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> None:
    gemini.script(*looked(scenario), *[Reply.text(INVENTED)] * 3)
    before = removed_total()
    result = await opened["remove"].investigate(thread_id, "why 503s?", "U1")

    for invented in ("9.9.9", "revision 17", "qqqqq", AT):
        assert invented not in result.answer
    assert (
        "1 sentence was removed for stating a version, a revision, a time and a pod"
        in result.answer
    )
    assert (result.grounding_revisions, result.facts_removed) == (2, 4)
    assert removed_total() - before == 4  # /metrics: tracegate_grounding_removed_total
    feedback = gemini.requests[3].text()
    assert "[grounding check]" in feedback
    assert f"pod 'payment-api-5c6d7e8f9-qqqqq': the evidence holds {POD}" in feedback
    assert "revision '17': payment-api's revisions are 1, 2, 3\n" in feedback


async def test_the_same_answer_with_real_values_is_posted_unchanged(
    opened: dict[str, Investigator], gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> None:
    gemini.script(*looked(scenario), Reply.text(real_values()))
    result = await opened["remove"].investigate(thread_id, "why 503s?", "U1")

    assert result.answer == real_values()
    assert (result.facts_checked, result.facts_grounded, result.grounding_revisions) == (4, 4, 0)
    assert "facts: 4 checked, 4 grounded, 0 unchecked" in how_it_was_reached(result)


async def test_a_corrected_draft_is_posted_after_one_revision(
    opened: dict[str, Investigator], gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> None:
    gemini.script(*looked(scenario), Reply.text(INVENTED), Reply.text(real_values()))
    result = await opened["remove"].investigate(thread_id, "why 503s?", "U1")

    assert result.answer == real_values()
    assert result.grounding_revisions == 1
    assert "1 draft sent back" in how_it_was_reached(result)


async def test_mark_mode_keeps_the_sentence_and_marks_each_fact_unverified(
    opened: dict[str, Investigator], gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> None:
    gemini.script(*looked(scenario), Reply.text(INVENTED))
    result = await opened["mark"].investigate(thread_id, "why 503s?", "U1")

    assert result.answer.startswith(
        "deployment payment-api rolled out v9.9.9-invented _(unverified)_ (revision 17 "
        f"_(unverified)_) at {AT} _(unverified)_; pod payment-api-5c6d7e8f9-qqqqq _(unverified)_"
    )
    assert "4 facts marked _unverified_" in result.answer
    footer = how_it_was_reached(result)
    assert "4 marked unverified" in footer
    assert "verified," not in footer.replace("unverified,", "")  # nothing called verified


async def test_a_cluster_that_cannot_be_read_leaves_the_fact_unchecked_not_grounded(
    opened: dict[str, Investigator],
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    kube.faults.status = 503
    gemini.script(
        Reply.call("get_trace", trace_id=scenario.error_trace_ids[0]),
        Reply.text("Deployment inventory-api calls payment-api too."),
    )
    result = await opened["remove"].investigate(thread_id, "who else is hit?", "U1")

    assert result.answer.startswith("Deployment inventory-api _(unchecked)_ calls")
    assert (result.facts_unchecked, result.facts_removed) == (1, 0)
    footer = how_it_was_reached(result)
    assert "traces: 0 found in Tempo" in footer and "1 unchecked" in footer


async def test_facts_seen_in_an_earlier_turn_ground_a_later_one(
    opened: dict[str, Investigator], gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> None:
    gemini.script(*looked(scenario), Reply.text(f"pod {POD} fails."))
    await opened["remove"].investigate(thread_id, "why?", "U1")
    gemini.script(Reply.text(f"As before: pod {POD} runs 1.42.0, revision 3."))
    result = await opened["remove"].investigate(thread_id, "which pod again?", "U1")

    assert result.answer == f"As before: pod {POD} runs 1.42.0, revision 3."
    assert len(gemini.requests) == 4  # no tool call in turn 2, and no revision


async def test_what_the_thread_and_its_alert_say_is_evidence(
    opened: dict[str, Investigator], gemini: GeminiSimulator, thread_id: str
) -> None:
    alert = AlertHint(
        source="alertmanager",
        status="firing",
        alertname="High5xx",
        labels={"service": "payment-api", "pod": "payment-api-7f9c8d6b54-x2x2x"},
    )
    gemini.script(Reply.text("The alert names pod payment-api-7f9c8d6b54-x2x2x."))
    result = await opened["remove"].investigate(
        thread_id, "what is this alert?", "U1", context=ThreadContext(alerts=[alert])
    )

    assert result.answer == "The alert names pod payment-api-7f9c8d6b54-x2x2x."
