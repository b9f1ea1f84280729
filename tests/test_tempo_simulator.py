"""The Tempo simulator answers like real Tempo (checked with plain httpx)."""

import base64
import time
from dataclasses import replace
from typing import Any

import httpx

from sandbox import TempoSimulator
from sandbox.kubernetes import KubernetesSimulator
from sandbox.scenarios import Scenario


async def test_v1_missing_trace_is_404_with_an_empty_body(tempo: TempoSimulator) -> None:
    async with httpx.AsyncClient(base_url=tempo.url) as http:
        response = await http.get("/api/traces/" + "ab" * 16)
    assert (response.status_code, response.content) == (404, b"")


async def test_v1_non_hex_id_is_400(tempo: TempoSimulator) -> None:
    async with httpx.AsyncClient(base_url=tempo.url) as http:
        response = await http.get("/api/traces/not-a-trace")
    assert response.status_code == 400


async def test_v1_found_trace_has_batches(tempo: TempoSimulator, scenario: Scenario) -> None:
    async with httpx.AsyncClient(base_url=tempo.url) as http:
        response = await http.get(f"/api/traces/{scenario.error_trace_ids[0]}")
    assert response.status_code == 200
    assert response.json()["batches"][0]["scopeSpans"][0]["spans"]


async def test_v2_missing_trace_is_200_with_an_empty_trace(tempo: TempoSimulator) -> None:
    async with httpx.AsyncClient(base_url=tempo.url) as http:
        response = await http.get("/api/v2/traces/" + "ab" * 16)
    assert (response.status_code, response.json()) == (200, {"trace": {}})


async def test_search_strips_leading_zeros_like_tempo(
    tempo: TempoSimulator, scenario: Scenario
) -> None:
    padded = scenario.traces[1].trace_id
    assert padded.startswith("00")
    async with httpx.AsyncClient(base_url=tempo.url) as http:
        found = (await http.get("/api/search", params={"q": "{}", "limit": 50})).json()
    ids = [t["traceID"] for t in found["traces"]]
    assert padded.lstrip("0") in ids and padded not in ids


async def test_search_filters_on_service_status_and_duration(tempo: TempoSimulator) -> None:
    query = '{ resource.service.name = "payment-api" && status = error && duration > 500ms }'
    async with httpx.AsyncClient(base_url=tempo.url) as http:
        found = (await http.get("/api/search", params={"q": query, "limit": 50})).json()
        healthy = '{ resource.service.name = "payment-api" && duration < 200ms }'
        fast = (await http.get("/api/search", params={"q": healthy, "limit": 50})).json()
    assert len(found["traces"]) == 8  # two of three of the twelve checkouts fail
    assert len(fast["traces"]) == 4


async def test_search_honours_the_time_window(tempo: TempoSimulator) -> None:
    long_ago = int(time.time()) - 7 * 24 * 3600
    params = {"q": "{}", "start": long_ago, "end": long_ago + 3600}
    async with httpx.AsyncClient(base_url=tempo.url) as http:
        found = (await http.get("/api/search", params=params)).json()
    assert found["traces"] == []


async def test_unsupported_traceql_is_400_with_the_reason(tempo: TempoSimulator) -> None:
    async with httpx.AsyncClient(base_url=tempo.url) as http:
        response = await http.get(
            "/api/search", params={"q": "{ status = error || duration > 1s }"}
        )
    assert response.status_code == 400
    assert "only &&" in response.text


async def test_tenant_header_is_enforced_when_configured(scenario: Scenario) -> None:
    async with (
        TempoSimulator(traces=scenario.traces, tenant="acme") as tempo,
        httpx.AsyncClient(base_url=tempo.url) as http,
    ):
        without = await http.get("/api/search")
        wrong = await http.get("/api/search", headers={"X-Scope-OrgID": "other"})
        right = await http.get("/api/search", headers={"X-Scope-OrgID": "acme"})
    assert [without.status_code, wrong.status_code, right.status_code] == [401, 401, 200]


async def test_injected_status_answers_every_request(tempo: TempoSimulator) -> None:
    tempo.faults.status = 503
    async with httpx.AsyncClient(base_url=tempo.url) as http:
        response = await http.get("/api/search")
    assert response.status_code == 503


async def _resource_spans(tempo: TempoSimulator, trace_ids: list[str]) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=tempo.url) as http:
        documents = [(await http.get(f"/api/v2/traces/{t}")).json() for t in trace_ids]
    return [rs for d in documents for rs in d["trace"]["resourceSpans"]]


def _values(attributes: list[dict[str, Any]]) -> dict[str, str]:
    return {a["key"]: next(iter(a["value"].values())) for a in attributes}


async def test_version_and_workload_are_on_the_resource_never_on_spans(
    tempo: TempoSimulator, scenario: Scenario
) -> None:
    batches = await _resource_spans(tempo, scenario.error_trace_ids[:1])
    payment = next(
        rs
        for rs in batches
        if _values(rs["resource"]["attributes"])["service.name"] == "payment-api"
    )
    resource = _values(payment["resource"]["attributes"])
    assert resource["service.version"] == "1.42.0"
    assert {"k8s.namespace.name", "k8s.deployment.name", "k8s.replicaset.name", "k8s.pod.name"} <= (
        resource.keys()
    )
    span_keys = {
        a["key"] for rs in batches for s in rs["scopeSpans"][0]["spans"] for a in s["attributes"]
    }
    assert not {k for k in span_keys if k.startswith(("service.", "k8s."))}


async def test_each_pod_is_its_own_resource_and_only_pods_of_1_42_0_send_errors(
    tempo: TempoSimulator, scenario: Scenario
) -> None:
    batches = await _resource_spans(tempo, [t.trace_id for t in scenario.traces])
    pods: dict[str, set[str]] = {}  # pod -> status codes of its payment-api spans
    versions: dict[str, str] = {}
    for rs in batches:
        resource = _values(rs["resource"]["attributes"])
        if resource["service.name"] == "payment-api":
            pod = resource["k8s.pod.name"]
            versions[pod] = resource["service.version"]
            pods.setdefault(pod, set()).update(
                s["status"]["code"] for s in rs["scopeSpans"][0]["spans"]
            )
    erring = {versions[p] for p, codes in pods.items() if "STATUS_CODE_ERROR" in codes}
    assert len(pods) == 3 and set(versions.values()) == {"1.42.0", "1.41.3"}
    assert erring == {"1.42.0"}


async def test_ids_are_base64_as_tempo_renders_them(
    tempo: TempoSimulator, scenario: Scenario
) -> None:
    trace = scenario.error_trace_ids[0]
    batches = await _resource_spans(tempo, [trace])
    spans = [s for rs in batches for s in rs["scopeSpans"][0]["spans"]]
    assert {base64.b64decode(s["traceId"]).hex() for s in spans} == {trace}
    assert all(len(base64.b64decode(s["spanId"])) == 8 for s in spans)
    assert sum("parentSpanId" not in s for s in spans) == 1


async def test_search_reads_resource_attributes_only_in_the_resource_scope(
    tempo: TempoSimulator,
) -> None:
    queries = {
        "resource": '{ resource.service.version = "1.42.0" && status = error }',
        "unscoped": '{ .service.version = "1.42.0" && status = error }',
        "span": '{ span.service.version = "1.42.0" }',
    }
    async with httpx.AsyncClient(base_url=tempo.url) as http:
        found = {
            scope: len(
                (await http.get("/api/search", params={"q": q, "limit": 50})).json()["traces"]
            )
            for scope, q in queries.items()
        }
    assert found == {"resource": 8, "unscoped": 8, "span": 0}


async def test_the_replicasets_in_traces_are_those_the_cluster_simulator_names(
    tempo: TempoSimulator, scenario: Scenario
) -> None:
    cluster = KubernetesSimulator()
    images = [f"registry/payment-api:{v}" for v in ("1.40.2", "1.41.3", "1.42.0")]
    cluster.add_deployment("shop", "payment-api", images, replicas=4, first_revision=40)
    batches = await _resource_spans(tempo, [t.trace_id for t in scenario.traces])
    in_traces = {
        resource["k8s.replicaset.name"]
        for resource in (_values(rs["resource"]["attributes"]) for rs in batches)
        if resource["service.name"] == "payment-api"
    }
    assert in_traces and in_traces <= {name for _, name in cluster.replicasets}


async def test_search_names_a_trace_whose_root_is_missing_as_tempo_does(
    tempo: TempoSimulator, scenario: Scenario
) -> None:
    whole = scenario.traces[0]
    tempo.add(replace(whole, trace_id="ab" * 16, spans=whole.spans[1:]))  # root not yet received
    async with httpx.AsyncClient(base_url=tempo.url) as http:
        found = (await http.get("/api/search", params={"q": "{}", "limit": 50})).json()
    partial = next(t for t in found["traces"] if t["traceID"] == "ab" * 16)
    assert partial["rootServiceName"] == "<root span not yet received>"
    assert "rootTraceName" not in partial
