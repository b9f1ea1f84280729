"""The evidence of an eval world, gathered the way an investigation gathers it.

Each of the 16 scenarios in evals/scenarios is served by the simulators (evals/run.py's
`outside`), and the real tools read it: a TraceQL search for errors and one for everything,
the error traces and two others fetched, every Deployment's rollout history, the pods and
events of every Deployment, the previous log of a failing pod, every Prometheus metric and
Loki stream the scenario serves, and what the question, the thread and its alert said. The
facts those tools hand over are the evidence the grounding check reads in a turn.

Used by the property tests (tests/test_grounding_properties.py) and `make bench-grounding`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from evals import spec, world
from evals.run import outside
from gates.cluster import KubernetesCluster
from gates.config import ActionPolicy
from graph.config import TempoSpec
from graph.grounding.evidence import Fact
from graph.grounding.sources import LiveSources
from graph.runner import _said
from graph.tools.kubernetes import rollout_facts
from graph.tools.loki import LokiClient, LokiSpec, loki_tools
from graph.tools.pods import kubernetes_read_tools
from graph.tools.prometheus import PrometheusClient, PrometheusSpec, prometheus_tools
from graph.tools.tempo import TempoClient, tempo_tools
from graph.trace_ids import find_trace_ids

ERROR_TRACES = 6  # error traces fetched with get_trace
OTHER_TRACES = 2  # and traces that are not errors


@dataclass
class WorldEvidence:
    name: str
    namespace: str
    now: float
    facts: list[Fact] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # what the tools returned, as the model read it


def names() -> list[str]:
    return spec.names()


async def _call(tool: Any, args: dict[str, Any], seen: WorldEvidence) -> str:
    message = await tool.ainvoke({"type": "tool_call", "id": "w", "name": tool.name, "args": args})
    seen.texts.append(str(message.content))
    seen.facts += message.artifact or []
    return str(message.content)


@asynccontextmanager
async def opened(
    name: str, now: float | None = None
) -> AsyncIterator[tuple[WorldEvidence, LiveSources]]:
    """The world `name` served by the simulators, its evidence gathered, and the live
    sources (the simulated cluster and Tempo) open for look-ups until the block ends."""
    scenario = spec.load(name)
    now = time.time() if now is None else now
    async with outside(scenario, now, live=True) as out:
        tempo = TempoClient(TempoSpec(url=out.tempo.url))
        cluster = await KubernetesCluster.connect(str(out.kubeconfig), timeout_s=5.0)
        closers: list[Any] = [tempo]
        try:
            seen = WorldEvidence(name, scenario.namespace, now)
            await _gather(scenario, seen, tempo, cluster, out, closers)
            yield seen, LiveSources(cluster, tempo, [scenario.namespace])
        finally:
            for client in closers:
                await client.aclose()
            await cluster.close()


async def gather(name: str, now: float | None = None) -> WorldEvidence:
    async with opened(name, now) as (seen, _):
        return seen


async def _gather(
    scenario: spec.EvalScenario,
    seen: WorldEvidence,
    tempo: TempoClient,
    cluster: KubernetesCluster,
    out: Any,
    closers: list[Any],
) -> None:
    ns = scenario.namespace
    context = (
        world.thread_context(scenario, seen.now) if scenario.alert or scenario.recorded else None
    )
    seen.facts += _said(scenario.question, context)
    tools = {t.name: t for t in tempo_tools(tempo)}
    errors = await _call(
        tools["query_tempo_traces"],
        {"traceql": "{ status = error }", "since_minutes_ago": 90, "limit": 40},
        seen,
    )
    others = await _call(
        tools["query_tempo_traces"], {"traceql": "{ }", "since_minutes_ago": 90, "limit": 40}, seen
    )
    wanted = find_trace_ids(errors)[:ERROR_TRACES]
    wanted += [t for t in find_trace_ids(others) if t not in wanted][:OTHER_TRACES]
    for trace_id in wanted:
        await _call(tools["get_trace"], {"trace_id": trace_id}, seen)
    deployments = sorted(
        {d.name for d in scenario.recorded.deployments}
        if scenario.recorded
        else {s.name for s in scenario.services}
    )
    reads = {t.name: t for t in kubernetes_read_tools(cluster, ActionPolicy())}
    for name in deployments:
        snap = await cluster.snapshot(ns, name)
        source = f"get_rollout_history {ns}/{name}"
        seen.facts += rollout_facts(ns, name, snap, source)
        await _call(reads["get_workload_pods"], {"namespace": ns, "deployment": name}, seen)
    fault = scenario.fault.service if scenario.fault else None
    if fault:
        await _call(reads["get_kubernetes_events"], {"namespace": ns, "deployment": fault}, seen)
        pods = [
            f["value"]
            for f in seen.facts
            if f["kind"] == "pod" and f["value"].startswith(fault + "-")
        ]
        if pods:
            await _call(
                reads["get_pod_logs"],
                {
                    "namespace": ns,
                    "pod": pods[0],
                    "previous": bool(scenario.fault and scenario.fault.crash),
                },
                seen,
            )
    if out.prometheus is not None:
        prometheus = PrometheusClient(PrometheusSpec(url=out.prometheus.url))
        closers.append(prometheus)
        ranged = {t.name: t for t in prometheus_tools(prometheus)}["query_prometheus_range"]
        for metric in scenario.metrics:
            query = metric.labels.get("__name__", "")
            matchers = ",".join(f'{k}="{v}"' for k, v in metric.labels.items() if k != "__name__")
            await _call(ranged, {"promql": f"{query}{{{matchers}}}", "since_minutes_ago": 90}, seen)
    if out.loki is not None:
        loki = LokiClient(LokiSpec(url=out.loki.url))
        closers.append(loki)
        logs = {t.name: t for t in loki_tools(loki)}["query_loki_logs"]
        for stream in scenario.logs:
            selector = ",".join(f'{k}="{v}"' for k, v in stream.labels.items())
            await _call(logs, {"logql": f"{{{selector}}}", "since_minutes_ago": 90}, seen)
