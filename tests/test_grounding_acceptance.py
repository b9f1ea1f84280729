"""The grounding check end to end: real `tracegate serve` and `worker` processes, the Slack,
Gemini, Tempo and Kubernetes simulators. A true answer written the ways models write facts
(semver pre-release and build parts, a tag-only image, a bare node name, a time in PT, a pod
suffix in a code span) is posted unchanged; the same answer with each fact invented is not
posted as fact."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from sandbox import GeminiSimulator, Reply, SimSpan, SimTrace
from sandbox.fleet import Fleet
from sandbox.kubernetes import KubernetesSimulator, write_kubeconfig
from sandbox.scenarios import Scenario
from sandbox.slack import SlackMessage, SlackSimulator
from sandbox.traces import SimResource
from tests.fleet_fixtures import ask, serving

TRACE_ID = "5b8efff798038103d269b633813fc60c"
NODE = "gke-prod-pool-1-a1b2c3d4-x9zq"
NOW = time.time()
DEPLOYED = NOW - 2 * 3600  # revision 2 of payment-api (image :42)
VERSIONS = {"payment-api": "1.42.0-RESVER", "checkout": "1.42.0-rc1", "ledger": "1.42.0+build.7"}


@pytest.fixture
async def kube() -> AsyncIterator[KubernetesSimulator]:
    async with KubernetesSimulator() as sim:
        images = ["registry/payment-api:41", "registry/payment-api:42"]
        sim.add_deployment("shop", "payment-api", images, created_at=[NOW - 30 * 3600, DEPLOYED])
        sim.add_pods("shop", "payment-api", 2, nodes=(NODE,))
        yield sim


def _failing_pod(kube: KubernetesSimulator) -> str:
    return sorted(name for (_, name) in kube.pods if name.startswith("payment-api-"))[0]


@pytest.fixture
def scenario(kube: KubernetesSimulator) -> Scenario:
    """One failing checkout: checkout → payment-api (on the failing pod) → ledger."""
    pod = _failing_pod(kube)
    start = int((NOW - 600) * 1e9)

    def resource(service: str, **k8s: str) -> SimResource:
        return SimResource(service, VERSIONS[service], "production", "shop", **k8s)

    payment = resource(
        "payment-api",
        deployment="payment-api",
        replicaset=pod.rsplit("-", 1)[0],
        pod=pod,
        node=NODE,
    )
    spans = (
        SimSpan("a1" * 8, resource("checkout"), "POST /checkout", start, 900_000_000,
                status="error", status_message="payment failed"),
        SimSpan("b2" * 8, payment, "POST /v1/charge", start + 10**7, 800_000_000,
                parent_id="a1" * 8, status="error", status_message="ledger write failed"),
        SimSpan("c3" * 8, resource("ledger"), "INSERT entries", start + 2 * 10**7, 700_000_000,
                parent_id="b2" * 8, status="error", status_message="constraint violated"),
    )  # fmt: skip
    return Scenario("forms", (SimTrace(TRACE_ID, spans),))


def _pt(at: float) -> str:
    return datetime.fromtimestamp(at, ZoneInfo("America/Los_Angeles")).strftime("%-I:%M %p PT")


def _answer(kube: KubernetesSimulator, shift: dict[str, str] | None = None) -> list[str]:
    """The answer's sentences, each stating one fact; `shift` replaces values by others."""
    pod = _failing_pod(kube)
    values = {
        "payment": VERSIONS["payment-api"],
        "checkout": VERSIONS["checkout"],
        "ledger": VERSIONS["ledger"],
        "tag": ":42",
        "node": NODE,
        "suffix": pod.rsplit("-", 1)[1],
        "time": _pt(DEPLOYED),
        **(shift or {}),
    }
    return [
        f"payment-api serves {values['payment']} in trace {TRACE_ID}.",
        f"checkout runs {values['checkout']}.",
        f"ledger runs {values['ledger']}.",
        f"Revision 2 of payment-api (image {values['tag']}) is current.",
        f"The failing pods sit on {values['node']}.",
        f"The failing pod is `{values['suffix']}`.",
        f"Revision 2 rolled out at {values['time']}.",
    ]


INVENTED = {
    "payment": "1.42.0-RESVES",
    "checkout": "1.42.0-rc2",
    "ledger": "1.42.0+build.8",
    "tag": ":43",
    "node": "gke-prod-pool-1-a1b2c3d4-x9zr",
    "time": _pt(DEPLOYED + 2 * 3600),
}


def _script(gemini: GeminiSimulator, answer: str) -> None:
    gemini.script(
        Reply.call("get_trace", trace_id=TRACE_ID),
        Reply.call("get_rollout_history", namespace="shop", deployment="payment-api"),
        Reply.call("get_workload_pods", namespace="shop", deployment="payment-api"),
        Reply.text(answer),
    )


@pytest.fixture
def fleet(fleet_for: Callable[..., Fleet], kube: KubernetesSimulator, tmp_path: Path) -> Fleet:
    return fleet_for(
        KUBECONFIG=str(write_kubeconfig(tmp_path / "kubeconfig", kube.url)),
        GROUNDING_MAX_REVISIONS="0",  # what is still ungrounded is removed at once
        GROUNDING_MODE="remove",
    )


async def _final_answer(slack: SlackSimulator, root: str, fleet: Fleet) -> SlackMessage:
    """The answer once it carries its footer (the grounding check's counts)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for message in slack.thread("C1", root):
            if any("facts:" in str(b) for b in message.blocks):
                return message
        await asyncio.sleep(0.1)
    raise AssertionError(f"no answer within 60 s\n{fleet.logs()}")


async def test_true_facts_in_the_forms_models_write_are_posted_unchanged(
    fleet: Fleet, slack: SlackSimulator, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    sentences = _answer(kube)
    _script(gemini, " ".join(sentences))
    serve = await serving(fleet)
    fleet.worker()
    root = await ask(slack, serve, "checkout fails, why?")
    answer = await _final_answer(slack, root, fleet)
    for sentence in sentences:
        assert sentence in answer.text, (sentence, answer.text)
    assert "unverified" not in answer.text and "unchecked" not in answer.text
    checked = re.search(r"facts: (\d+) checked, (\d+) grounded", str(answer.blocks))
    assert checked and checked[1] == checked[2], answer.blocks


async def test_each_fact_invented_in_those_forms_is_not_posted_as_fact(
    fleet: Fleet, slack: SlackSimulator, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    suffix = _failing_pod(kube).rsplit("-", 1)[1]
    invented = {**INVENTED, "suffix": suffix[:-1] + ("b" if suffix[-1] != "b" else "c")}
    _script(gemini, " ".join(_answer(kube, invented)))
    serve = await serving(fleet)
    fleet.worker()
    root = await ask(slack, serve, "checkout fails, why?")
    text = (await _final_answer(slack, root, fleet)).text
    for what, value in invented.items():
        at = text.find(value)
        stated = at >= 0 and "_(un" not in text[at : at + len(value) + 20]
        assert not stated, f"invented {what} {value!r} was posted as fact: {text}"
