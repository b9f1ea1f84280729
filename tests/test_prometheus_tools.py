"""The Prometheus tools, through the real httpx client against the Prometheus simulator."""

import json
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from graph.grounding.evidence import parse_iso
from graph.tools import ToolFailed
from graph.tools.prometheus import (
    MAX_LABEL_VALUES,
    MAX_SERIES_LISTED,
    PrometheusClient,
    PrometheusSpec,
    prometheus_tools,
)
from sandbox.prometheus import PrometheusSimulator

MEMORY = "container_memory_working_set_bytes"


def _memory(climb_at: float, high: float) -> list[tuple[float, float]]:
    """200 MB until `climb_at`, then `high`, a sample every 15 s over the last two hours
    (of the test's own clock: a module-level "now" goes stale in a long run)."""
    now = time.time()
    start = int(now - 7200) // 15 * 15
    return [(float(t), 2e8 if t < climb_at else high) for t in range(start, int(now), 15)]


@pytest.fixture
async def prometheus() -> AsyncIterator[PrometheusSimulator]:
    async with PrometheusSimulator() as sim:
        for pod, high in (("payment-api-7f9c-abcde", 5.1e8), ("payment-api-7f9c-fghij", 3e8)):
            labels = {"__name__": MEMORY, "namespace": "shop", "pod": pod, "container": "api"}
            sim.add(labels, _memory(time.time() - 1200, high))
        yield sim


@pytest.fixture
async def tools(prometheus: PrometheusSimulator) -> AsyncIterator[dict[str, BaseTool]]:
    client = PrometheusClient(PrometheusSpec(url=prometheus.url, timeout_s=2))
    yield {t.name: t for t in prometheus_tools(client)}
    await client.aclose()


async def _call(tool: BaseTool, **args: Any) -> ToolMessage:
    message = await tool.ainvoke({"type": "tool_call", "id": "1", "name": tool.name, "args": args})
    assert isinstance(message, ToolMessage)
    return message


async def test_a_range_query_summarises_each_series_and_when_it_changed(
    tools: dict[str, BaseTool],
) -> None:
    result = await tools["query_prometheus_range"].ainvoke(
        {"promql": f'{MEMORY}{{namespace="shop"}}', "since_minutes_ago": 60}
    )
    lines = result.splitlines()
    assert lines[0].startswith(f'2 series for {MEMORY}{{namespace="shop"}} from ')
    assert lines[2].startswith(
        f'- {MEMORY}{{container="api", namespace="shop", pod="payment-api-7f9c-abcde"}}'
    )
    assert "last 510M at " in lines[2]
    assert "min 200M, max 510M" in lines[2]
    assert "changed most between" in lines[2] and "(200M → 510M)" in lines[2]


async def test_a_range_query_without_a_window_starts_15_minutes_before_the_alert(
    tools: dict[str, BaseTool], prometheus: PrometheusSimulator
) -> None:
    await tools["query_prometheus_range"].ainvoke(
        {"promql": MEMORY, "incident_start": time.time() - 30 * 60 + 5}
    )
    await tools["query_prometheus_range"].ainvoke({"promql": MEMORY})
    (_, anchored), (_, default) = prometheus.requests
    assert round(float(anchored["end"]) - float(anchored["start"])) == 45 * 60
    assert round(float(default["end"]) - float(default["start"])) == 60 * 60


async def test_an_instant_query_lists_the_highest_values_first(
    tools: dict[str, BaseTool],
) -> None:
    result = await tools["query_prometheus"].ainvoke({"promql": f"max by (pod) ({MEMORY})"})
    series = [line for line in result.splitlines() if line.startswith("- ")]
    assert series[0].startswith('- {pod="payment-api-7f9c-abcde"}: 510M at ')
    assert series[1].startswith('- {pod="payment-api-7f9c-fghij"}: 300M at ')


async def test_many_series_are_summarised_within_bounds(
    tools: dict[str, BaseTool], prometheus: PrometheusSimulator
) -> None:
    for i in range(300):
        prometheus.add(
            {"__name__": "up", "instance": f"host-{i}:9100" + "x" * 200}, [(time.time() - 30, 1)]
        )
    result = await tools["query_prometheus"].ainvoke({"promql": "up"})
    assert result.startswith("300 series for up at ")
    assert f"- … and {300 - MAX_SERIES_LISTED} more series" in result
    assert len(result) < 3000


async def test_no_series_is_an_empty_answer_not_a_failure(tools: dict[str, BaseTool]) -> None:
    result = await tools["query_prometheus"].ainvoke({"promql": 'up{job="none"}'})
    assert result.startswith('No series match up{job="none"} at ')


async def test_a_promql_syntax_error_comes_back_in_prometheus_words(
    tools: dict[str, BaseTool],
) -> None:
    with pytest.raises(ToolFailed) as err:
        await tools["query_prometheus"].ainvoke({"promql": 'rate(up{job="x"}[5m]'})
    assert str(err.value).startswith(
        'Prometheus rejected the query: invalid parameter "query": 1:21: parse error: '
    )
    assert "(bad_data). Fix the PromQL" in str(err.value)
    assert not err.value.retryable


async def test_an_expression_that_cannot_run_comes_back_as_an_execution_error(
    tools: dict[str, BaseTool], prometheus: PrometheusSimulator
) -> None:
    for name in ("a_total", "b_total"):
        prometheus.add(
            {"__name__": name, "job": "x"}, [(time.time() - 60, 1), (time.time() - 30, 2)]
        )
    with pytest.raises(ToolFailed, match=r"same labelset \(execution\)"):
        await tools["query_prometheus"].ainvoke({"promql": 'rate({__name__=~".+_total"}[5m])'})


async def test_prometheus_failing_fails_the_tool_as_retryable(
    tools: dict[str, BaseTool], prometheus: PrometheusSimulator
) -> None:
    prometheus.faults.timeout = True
    with pytest.raises(
        ToolFailed, match=r"^Prometheus is unavailable \(HTTP 503: query timed out"
    ) as err:
        await tools["query_prometheus_range"].ainvoke({"promql": MEMORY})
    assert err.value.retryable


# Valid JSON, a successful status, and data that is not what Prometheus sends.
GARBAGE = [
    '{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}}',
    '{"status": "success", "data": {"resultType": "matrix", "result": [{"values": [["x", 1]]}]}}',
    '{"status": "success", "data": {"resultType": "vector", "result": ["not a series"]}}',
    '{"status": "success", "data": {"resultType": "scalar", "result": [1, "one"]}}',
    '{"status": "success", "data": ["not", "an", "object"]}',
    '{"status": "success", "data": {"resultType": "vector", "result": [{"value": 1}]}}',
]


@pytest.mark.parametrize("body", GARBAGE)
@pytest.mark.parametrize("name", ["query_prometheus", "query_prometheus_range"])
async def test_an_answer_of_another_shape_fails_the_tool_as_retryable(
    tools: dict[str, BaseTool], prometheus: PrometheusSimulator, name: str, body: str
) -> None:
    prometheus.faults.body = body
    with pytest.raises(
        ToolFailed, match=r"^Prometheus is unavailable \(an answer of an unknown shape"
    ) as err:
        await tools[name].ainvoke({"promql": MEMORY})
    assert err.value.retryable


async def test_prometheus_gone_fails_the_tool(
    tools: dict[str, BaseTool], prometheus: PrometheusSimulator
) -> None:
    await prometheus.stop()
    with pytest.raises(ToolFailed, match=r"^Prometheus is unavailable \(ConnectError"):
        await tools["query_prometheus"].ainvoke({"promql": MEMORY})


async def test_label_values_are_listed_within_bounds(
    tools: dict[str, BaseTool], prometheus: PrometheusSimulator
) -> None:
    for i in range(80):
        prometheus.add({"__name__": "up", "pod": f"pod-{i:02d}"}, [(time.time() - 30, 1)])
    result = await tools["list_prometheus_label_values"].ainvoke({"label": "pod", "match": "up"})
    assert result.startswith('80 values of pod of series matching up: "pod-00", ')
    assert f"… and {80 - MAX_LABEL_VALUES} more" in result


async def test_a_bad_label_name_is_refused_without_asking(
    tools: dict[str, BaseTool], prometheus: PrometheusSimulator
) -> None:
    result = await tools["list_prometheus_label_values"].ainvoke({"label": "../admin"})
    assert result == '"../admin" is not a label name (letters, digits and _).'
    assert prometheus.requests == []


async def test_the_tenant_is_sent_as_x_scope_orgid(prometheus: PrometheusSimulator) -> None:
    prometheus.tenant = "acme"
    client = PrometheusClient(PrometheusSpec(url=prometheus.url, tenant="acme"))
    (tool, *_) = prometheus_tools(client)
    result = await tool.ainvoke({"promql": MEMORY})
    await client.aclose()
    assert result.startswith("2 series")


async def test_series_hand_over_the_pods_they_name_and_when_they_changed(
    tools: dict[str, BaseTool],
) -> None:
    message = await _call(tools["query_prometheus_range"], promql=MEMORY, since_minutes_ago=60)
    held = {(f["kind"], f["value"]) for f in message.artifact}
    assert ("pod", "payment-api-7f9c-abcde") in held
    assert ("namespace", "shop") in held
    assert any(kind == "time" for kind, _ in held)


async def test_the_times_handed_over_are_when_values_changed_never_the_windows_edges(
    tools: dict[str, BaseTool], prometheus: PrometheusSimulator
) -> None:
    # both series step up 20 minutes ago (a sample every 15 s); the window is the last hour
    message = await _call(tools["query_prometheus_range"], promql=MEMORY, since_minutes_ago=60)
    times = [parse_iso(f["value"]) for f in message.artifact if f["kind"] == "time"]
    climb = time.time() - 1200
    assert times and all(t is not None and abs(t - climb) <= 120 for t in times), times


async def test_a_query_links_to_itself_in_grafana_explore(prometheus: PrometheusSimulator) -> None:
    spec = PrometheusSpec(url=prometheus.url, grafana_url="https://grafana.example.com")
    client = PrometheusClient(spec)
    tools = {t.name: t for t in prometheus_tools(client)}
    message = await _call(tools["query_prometheus_range"], promql=MEMORY, since_minutes_ago=60)
    await client.aclose()
    (cited,) = [f for f in message.artifact if f["kind"] == "cite"]
    assert cited["where"].startswith("https://grafana.example.com/explore?")
    pane = json.loads(unquote(cited["where"].partition("panes=")[2]))
    assert pane["a"]["queries"][0]["expr"] == MEMORY
    assert pane["a"]["queries"][0]["datasource"] == {"type": "prometheus", "uid": "prometheus"}


# --- the simulator answers as strictly as Prometheus ---------------------------------
@pytest.mark.parametrize(
    ("params", "status", "error"),
    [
        ({"query": "up", "start": "1", "end": "2"}, 400, 'invalid parameter "step"'),
        ({"query": "up", "start": "2", "end": "1", "step": "1"}, 400, "end timestamp must not"),
        ({"query": "up", "start": "0", "end": "100000", "step": "1"}, 400, "11,000 points"),
        ({"query": "up[5m]", "start": "1", "end": "2", "step": "1"}, 400, '"range vector"'),
        ({"query": '{job=""}', "start": "1", "end": "2", "step": "1"}, 400, "non-empty matcher"),
        ({"query": "up > 1", "start": "1", "end": "2", "step": "1"}, 400, "parse error"),
    ],
)
async def test_the_simulator_refuses_a_bad_range_query_as_prometheus_does(
    prometheus: PrometheusSimulator, params: dict[str, str], status: int, error: str
) -> None:
    async with httpx.AsyncClient() as http:
        got = await http.post(f"{prometheus.url}/api/v1/query_range", data=params)
    body = got.json()
    assert got.status_code == status
    assert body["status"] == "error" and body["errorType"] == "bad_data"
    assert error in body["error"]
