"""The Tempo simulator answers like real Tempo (checked with plain httpx)."""

import time

import httpx

from sandbox import TempoSimulator
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
