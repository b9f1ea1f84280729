"""Typed settings for the graph floor, built by `bot/` from the environment.

Each default and bound is written here once; `bot/process/settings.py` takes its defaults from
these fields and reports a value out of bounds under the environment variable's name.
Lower floors never read environment variables.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ModelSpec(BaseModel):
    """Which chat model to talk to, and how."""

    model_config = ConfigDict(frozen=True)

    model: str = "google_genai:gemini-3.8-flash"  # LLM_MODEL, "provider:model"
    api_key: str | None = Field(default=None, repr=False)  # GOOGLE_API_KEY
    base_url: str | None = None  # GEMINI_BASE_URL
    timeout_s: float = Field(default=60.0, gt=0)  # LLM_TIMEOUT
    max_retries: int = Field(default=2, ge=0, le=10)  # LLM_MAX_RETRIES
    # Vertex AI instead of the Gemini API: no API key, Application Default Credentials.
    vertexai: bool = False  # GOOGLE_GENAI_USE_VERTEXAI
    project: str | None = None  # GOOGLE_CLOUD_PROJECT
    location: str | None = None  # GOOGLE_CLOUD_LOCATION
    credentials_file: str | None = None  # GOOGLE_APPLICATION_CREDENTIALS; None: ADC's search


class TempoSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    url: str  # TEMPO_URL
    tenant: str | None = None  # TEMPO_TENANT -> X-Scope-OrgID
    # TEMPO_TIMEOUT: per request, tools and verification alike
    timeout_s: float = Field(default=5.0, gt=0)
    grafana_url: str | None = None  # GRAFANA_URL: an Explore link for each trace cited
    datasource: str = "tempo"  # GRAFANA_TEMPO_DATASOURCE: the Tempo data source's uid


class PrometheusSpec(BaseModel):
    """Prometheus, or anything serving its HTTP API (Mimir, Thanos, VictoriaMetrics)."""

    model_config = ConfigDict(frozen=True)

    url: str  # PROMETHEUS_URL, with any path prefix (Mimir: http://mimir/prometheus)
    tenant: str | None = None  # PROMETHEUS_TENANT -> X-Scope-OrgID (Mimir)
    timeout_s: float = Field(default=10.0, gt=0)  # PROMETHEUS_TIMEOUT: per request
    grafana_url: str | None = None  # GRAFANA_URL: an Explore link for each query
    datasource: str = "prometheus"  # GRAFANA_PROMETHEUS_DATASOURCE: its data source's uid


class LokiSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    url: str  # LOKI_URL
    tenant: str | None = None  # LOKI_TENANT -> X-Scope-OrgID
    timeout_s: float = Field(default=10.0, gt=0)  # LOKI_TIMEOUT: per request
    grafana_url: str | None = None  # GRAFANA_URL: an Explore link for each query
    datasource: str = "loki"  # GRAFANA_LOKI_DATASOURCE: the Loki data source's uid


class GraphLimits(BaseModel):
    """Bounds on one investigation turn (whole numbers: a bool or a float is refused)."""

    model_config = ConfigDict(frozen=True, strict=True)

    tool_budget: int = Field(default=8, ge=1)  # TOOL_BUDGET: tool calls per turn
    # RECURSION_LIMIT: graph steps per turn; agent, check_draft and one step to spare
    recursion_limit: int = Field(default=25, ge=3)
    trace_max_revisions: int = Field(default=2, ge=0)  # TRACE_MAX_REVISIONS
    claim_max_revisions: int = Field(default=2, ge=0)  # CLAIM_MAX_REVISIONS
    grounding_max_revisions: int = Field(default=2, ge=0)  # GROUNDING_MAX_REVISIONS
    # GROUNDING_MODE: a claim still ungrounded when revisions run out is removed with its
    # sentence, or marked (unverified) in place
    grounding_mode: Literal["remove", "mark"] = "remove"
    # GROUNDING_TIME_TOLERANCE: seconds between a stated time and one in the evidence
    grounding_time_tolerance_s: int = Field(default=300, ge=0)
    # TRACE_VERIFY_CONCURRENCY: a draft's IDs are checked at once up to this many
    trace_verify_concurrency: int = Field(default=64, ge=1)
    # CONTEXT_BUDGET_TOKENS: earlier turns the model re-reads (estimated tokens)
    context_budget_tokens: int = Field(default=2000, ge=200)
    # FULL_TOOL_RESULTS: the current turn's latest tool results sent whole (0: all of them)
    full_tool_results: int = Field(default=2, ge=0)
    question_max_chars: int = Field(default=8000, ge=100)  # QUESTION_MAX_CHARS
    rubric_max_iterations: int = Field(default=3, ge=1)  # RUBRIC_MAX_ITERATIONS: grader passes
    grader_max_steps: int = Field(default=3, ge=0)  # GRADER_MAX_STEPS: evidence look-ups


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names it and says what to set."""
