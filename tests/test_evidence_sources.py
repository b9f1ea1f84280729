"""Prometheus and Loki are optional: configured, their tools are offered; failing mid-turn,
a call is a failed tool call like Tempo's; the start-up line says which sources are on."""

import logging
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from bot.process.logs import log_startup
from bot.process.settings import Settings, SettingsError, load_settings
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.runner import open_investigator
from graph.tools.loki import LokiSpec
from graph.tools.prometheus import PrometheusSpec
from sandbox import GeminiSimulator, Reply
from sandbox.loki import LokiSimulator
from sandbox.prometheus import PrometheusSimulator
from tests.shared_redis import PREFIX

EVIDENCE_TOOLS = {"query_prometheus", "query_prometheus_range", "query_loki_logs"}


@pytest.fixture
async def prometheus() -> AsyncIterator[PrometheusSimulator]:
    async with PrometheusSimulator() as sim:
        yield sim


@pytest.fixture
async def loki() -> AsyncIterator[LokiSimulator]:
    async with LokiSimulator() as sim:
        yield sim


async def test_configured_sources_offer_their_tools_and_unconfigured_ones_do_not(
    model_spec: ModelSpec,
    tempo_spec: TempoSpec,
    redis_client: aioredis.Redis,
    gemini: GeminiSimulator,
    prometheus: PrometheusSimulator,
    loki: LokiSimulator,
    thread_id: str,
) -> None:
    gemini.script(Reply.text("nothing to see"), Reply.text("nothing to see"))
    async with open_investigator(
        model_spec, tempo_spec, GraphLimits(), redis_client, prefix=PREFIX
    ) as bare:
        await bare.investigate(thread_id, "why?", "U1")
    async with open_investigator(
        model_spec,
        tempo_spec,
        GraphLimits(),
        redis_client,
        prefix=PREFIX,
        configured={
            "prometheus": PrometheusSpec(url=prometheus.url),
            "loki": LokiSpec(url=loki.url),
        },
    ) as full:
        await full.investigate(thread_id + "-2", "why?", "U1")
    without, with_sources = gemini.requests[0].tool_names, gemini.requests[1].tool_names
    assert not EVIDENCE_TOOLS & set(without)
    assert set(with_sources) >= EVIDENCE_TOOLS


async def test_prometheus_down_mid_turn_is_a_failed_tool_call_in_steps_and_notices(
    model_spec: ModelSpec,
    tempo_spec: TempoSpec,
    redis_client: aioredis.Redis,
    gemini: GeminiSimulator,
    prometheus: PrometheusSimulator,
    thread_id: str,
) -> None:
    prometheus.faults.status = 503
    gemini.script(
        Reply.call("query_prometheus", promql="up"),
        Reply.text("Prometheus did not answer, so memory was not checked."),
    )
    async with open_investigator(
        model_spec,
        tempo_spec,
        GraphLimits(),
        redis_client,
        prefix=PREFIX,
        configured={"prometheus": PrometheusSpec(url=prometheus.url)},
    ) as investigator:
        result = await investigator.investigate(thread_id, "why?", "U1")
    (finished,) = [e for e in result.events if e["type"] == "tool_finished"]
    assert (finished["status"], finished["outcome"]) == ("error", "failed")
    assert any("Failed this turn: query_prometheus" in n for n in result.notices)
    assert result.status == "answered"


def test_unset_sources_have_no_spec_and_set_ones_are_typed() -> None:
    bare = Settings(_env_file=None, tempo_url="http://tempo:3200")
    full = Settings(
        _env_file=None,
        tempo_url="http://tempo:3200",
        prometheus_url="http://mimir/prometheus",
        prometheus_tenant="acme",
        loki_url="http://loki:3100",
        grafana_url="https://grafana.example.com",
    )
    assert bare.tool_settings() == {}
    configured = full.tool_settings()
    assert configured["prometheus"] == PrometheusSpec(
        url="http://mimir/prometheus", tenant="acme", grafana_url="https://grafana.example.com"
    )
    assert configured["loki"] == LokiSpec(
        url="http://loki:3100", grafana_url="https://grafana.example.com"
    )


def test_a_source_url_without_a_scheme_is_refused_naming_the_setting() -> None:
    with pytest.raises(SettingsError, match=r"^PROMETHEUS_URL: 'prometheus:9090' is not an http"):
        load_settings(
            _env_file=None, tempo_url="http://tempo:3200", prometheus_url="prometheus:9090"
        )


def test_a_bad_timeout_is_reported_under_its_setting() -> None:
    with pytest.raises(SettingsError, match=r"^LOKI_TIMEOUT: 0 must be more than 0$"):
        load_settings(
            _env_file=None, tempo_url="http://t:1", loki_url="http://loki:3100", loki_timeout=0
        )


def test_the_start_up_line_lists_the_evidence_sources_that_are_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = Settings(
        _env_file=None, tempo_url="http://127.0.0.1:1", loki_url="http://127.0.0.1:2"
    )
    with caplog.at_level(logging.INFO, logger="tracegate"):
        log_startup(settings, "serving")
    (line,) = caplog.records
    assert "; evidence: Tempo, Loki;" in line.getMessage()
