"""Values the pod, event, metric and log tools show are facts the grounding check finds:
an answer quoting them is grounded, with the tool as its source; one inventing them is not."""

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from gates.cluster import KubernetesCluster
from gates.config import ActionPolicy
from graph.grounding.check import ClaimCheck
from graph.grounding.evidence import Fact
from graph.grounding.guard import ground_draft
from graph.tools.loki import LokiClient, LokiSpec, loki_tools
from graph.tools.pods import kubernetes_read_tools
from graph.tools.prometheus import PrometheusClient, PrometheusSpec, prometheus_tools
from sandbox.kubernetes import KubernetesSimulator
from sandbox.loki import LokiSimulator
from sandbox.prometheus import PrometheusSimulator

KILLED_AT = 1_790_000_000  # 2026-09-21 14:13:20 UTC
TOLERANCE_S = 300


async def _facts(tool: BaseTool, **args: Any) -> list[Fact]:
    message = await tool.ainvoke({"type": "tool_call", "id": "1", "name": tool.name, "args": args})
    assert isinstance(message, ToolMessage)
    return list(message.artifact)


async def _checks(draft: str, facts: list[Fact]) -> dict[str, ClaimCheck]:
    _, checks = await ground_draft(draft, facts, None, TOLERANCE_S)
    return {c["text"]: c for c in checks}


@pytest.fixture
def pods_tools(cluster: KubernetesCluster) -> dict[str, BaseTool]:
    return {t.name: t for t in kubernetes_read_tools(cluster, ActionPolicy())}


@pytest.fixture
def crashing(kube: KubernetesSimulator) -> str:
    pods = kube.add_pods("shop", "payment-api", now=KILLED_AT + 600)
    name: str = pods[1]["metadata"]["name"]
    kube.crash_loop("shop", name, finished=KILLED_AT)
    kube.add_event(
        "shop", "Pod", name, "BackOff", "Back-off restarting", type="Warning", last=KILLED_AT + 60
    )
    return name


async def test_a_pod_its_node_version_and_oom_kill_time_from_the_pods_tool_are_grounded(
    pods_tools: dict[str, BaseTool], crashing: str
) -> None:
    facts = await _facts(
        pods_tools["get_workload_pods"], namespace="shop", deployment="payment-api"
    )
    checks = await _checks(
        f"Pod {crashing} on node node-b2 runs payment-api 1.42.0 and was OOM-killed at 14:13 UTC.",
        facts,
    )
    assert {text: c["status"] for text, c in checks.items()} == {
        crashing: "grounded",
        "node-b2": "grounded",
        "1.42.0": "grounded",
        "14:13 UTC": "grounded",
    }
    assert checks[crashing]["source"].startswith("get_workload_pods shop/payment-api")


async def test_an_invented_pod_node_and_time_are_not_grounded_by_the_pods_tool(
    pods_tools: dict[str, BaseTool], crashing: str
) -> None:
    facts = await _facts(
        pods_tools["get_workload_pods"], namespace="shop", deployment="payment-api"
    )
    checks = await _checks(
        "Pod payment-api-a9dfd1c984-zzzzz on node node-x9 was OOM-killed at 09:00 UTC.", facts
    )
    # no live source here: the pod could be looked up, so it is unchecked; nodes and times
    # have no source but the evidence, which contradicts them
    assert {text: c["status"] for text, c in checks.items()} == {
        "payment-api-a9dfd1c984-zzzzz": "unchecked",
        "node-x9": "ungrounded",
        "09:00 UTC": "ungrounded",
    }


async def test_an_events_time_is_grounded_by_the_events_tool(
    pods_tools: dict[str, BaseTool], crashing: str
) -> None:
    facts = await _facts(
        pods_tools["get_kubernetes_events"], namespace="shop", deployment="payment-api"
    )
    checks = await _checks(f"Pod {crashing} has been backing off since 14:14 UTC.", facts)
    assert checks["14:14 UTC"]["status"] == "grounded"
    assert checks[crashing]["source"].startswith("get_kubernetes_events shop/payment-api")


@pytest.fixture
async def prometheus() -> AsyncIterator[tuple[PrometheusSimulator, float]]:
    now = time.time()
    climb = (int(now) - 1200) // 15 * 15
    samples = [(float(t), 2e8 if t < climb else 5e8) for t in range(climb - 1800, int(now), 15)]
    async with PrometheusSimulator() as sim:
        labels = {"__name__": "container_memory_working_set_bytes", "pod": "payment-api-abc12"}
        sim.add(labels | {"namespace": "shop"}, samples)
        yield sim, float(climb)


async def test_a_pod_and_the_time_a_metric_changed_are_grounded_by_the_range_query(
    prometheus: tuple[PrometheusSimulator, float],
) -> None:
    sim, climb = prometheus
    client = PrometheusClient(PrometheusSpec(url=sim.url))
    tools = {t.name: t for t in prometheus_tools(client)}
    facts = await _facts(
        tools["query_prometheus_range"],
        promql="container_memory_working_set_bytes",
        since_minutes_ago=60,
    )
    await client.aclose()
    at = time.strftime("%H:%M UTC", time.gmtime(climb))
    checks = await _checks(f"Memory of pod payment-api-abc12 jumped at {at}.", facts)
    assert checks["payment-api-abc12"]["status"] == "grounded"
    assert checks[at]["status"] == "grounded"


async def test_a_pod_named_by_a_log_streams_labels_is_grounded_by_the_log_query() -> None:
    async with LokiSimulator() as sim:
        sim.add({"namespace": "shop", "pod": "payment-api-abc12"}, [(time.time() - 60, "boom")])
        client = LokiClient(LokiSpec(url=sim.url))
        (tool,) = loki_tools(client)
        facts = await _facts(tool, logql='{namespace="shop"}')
        await client.aclose()
    checks = await _checks(
        "Pod payment-api-abc12 logged boom; pod payment-api-zzz99 did not.", facts
    )
    assert checks["payment-api-abc12"]["status"] == "grounded"
    assert checks["payment-api-zzz99"]["status"] == "unchecked"  # no cluster to ask
