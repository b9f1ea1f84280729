"""Typed settings for the graph floor, built by `bot/` from the environment.

Each default, bound and description is written here once: `bot/process/settings.py` reads
these models from the environment as groups of its own (a field's variable is its
`validation_alias`, else the group's prefix and its name) and reports a refused value under
that variable; docs/configuration.md is generated from the descriptions.
Lower floors never read environment variables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr

from gates.config import NOT_A_SETTING, Duration, SettingsGroup


def _http_url(value: str) -> str:
    # "tempo:3200" parses as scheme "tempo": every request would fail, quietly.
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{value!r} is not an http:// or https:// URL with a host")
    return value


def _credentials_file(value: str | None) -> str | None:
    if value and not Path(value).is_file():
        raise ValueError(f"{value} is not a file; point it at a credentials file or unset it")
    return value or None


HttpUrl = Annotated[str, AfterValidator(_http_url)]


class ModelSpec(SettingsGroup):
    """Which chat model to talk to, and how."""

    api_key: SecretStr | None = Field(
        default=None,
        validation_alias="GOOGLE_API_KEY",
        description="Gemini API key. Never logged. Not used with `GOOGLE_GENAI_USE_VERTEXAI`.",
    )
    # Vertex AI instead of the Gemini API: no API key, Application Default Credentials.
    vertexai: bool = Field(
        default=False,
        validation_alias="GOOGLE_GENAI_USE_VERTEXAI",
        description=(
            "`true`: every model (agent, grader, judge, fallback) is called through Vertex AI "
            "in `GOOGLE_CLOUD_PROJECT` and `GOOGLE_CLOUD_LOCATION`, with Application Default "
            "Credentials instead of an API key: `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's "
            "login or the metadata server (GKE Workload Identity)."
        ),
    )
    project: str | None = Field(
        default=None,
        validation_alias="GOOGLE_CLOUD_PROJECT",
        description="Vertex AI: the Google Cloud project (its id) the models are called in.",
    )
    location: str | None = Field(
        default=None,
        validation_alias="GOOGLE_CLOUD_LOCATION",
        description="Vertex AI: the region (e.g. `europe-west4`), or `global`.",
    )
    credentials_file: Annotated[str | None, AfterValidator(_credentials_file)] = Field(
        default=None,
        validation_alias="GOOGLE_APPLICATION_CREDENTIALS",
        description=(
            "Vertex AI: a credentials file (a service account's key, or a Workload Identity "
            "Federation configuration). Unset: Application Default Credentials are looked for "
            "as Google's libraries do (gcloud's login, the metadata server)."
        ),
    )
    model: str = Field(
        default="google_genai:gemini-3.8-flash",
        validation_alias="LLM_MODEL",
        description="`provider:model`; `google_genai` is the supported provider.",
    )
    base_url: HttpUrl | None = Field(
        default=None,
        validation_alias="GEMINI_BASE_URL",
        description=(
            "Where the Gemini REST API is (a proxy, or the sandbox simulator). Unset: Google's "
            "endpoint."
        ),
    )
    timeout_s: float = Field(
        default=60.0,
        gt=0,
        validation_alias="LLM_TIMEOUT",
        description="Seconds per model request.",
    )
    max_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        validation_alias="LLM_MAX_RETRIES",
        description=(
            "Retries after a failed model request (0 = none): timeouts, dropped connections, "
            "500/502/504. Not 429 (quota) and 503 (overload): those wait as the API asks "
            "(`MODEL_WAIT_MAX`)."
        ),
    )


# The evidence sources: what an operator sets (`…Settings`, read from the environment: every
# field optional), and what a source's client is handed (`…Spec`: its URL set, Grafana's
# base URL added for links).


class TempoSettings(SettingsGroup):
    """TEMPO_*: traces, for the tools and the trace guard."""

    url: HttpUrl | None = Field(
        default=None,
        description=(
            "Tempo's HTTP API, e.g. `http://tempo:3200` (`/api/v2/traces`; a Tempo older than 2.5 "
            "is read through `/api/traces`)."
        ),
    )
    tenant: str | None = Field(
        default=None,
        description="Sent as `X-Scope-OrgID` on every Tempo request (multi-tenant Tempo).",
    )
    timeout_s: float = Field(
        default=5.0,
        gt=0,
        validation_alias="TEMPO_TIMEOUT",
        description="Seconds per Tempo request, for tools and verification alike.",
    )
    datasource: str = Field(
        default="tempo",
        validation_alias="GRAFANA_TEMPO_DATASOURCE",
        description="The uid of the Tempo data source in Grafana.",
    )


class TempoSpec(TempoSettings):
    url: HttpUrl
    grafana_url: str | None = Field(default=None, json_schema_extra=NOT_A_SETTING)  # links


def _whole_number(value: object) -> object:
    # Python's True and 2.0 are not numbers of calls; the environment's "2" is.
    if isinstance(value, bool | float):
        raise ValueError(f"{value!r} is not a whole number")
    return value


Whole = Annotated[int, BeforeValidator(_whole_number)]


class GraphLimits(SettingsGroup):
    """Bounds on one investigation turn (whole numbers: a bool or a float is refused)."""

    tool_budget: Whole = Field(
        default=8,
        ge=1,
        description="Tool calls per question; then the agent must answer (`force_answer`).",
    )
    recursion_limit: Whole = Field(
        default=25,
        ge=3,
        description=(
            "Graph steps per question (agent, `check_draft` and one to spare at least). The agent "
            "is routed to a final answer before it."
        ),
    )
    trace_max_revisions: Whole = Field(
        default=2,
        ge=0,
        description="Times a draft citing missing trace IDs is sent back before they are removed.",
    )
    claim_max_revisions: Whole = Field(
        default=2,
        ge=0,
        description=(
            "Times a draft claiming an action was approved or carried out, against the action "
            "records, is sent back before the sentence is removed."
        ),
    )
    grounding_max_revisions: Whole = Field(
        default=2,
        ge=0,
        description=(
            "Times a draft stating facts (pods, ReplicaSets, Deployments, services, namespaces, "
            "nodes, images, versions, revisions, times) that no tool result, thread message or "
            "live look-up shows is sent back, with each claim and what the evidence holds, before "
            "`GROUNDING_MODE` applies."
        ),
    )
    grounding_mode: Literal["remove", "mark"] = Field(
        default="remove",
        description=(
            "`remove` or `mark`: a fact still ungrounded when revisions run out has its sentence "
            "removed, or is marked _(unverified)_ in place. Either way the answer says how many "
            "and why; a fact whose source could not be reached is marked _(unchecked)_, never "
            "passed as grounded."
        ),
    )
    grounding_time_tolerance_s: Duration = Field(
        default=300,
        ge=0,
        validation_alias="GROUNDING_TIME_TOLERANCE",
        description=(
            'How far a stated time ("at 14:02", "13:55 UTC", ISO) may be from a timestamp in the '
            "evidence (a time written with a rollout word: from a rollout's). A time without a "
            "zone is read as UTC, without a date as the incident's day."
        ),
    )
    trace_verify_concurrency: Whole = Field(
        default=64,
        ge=1,
        description=(
            "Trace IDs of one draft checked in Tempo at once, over one shared connection pool; "
            "the default checks a normal answer's IDs in one round trip."
        ),
    )
    context_budget_tokens: Whole = Field(
        default=2000,
        ge=200,
        description=(
            "Earlier turns the model re-reads on each call, in estimated tokens (4 characters a "
            "token). Their tool results are already digests; beyond the budget the oldest turns "
            "are folded, once, into a summary kept in the checkpoint. The current turn is always "
            "read in full."
        ),
    )
    full_tool_results: Whole = Field(
        default=2,
        ge=0,
        description=(
            "The current turn's latest tool results the model is sent whole on each call; an "
            "older long one is sent as its headline, the lines with errors, failures or "
            "versions, and its trace IDs (the checkpoint, the evidence and the answer's checks "
            "keep it whole). 0 sends every result whole."
        ),
    )
    question_max_chars: Whole = Field(
        default=8000, ge=100, description="Longer messages are cut, and the answer says so."
    )
    rubric_max_iterations: Whole = Field(
        default=3, ge=1, description="Grader passes per answer (a whole number)."
    )
    grader_max_steps: Whole = Field(
        default=3, ge=0, description="Evidence look-ups the grader may make before its verdict."
    )


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names it and says what to set."""
