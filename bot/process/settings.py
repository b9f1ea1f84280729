"""Every setting, read once from the environment (or `.env`) and handed down as typed objects.

The typed configs (`GraphLimits`, `ModelSpec`, `TempoSpec`, `ActionPolicy`, `WorkerTiming`)
own their defaults and bounds: a field here that fills one takes its default from it
(`_owned`), and a value it refuses is reported under the variable the user sets (`FILLS`
maps its fields back). The settings no typed config holds keep their default and bound
here. Errors name the variable to fix. Each field's description is its documentation:
docs/configuration.md is generated from this class (`make docs`, `bot/process/settings_docs.py`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import unquote, urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.process.redis_client import (
    SCHEMES,
    SENTINEL_SCHEME,
    RedisSpec,
    parse_sentinel_url,
    redacted,
)
from bot.turn.notifications import AlertPolicy
from bot.turn.timing import WorkerTiming
from gates.config import ActionPolicy
from gates.store import DEFAULT_LEASE_S
from graph.capacity import CapacityLimits
from graph.config import GraphLimits, LokiSpec, ModelSpec, PrometheusSpec, TempoSpec
from graph.rubric import DEFAULT_RUBRIC

LEASE_KUBE_CALLS = 6
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
Command = Literal["serve", "worker", "investigate"]
Config = TypeVar("Config", bound=BaseModel)


class SettingsError(Exception):
    """One line per bad setting: `NAME: what is wrong; what to set`."""


_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(value: object) -> int:
    """Seconds from `900`, `900s`, `15m` or `1h` (bounds are the owner's to check)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    text = str(value).strip().lower()
    unit = _UNITS.get(text[-1:])
    number = text[:-1] if unit else text
    if not number.isdigit():
        raise ValueError(f"{value!r} is not a duration like 900, 900s, 15m or 1h")
    return int(number) * (unit or 1)


_AS_SECONDS = BeforeValidator(parse_duration)
Duration = Annotated[int, _AS_SECONDS]  # seconds; reported in the variable's own terms


def _owned(config: type[BaseModel], field: str) -> Any:
    """The default `config` owns for `field`: written there, and only there."""
    return config.model_fields[field].get_default(call_default_factory=True)


def _owned_list(config: type[BaseModel], field: str) -> str:
    return ",".join(sorted(_owned(config, field)))


# The typed configs Settings fills, each with its fields filled by a setting of another
# name; the others by the setting of the same name (a field no setting has keeps its default).
FILLS: dict[type[BaseModel], dict[str, str]] = {
    GraphLimits: {"grounding_time_tolerance_s": "grounding_time_tolerance"},
    ModelSpec: {
        "model": "llm_model",
        "api_key": "google_api_key",
        "base_url": "gemini_base_url",
        "timeout_s": "llm_timeout",
        "max_retries": "llm_max_retries",
        "vertexai": "google_genai_use_vertexai",
        "project": "google_cloud_project",
        "location": "google_cloud_location",
        "credentials_file": "google_application_credentials",
    },
    CapacityLimits: {
        "rpm": "model_rpm",
        "tpm": "model_tpm",
        "window_s": "model_rate_window",
        "wait_max_s": "model_wait_max",
        "fallback_model": "llm_fallback_model",
        "fallback_after_s": "model_fallback_after",
        "automatic_daily_token_budget": "auto_investigation_daily_token_budget",
    },
    TempoSpec: {
        "url": "tempo_url",
        "tenant": "tempo_tenant",
        "timeout_s": "tempo_timeout",
        "datasource": "grafana_tempo_datasource",
    },
    PrometheusSpec: {
        "url": "prometheus_url",
        "tenant": "prometheus_tenant",
        "timeout_s": "prometheus_timeout",
        "datasource": "grafana_prometheus_datasource",
    },
    LokiSpec: {
        "url": "loki_url",
        "tenant": "loki_tenant",
        "timeout_s": "loki_timeout",
        "datasource": "grafana_loki_datasource",
    },
    ActionPolicy: {
        "breaker_max_per_target": "breaker_max_actions_per_target",
        "breaker_max_global": "breaker_max_actions_global",
        "approval_ttl_s": "approval_ttl",
        "approvers": "action_approvers",
        "rollout_watch_s": "rollout_watch_timeout",
    },
    WorkerTiming: {
        "recovery_budget_s": "recovery",
        "shutdown_grace_s": "shutdown_grace",
        "concurrency": "worker_concurrency",
    },
}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", frozen=True)

    # Slack
    slack_bot_token: SecretStr | None = Field(
        default=None,
        description="The Bot User OAuth Token, `xoxb-…`.",
    )
    slack_signing_secret: SecretStr | None = Field(
        default=None,
        description=(
            "Verifies that requests come from Slack: needed in HTTP mode, not with "
            "`SLACK_APP_TOKEN` (Socket Mode)."
        ),
    )
    slack_app_token: SecretStr | None = Field(
        default=None,
        description="An app-level token (`xapp-…`): set it to use Socket Mode instead of HTTP.",
    )
    slack_api_url: str = Field(
        default="https://slack.com/api/",
        description="Where the Slack Web API is (the sandbox simulator in tests).",
    )
    port: int = Field(
        default=3000,
        ge=0,
        le=65535,
        description=(
            "HTTP port for `/slack/events` (serve), and for `/livez`, `/readyz` (alias "
            "`/healthz`) and `/metrics` (serve and worker; `0`: any free port)."
        ),
    )
    progress_interval: float = Field(
        default=1.5,
        ge=0,
        description="Seconds between edits of the placeholder (Slack rate limits).",
    )
    slack_streaming: Literal["auto", "on", "off"] = Field(
        default="auto",
        description=(
            "`auto`: the answer streams as a live task timeline (`chat.startStream`) where "
            "Slack allows it, else the placeholder and edits (a workspace's refusal is "
            "remembered for an hour); `on`: every turn tries streaming first; `off`: "
            "placeholder and edits only. The answer is added only after every guard passed."
        ),
    )
    slack_charts: Literal["on", "off"] = Field(
        default="on",
        description=(
            "`on`: under an answer that passed its checks, a PNG of the range query it rests "
            "on (top 8 series, the alert's start and the named Deployment's rollout marked) and "
            "a waterfall of the first trace it cites, drawn from the tools' data and uploaded "
            "to the thread (needs the `files:write` scope; a refused upload leaves the answer "
            "and is noted in Steps); `off`: no charts."
        ),
    )
    approver_group_cache: int = Field(
        default=300,
        ge=0,
        description=(
            "Seconds the members of `ACTION_APPROVER_GROUP` are cached. When Slack cannot list "
            "the group, the last list decides for 60 s more, then nobody is a member (fail "
            "closed) until a listing succeeds; a failed listing is retried after a backoff (5 s "
            "doubling to 5 min, or Slack's `Retry-After`), not on every click."
        ),
    )
    # Who may ask, and how often
    allow_external_users: bool = Field(
        default=False,
        description=(
            "Let Slack Connect users (people of another organisation's workspace, in a shared "
            "channel) start investigations and approve actions. Off: they are told so in the "
            "thread, and no model or tool call is made."
        ),
    )
    allow_guest_users: bool = Field(
        default=False,
        description=(
            "Let guests of the workspace (`users.info`: multi- or single-channel guests) start "
            "investigations and approve actions. Off: they are told so in the thread. When "
            "Slack cannot say who someone is, they are refused (fail closed); its answer is "
            "cached 5 minutes, and a failed lookup is retried after a backoff."
        ),
    )
    investigations_per_user_per_hour: int = Field(
        default=30,
        ge=1,
        description=(
            "Investigations one person may start per clock hour (UTC), all processes together; "
            "past it the thread says when the next question is taken and no model call is made."
        ),
    )
    investigations_per_channel_per_hour: int = Field(
        default=120,
        ge=1,
        description=(
            "Investigations people may start in one channel per clock hour (UTC), all processes "
            "together (automatic ones count against `AUTO_INVESTIGATIONS_PER_HOUR` instead)."
        ),
    )
    # Grafana (links only)
    grafana_url: str | None = Field(
        default=None,
        description=(
            "Grafana base URL: verified trace IDs link to Explore, and each checked fact of an "
            "answer links to the query that showed it (Steps and the footer's sources)."
        ),
    )
    grafana_tempo_datasource: str = Field(
        default=_owned(TempoSpec, "datasource"),
        description="The uid of the Tempo data source in Grafana.",
    )
    grafana_prometheus_datasource: str = Field(
        default=_owned(PrometheusSpec, "datasource"),
        description="The uid of the Prometheus data source in Grafana (links only).",
    )
    grafana_loki_datasource: str = Field(
        default=_owned(LokiSpec, "datasource"),
        description=(
            "The uid of the Loki data source in Grafana: each log query's answer links to it in "
            "Explore."
        ),
    )

    # The model (ModelSpec)
    google_api_key: SecretStr | None = Field(
        default=_owned(ModelSpec, "api_key"),
        description="Gemini API key. Never logged. Not used with `GOOGLE_GENAI_USE_VERTEXAI`.",
    )
    google_genai_use_vertexai: bool = Field(
        default=_owned(ModelSpec, "vertexai"),
        description=(
            "`true`: every model (agent, grader, judge, fallback) is called through Vertex AI "
            "in `GOOGLE_CLOUD_PROJECT` and `GOOGLE_CLOUD_LOCATION`, with Application Default "
            "Credentials instead of an API key: `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's "
            "login or the metadata server (GKE Workload Identity)."
        ),
    )
    google_cloud_project: str | None = Field(
        default=_owned(ModelSpec, "project"),
        description="Vertex AI: the Google Cloud project (its id) the models are called in.",
    )
    google_cloud_location: str | None = Field(
        default=_owned(ModelSpec, "location"),
        description="Vertex AI: the region (e.g. `europe-west4`), or `global`.",
    )
    google_application_credentials: str | None = Field(
        default=_owned(ModelSpec, "credentials_file"),
        description=(
            "Vertex AI: a credentials file (a service account's key, or a Workload Identity "
            "Federation configuration). Unset: Application Default Credentials are looked for "
            "as Google's libraries do (gcloud's login, the metadata server)."
        ),
    )
    llm_model: str = Field(
        default=_owned(ModelSpec, "model"),
        description="`provider:model`; `google_genai` is the supported provider.",
    )
    gemini_base_url: str | None = Field(
        default=_owned(ModelSpec, "base_url"),
        description=(
            "Where the Gemini REST API is (a proxy, or the sandbox simulator). Unset: Google's "
            "endpoint."
        ),
    )
    llm_timeout: float = Field(
        default=_owned(ModelSpec, "timeout_s"),
        description="Seconds per model request.",
    )
    llm_max_retries: int = Field(
        default=_owned(ModelSpec, "max_retries"),
        description=(
            "Retries after a failed model request (0 = none): timeouts, dropped connections, "
            "500/502/504. Not 429 (quota) and 503 (overload): those wait as the API asks "
            "(`MODEL_WAIT_MAX`)."
        ),
    )
    # Model capacity (CapacityLimits): one limit for every process, waits, fallback, budgets
    model_rpm: int = Field(
        default=_owned(CapacityLimits, "rpm"),
        description=(
            "Model requests per `MODEL_RATE_WINDOW`, per model, for all `serve` and `worker` "
            "processes together (one limit in Redis), taken before every agent, grader and judge "
            "call. Set it a little under the model's quota. `0`: no limit."
        ),
    )
    model_tpm: int = Field(
        default=_owned(CapacityLimits, "tpm"),
        description=(
            "Input tokens per `MODEL_RATE_WINDOW`, per model, shared the same way; a call's "
            "tokens are estimated (4 characters a token) before it and corrected from the "
            "response's usage after it. `0`: no limit."
        ),
    )
    model_rate_window: Duration = Field(
        default=int(_owned(CapacityLimits, "window_s")),
        description=(
            "The window of `MODEL_RPM` / `MODEL_TPM` (the API's quotas are per minute; a call "
            "counts in it for a further 2 %, at least 0.5 s, as the API sees it a moment after it "
            "is sent)."
        ),
    )
    model_wait_max: Duration = Field(
        default=int(_owned(CapacityLimits, "wait_max_s")),
        description=(
            "How long a turn waits for model capacity (a 429 or 503 from the API, or the shared "
            'limit), counted from its first wait. While it waits its placeholder says "Waiting '
            'for model capacity — next try at HH:MM:SS UTC" and its worker slot is free for other '
            "threads; it then resumes from its checkpoint. Past it the turn ends with a message "
            "saying it was the model's quota and what to do."
        ),
    )
    llm_fallback_model: str | None = Field(
        default=_owned(CapacityLimits, "fallback_model"),
        description=(
            "`provider:model` answering when the primary model stays exhausted (429/503) for "
            "`MODEL_FALLBACK_AFTER`; the result records the model that answered (`model`)."
        ),
    )
    model_fallback_after: Duration = Field(
        default=int(_owned(CapacityLimits, "fallback_after_s")),
        description=(
            "How long the primary must have been exhausted (since its first quota or overload "
            "error, across processes) before the fallback answers."
        ),
    )
    thread_token_budget: int = Field(
        default=_owned(CapacityLimits, "thread_token_budget"),
        description=(
            "Tokens (input and output, all roles) one thread may spend over its life; a turn that "
            "would exceed it stops before its next model call with a message (not an error), ⚠️. "
            "`0`: no budget."
        ),
    )
    channel_daily_token_budget: int = Field(
        default=_owned(CapacityLimits, "channel_daily_token_budget"),
        description="Tokens one channel may spend per UTC day, the same way. `0`: no budget.",
    )
    # Grafana Tempo (TempoSpec)
    tempo_url: str | None = Field(
        default=None,
        description=(
            "Tempo's HTTP API, e.g. `http://tempo:3200` (`/api/v2/traces`; a Tempo older than 2.5 "
            "is read through `/api/traces`)."
        ),
    )
    tempo_tenant: str | None = Field(
        default=_owned(TempoSpec, "tenant"),
        description="Sent as `X-Scope-OrgID` on every Tempo request (multi-tenant Tempo).",
    )
    tempo_timeout: float = Field(
        default=_owned(TempoSpec, "timeout_s"),
        description="Seconds per Tempo request, for tools and verification alike.",
    )
    # Optional evidence: Prometheus (or Mimir, Thanos) metrics, Loki logs
    prometheus_url: str | None = Field(
        default=None,
        description=(
            "Prometheus' HTTP API, or Mimir's/Thanos' (with its path prefix, e.g. "
            "`http://mimir/prometheus`). Set: the agent gets `query_prometheus`, "
            "`query_prometheus_range` and `list_prometheus_label_values`. Optional: readiness "
            "never depends on it. Unset: no metric tools."
        ),
    )
    prometheus_tenant: str | None = Field(
        default=_owned(PrometheusSpec, "tenant"),
        description="Sent as `X-Scope-OrgID` on every Prometheus request (Mimir).",
    )
    prometheus_timeout: float = Field(
        default=_owned(PrometheusSpec, "timeout_s"),
        description="Seconds per Prometheus request.",
    )
    loki_url: str | None = Field(
        default=None,
        description=(
            "Loki's HTTP API, e.g. `http://loki:3100`. Set: the agent gets `query_loki_logs`. "
            "Optional: readiness never depends on it. Unset: no log queries."
        ),
    )
    loki_tenant: str | None = Field(
        default=_owned(LokiSpec, "tenant"),
        description="Sent as `X-Scope-OrgID` on every Loki request (multi-tenant Loki).",
    )
    loki_timeout: float = Field(
        default=_owned(LokiSpec, "timeout_s"),
        description="Seconds per Loki request.",
    )
    # Redis (checkpoints)
    redis_url: str = Field(
        default="redis://localhost:6379/0",
        description=(
            "Redis with RedisJSON + RediSearch (Redis 8, Redis Stack 7.4, or a managed "
            "equivalent): `redis://`, `rediss://` (TLS), `unix://`, or Sentinel: "
            "`redis+sentinel://host1:26379,host2:26379/<service>/<db>` (the primary of "
            "`<service>`, followed through failovers). Redis Cluster is not supported."
        ),
    )
    redis_prefix: str = Field(
        default="tracegate",
        description=(
            "Prefix of every key and search index the bot makes in Redis (turns, leases, "
            "dedupe, actions, audit, checkpoints), so bots can share a Redis. Checkpoints "
            "written before it applied to them: `tracegate migrate-checkpoints`."
        ),
    )
    redis_username: str | None = Field(
        default=None,
        description="User of the Redis data nodes (ACL), when not in `REDIS_URL`.",
    )
    redis_password: SecretStr | None = Field(
        default=None,
        description=(
            "Password of the Redis data nodes, when not in `REDIS_URL` (a password in both "
            "must agree)."
        ),
    )
    redis_sentinel_username: str | None = Field(
        default=None,
        description="User of the Sentinel nodes (ACL), with a `redis+sentinel://` URL.",
    )
    redis_sentinel_password: SecretStr | None = Field(
        default=None,
        description=(
            "Password of the Sentinel nodes (`requirepass` of the sentinels), with a "
            "`redis+sentinel://` URL; the data nodes' is `REDIS_PASSWORD`."
        ),
    )
    redis_tls: bool = Field(
        default=False,
        description=(
            "TLS to the Redis data nodes. `rediss://` URLs use TLS anyway; with Sentinel this "
            "is how TLS to the primary is asked for."
        ),
    )
    redis_sentinel_tls: bool = Field(
        default=False, description="TLS to the Sentinel nodes (`redis+sentinel://` URLs)."
    )
    redis_tls_ca_file: str | None = Field(
        default=None,
        description=(
            "PEM file of the CA that signed the Redis (and Sentinel) server certificates; "
            "unset: the system's trusted CAs."
        ),
    )
    redis_failover_timeout: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description=(
            "Seconds a Redis command keeps retrying (with backoff, reconnecting through "
            "Sentinel) after a dropped connection, a timeout or a `READONLY` reply, before "
            "it fails: cover your failover (Sentinel's `down-after-milliseconds` plus the "
            "election; a managed Redis's documented failover time)."
        ),
    )
    redis_socket_timeout: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description=(
            "Seconds a Redis connect or read may take before the connection counts as lost "
            "(and is retried within `REDIS_FAILOVER_TIMEOUT`): a Redis that stops answering "
            "cannot block a command for ever. Above the slowest command you run."
        ),
    )
    checkpoint_ttl_minutes: float = Field(
        default=7 * 24 * 60,
        gt=0,
        description="Thread checkpoints expire this long after last use (the default: 7 days).",
    )
    redis_allow_eviction: bool = Field(
        default=False,
        description=(
            "`serve`, `worker` and `investigate` refuse to start on a Redis whose "
            "`maxmemory-policy` is not `noeviction` (read from `INFO memory`): evicted leases, "
            "turns and action requests would be lost without a trace. `true`: start anyway, "
            "with a warning, for those who accept that risk."
        ),
    )
    # Limits of one investigation turn (GraphLimits)
    tool_budget: int = Field(
        default=_owned(GraphLimits, "tool_budget"),
        description="Tool calls per question; then the agent must answer (`force_answer`).",
    )
    recursion_limit: int = Field(
        default=_owned(GraphLimits, "recursion_limit"),
        description=(
            "Graph steps per question (agent, `check_draft` and one to spare at least). The agent "
            "is routed to a final answer before it."
        ),
    )
    trace_max_revisions: int = Field(
        default=_owned(GraphLimits, "trace_max_revisions"),
        description="Times a draft citing missing trace IDs is sent back before they are removed.",
    )
    claim_max_revisions: int = Field(
        default=_owned(GraphLimits, "claim_max_revisions"),
        description=(
            "Times a draft claiming an action was approved or carried out, against the action "
            "records, is sent back before the sentence is removed."
        ),
    )
    grounding_max_revisions: int = Field(
        default=_owned(GraphLimits, "grounding_max_revisions"),
        description=(
            "Times a draft stating facts (pods, ReplicaSets, Deployments, services, namespaces, "
            "nodes, images, versions, revisions, times) that no tool result, thread message or "
            "live look-up shows is sent back, with each claim and what the evidence holds, before "
            "`GROUNDING_MODE` applies."
        ),
    )
    grounding_mode: Literal["remove", "mark"] = Field(
        default=_owned(GraphLimits, "grounding_mode"),
        description=(
            "`remove` or `mark`: a fact still ungrounded when revisions run out has its sentence "
            "removed, or is marked _(unverified)_ in place. Either way the answer says how many "
            "and why; a fact whose source could not be reached is marked _(unchecked)_, never "
            "passed as grounded."
        ),
    )
    grounding_time_tolerance: Duration = Field(
        default=_owned(GraphLimits, "grounding_time_tolerance_s"),
        description=(
            'How far a stated time ("at 14:02", "13:55 UTC", ISO) may be from a timestamp in the '
            "evidence (a time written with a rollout word: from a rollout's). A time without a "
            "zone is read as UTC, without a date as the incident's day."
        ),
    )
    trace_verify_concurrency: int = Field(
        default=_owned(GraphLimits, "trace_verify_concurrency"),
        description=(
            "Trace IDs of one draft checked in Tempo at once, over one shared connection pool; "
            "the default checks a normal answer's IDs in one round trip."
        ),
    )
    context_budget_tokens: int = Field(
        default=_owned(GraphLimits, "context_budget_tokens"),
        description=(
            "Earlier turns the model re-reads on each call, in estimated tokens (4 characters a "
            "token). Their tool results are already digests; beyond the budget the oldest turns "
            "are folded, once, into a summary kept in the checkpoint. The current turn is always "
            "read in full."
        ),
    )
    full_tool_results: int = Field(
        default=_owned(GraphLimits, "full_tool_results"),
        description=(
            "The current turn's latest tool results the model is sent whole on each call; an "
            "older long one is sent as its headline, the lines with errors, failures or "
            "versions, and its trace IDs (the checkpoint, the evidence and the answer's checks "
            "keep it whole). 0 sends every result whole."
        ),
    )
    question_max_chars: int = Field(
        default=_owned(GraphLimits, "question_max_chars"),
        description="Longer messages are cut, and the answer says so.",
    )
    # The incident thread as context (0 messages: not read)
    thread_context_messages: int = Field(
        default=50,
        ge=0,
        le=1000,
        description=(
            "Messages of the incident thread (posted before the question, not yet seen by the "
            "investigation) handed to the agent as context: the thread's first message, then the "
            "newest. `0`: the thread is not read."
        ),
    )
    thread_context_chars: int = Field(
        default=12_000,
        ge=1000,
        le=200_000,
        description="Upper bound on the size of that context, markers included.",
    )
    # Rubric grading
    default_rubric: str = Field(
        default=DEFAULT_RUBRIC,
        description=(
            "Newline-separated checklist (`\\n` accepted on one line). Empty: no grading unless a "
            "channel sets a rubric."
        ),
    )
    rubric_max_iterations: int = Field(
        default=_owned(GraphLimits, "rubric_max_iterations"),
        description="Grader passes per answer (a whole number).",
    )
    grader_model: str | None = Field(
        default=None,
        description="The grader's model (a cheaper one is fine). Unset: `LLM_MODEL`.",
    )
    grader_max_steps: int = Field(
        default=_owned(GraphLimits, "grader_max_steps"),
        description="Evidence look-ups the grader may make before its verdict.",
    )
    rubric_editors: str = Field(
        default="",
        description=(
            "Comma-separated Slack user IDs who may `/rubric set` and `/rubric clear`; `*` lets "
            "anyone. Every change (and every refused one) goes to the audit stream with its "
            "actor. Empty: the action approvers (`ACTION_APPROVERS` and `ACTION_APPROVER_GROUP`)."
        ),
    )
    rubric_max_chars: int = Field(
        default=4000,
        ge=1,
        le=40_000,
        description=(
            "Longest checklist `/rubric set` accepts (after cleaning); a longer one is refused, "
            "naming this setting."
        ),
    )
    # Kubernetes actions (ActionPolicy)
    kubeconfig: str | None = Field(
        default=None,
        description=(
            "Kubeconfig for the Kubernetes tools and actions (first path if a list). Unset: "
            "in-cluster credentials when running in a pod, otherwise no Kubernetes tools."
        ),
    )
    kube_timeout: float = Field(
        default=10.0,
        gt=0,
        description="Seconds per Kubernetes API call.",
    )
    actions_enabled: bool = Field(
        default=_owned(ActionPolicy, "actions_enabled"),
        description=(
            "Kill switch. Off: proposals are evaluated and shown, and Approve runs a server-side "
            "dry run (`dryRun=All`) only."
        ),
    )
    allowed_namespaces: str = Field(
        default=_owned_list(ActionPolicy, "allowed_namespaces"),
        description=(
            "Comma-separated namespaces actions may touch. Empty: every namespace not protected."
        ),
    )
    protected_namespaces: str = Field(
        default=_owned_list(ActionPolicy, "protected_namespaces"),
        description="Comma-separated namespaces never touched.",
    )
    protected_deployments: str = Field(
        default=_owned_list(ActionPolicy, "protected_deployments"),
        description="Comma-separated `namespace/name` entries never touched.",
    )
    max_scale_factor: float = Field(
        default=_owned(ActionPolicy, "max_scale_factor"),
        description="A scale may not exceed this multiple of the current replicas.",
    )
    max_replicas: int = Field(
        default=_owned(ActionPolicy, "max_replicas"),
        description="Absolute cap for a scale. Scaling to 0 is always refused.",
    )
    breaker_failure_threshold: int = Field(
        default=_owned(ActionPolicy, "breaker_failure_threshold"),
        description=(
            "Consecutive failed actions (per Deployment, and cluster-wide) that open the breaker; "
            "it stays open until an approver resets it."
        ),
    )
    breaker_window_minutes: int = Field(
        default=_owned(ActionPolicy, "breaker_window_minutes"),
        description="The sliding window for the two caps below.",
    )
    breaker_max_actions_per_target: int = Field(
        default=_owned(ActionPolicy, "breaker_max_per_target"),
        description="Executed actions per Deployment per window.",
    )
    breaker_max_actions_global: int = Field(
        default=_owned(ActionPolicy, "breaker_max_global"),
        description="Executed actions cluster-wide per window.",
    )
    approval_ttl: Duration = Field(
        default=_owned(ActionPolicy, "approval_ttl_s"),
        description="How long a proposal may wait for approval (`900`, `900s`, `15m`, `1h`).",
    )
    action_approvers: str = Field(
        default=_owned_list(ActionPolicy, "approvers"),
        description="Comma-separated Slack user IDs who may approve.",
    )
    action_approver_group: str | None = Field(
        default=None,
        description="A Slack user group whose members may approve.",
    )
    allow_self_approval: bool = Field(
        default=_owned(ActionPolicy, "allow_self_approval"),
        description="Whether the engineer who asked may approve their own request.",
    )
    judge_fail_mode: Literal["closed", "open"] = Field(
        default=_owned(ActionPolicy, "judge_fail_mode"),
        description=(
            "`closed`: no approval buttons without a judge verdict. `open`: allowed, with a "
            'visible "judge unavailable" warning.'
        ),
    )
    judge_model: str | None = Field(
        default=None,
        description="The model that reviews proposals. Unset: `LLM_MODEL`.",
    )
    # proposed/approved/executing longer than this: settled by the reconciler (the lease)
    action_lease: Duration = Field(
        default=int(DEFAULT_LEASE_S),
        gt=0,
        description=(
            "How long an action may stay `proposed` (gates and judge deciding) or "
            "`approved`/`executing` before the reconciler settles it: refused, or read from the "
            "cluster (at least 6 × `KUBE_TIMEOUT`). A rollout's follower holds its lease for 15 "
            "s, or this when shorter."
        ),
    )
    reconcile_interval: Duration = Field(
        default=30,
        gt=0,
        description=(
            "How often every `serve` and `worker` process settles interrupted actions and expires "
            "stale proposals (card or no card)."
        ),
    )
    rollout_watch_timeout: Duration = Field(
        default=_owned(ActionPolicy, "rollout_watch_s"),
        description=(
            "How long a succeeded action's rollout is followed before the card says it is not "
            "healthy."
        ),
    )
    # Durable turns (WorkerTiming)
    worker_mode: Literal["inline", "queue"] = Field(
        default="inline",
        description=(
            "`inline`: `tracegate serve` also runs turns (one process does everything). `queue`: "
            "`serve` only verifies, acknowledges, records and queues; `tracegate worker` "
            "processes run the turns. Both keep every recorded turn across crashes and restarts."
        ),
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        le=20,
        description=(
            "Runs of one turn (a crash counts; a graceful hand-back does not) before the thread "
            "gets a plain failure message with a reference id."
        ),
    )
    shutdown_grace: float = Field(
        default=_owned(WorkerTiming, "shutdown_grace_s"),
        description=(
            "Seconds a stopping process (SIGTERM) lets its running turns finish before handing "
            "them back to the queue; keep it inside Kubernetes' `terminationGracePeriodSeconds` "
            "(the shipped manifests: 45)."
        ),
    )
    recovery: float = Field(
        default=_owned(WorkerTiming, "recovery_budget_s"),
        description=(
            "Seconds within which a dead worker's turns are taken up by another: the thread lease "
            "is `RECOVERY/3`, the sweep `RECOVERY/10`, the job heartbeat what is left after two "
            "sweeps and saq's 5 s abort wait."
        ),
    )
    worker_concurrency: int = Field(
        default=_owned(WorkerTiming, "concurrency"),
        description=(
            "Turns a worker (or an inline `serve`) holds at once. Turns waiting behind their "
            "thread's earlier turn hold at most all slots but one (no CPU); one beyond that "
            "gives its slot back and is tried again about once a second."
        ),
    )
    # Alerts (bot/turn/alert_desk.py, docs/alerts.md)
    alert_webhook_token: SecretStr | None = Field(
        default=None,
        description=(
            "Turns on `POST /alerts/alertmanager` and `POST /alerts/grafana` on `serve`, "
            "authenticated with `Authorization: Bearer <token>`; unset, the routes do not exist."
        ),
    )
    alert_channel: str | None = Field(
        default=None,
        description=(
            "The channel id (`C…`) where each alert group of the webhooks is posted and "
            "investigated; a receiver may name another with `?channel=<id>`."
        ),
    )
    auto_investigate_channels: str = Field(
        default="",
        description=(
            "Comma-separated channel ids where an alert another app posts (Alertmanager's, "
            "Grafana's or PagerDuty's Slack integration) starts an investigation in its thread."
        ),
    )
    auto_investigate_severities: str = Field(
        default="critical",
        description=(
            "Comma-separated `severity` label values that start an investigation; an alert "
            "without a severity label is investigated."
        ),
    )
    auto_investigations_per_hour: int = Field(
        default=20,
        ge=0,
        description=(
            "Automatic investigations per channel per hour; past it the alert's thread says so "
            "and no model call is made."
        ),
    )
    auto_investigation_daily_token_budget: int = Field(
        default=_owned(CapacityLimits, "automatic_daily_token_budget"),
        ge=0,
        description=(
            "Tokens automatic investigations may spend per UTC day, all channels together "
            "(people's questions are not counted). `0`: no budget of their own."
        ),
    )
    # Logging
    log_level: str = Field(
        default="INFO",
        description="Python logging level: `DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`.",
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description=(
            "`text`, or `json`: one JSON object a line (for log shippers). Either way a turn's "
            "lines carry team, channel, thread, turn and correlation id."
        ),
    )

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        if value.strip().upper() not in LOG_LEVELS:
            raise ValueError(f"{value!r} is not one of {', '.join(LOG_LEVELS)}")
        return value.strip().upper()

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str) -> str:
        # redis-py reads "localhost:6379" as a URL without a scheme and fails deep inside.
        scheme = urlsplit(value).scheme
        if scheme not in SCHEMES:
            raise ValueError(
                "not a URL like redis://host:6379/0 or "
                "redis+sentinel://host1:26379,host2:26379/mymaster/0"
            )
        if scheme == SENTINEL_SCHEME:
            parse_sentinel_url(value)  # its ValueError says what is wrong
        return value

    @field_validator("redis_tls_ca_file")
    @classmethod
    def _ca_file_exists(cls, value: str | None) -> str | None:
        if value and not Path(value).is_file():
            raise ValueError(f"{value} is not a file; point it at a PEM CA bundle or unset it")
        return value or None

    @field_validator("llm_fallback_model")
    @classmethod
    def _fallback_model(cls, value: str | None) -> str | None:
        if value and not value.startswith("google_genai:"):
            raise ValueError(f"{value!r} is not of the form google_genai:<model>")
        return value or None

    @field_validator(
        "tempo_url", "prometheus_url", "loki_url", "gemini_base_url", "grafana_url", "slack_api_url"
    )
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        # "tempo:3200" parses as scheme "tempo": every request would fail, quietly.
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"{value!r} is not an http:// or https:// URL with a host")
        return value

    @field_validator("google_application_credentials")
    @classmethod
    def _credentials_file_exists(cls, value: str | None) -> str | None:
        if value and not Path(value).is_file():
            raise ValueError(f"{value} is not a file; point it at a credentials file or unset it")
        return value or None

    @field_validator("kubeconfig")
    @classmethod
    def _kubeconfig_exists(cls, value: str | None) -> str | None:
        if value:
            first = value.split(os.pathsep)[0]  # the file kubernetes_asyncio reads
            if not Path(first).is_file():
                raise ValueError(f"{first} is not a file; point it at a kubeconfig or unset it")
        return value

    @field_validator("action_lease")
    @classmethod
    def _lease_outlasts_an_execution(cls, value: int, info: ValidationInfo) -> int:
        # A live executor makes at most this many API calls between two transitions; a
        # shorter lease would let the reconciler settle a request that is still running.
        floor = LEASE_KUBE_CALLS * info.data.get("kube_timeout", 0)
        if value < floor:
            raise ValueError(
                f"{_shown(value, duration=True)} is shorter than {LEASE_KUBE_CALLS} × "
                f"KUBE_TIMEOUT ({floor:g}s); raise ACTION_LEASE or lower KUBE_TIMEOUT"
            )
        return value

    @property
    def action_lease_s(self) -> int:
        return self.action_lease

    @property
    def reconcile_interval_s(self) -> int:
        return self.reconcile_interval

    def check_for_serve(self, *, worker: bool = False) -> None:
        """Everything `tracegate serve` (or, with `worker`, `tracegate worker`) needs,
        reported together, by name."""
        problems = self.missing("worker" if worker else "serve")
        if problems:
            raise SettingsError("\n".join(problems))

    def missing(self, command: Command) -> list[str]:
        """What `command` needs and is not set (or not usable), one line each."""
        problems = []
        if command != "investigate":
            problems += self._missing_slack(worker=command == "worker")
        problems += self.missing_model()
        if not self.tempo_url:
            problems.append("TEMPO_URL: not set; set it to your Tempo's HTTP API")
        return problems

    def missing_model(self) -> list[str]:
        """What calling the model needs: an API key, or Vertex AI's project and location."""
        if not self.google_genai_use_vertexai:
            if self.google_api_key:
                return []
            return [
                "GOOGLE_API_KEY: not set; the agent needs a Gemini API key "
                "(or GOOGLE_GENAI_USE_VERTEXAI=true for Vertex AI)"
            ]
        return [
            f"{name}: not set; GOOGLE_GENAI_USE_VERTEXAI=true needs {what}"
            for name, value, what in (
                ("GOOGLE_CLOUD_PROJECT", self.google_cloud_project, "the Google Cloud project"),
                ("GOOGLE_CLOUD_LOCATION", self.google_cloud_location, "the Vertex AI region"),
            )
            if not value
        ]

    def _missing_slack(self, *, worker: bool) -> list[str]:
        problems = []
        bot = self.slack_bot_token.get_secret_value() if self.slack_bot_token else ""
        if not bot:
            problems.append("SLACK_BOT_TOKEN: not set; use the app's Bot User OAuth Token (xoxb-…)")
        elif not bot.startswith("xoxb-"):
            problems.append(
                "SLACK_BOT_TOKEN: does not start with xoxb-; use the Bot User OAuth Token"
            )
        app = self.slack_app_token.get_secret_value() if self.slack_app_token else ""
        if app and not app.startswith("xapp-"):
            problems.append("SLACK_APP_TOKEN: does not start with xapp-; use an app-level token")
        if not worker and not app and not self.slack_signing_secret:
            problems.append(
                "SLACK_SIGNING_SECRET: not set; copy it from the app's Basic Information page "
                "(or set SLACK_APP_TOKEN for Socket Mode)"
            )
        return problems

    @property
    def kubernetes_configured(self) -> bool:
        return bool(self.kubeconfig) or "KUBERNETES_SERVICE_HOST" in os.environ

    def _typed(self, config: type[Config], **converted: Any) -> Config:
        """`config` filled from these settings (see FILLS), `converted` where a value is
        more than a copy; what it refuses is reported by the variables' names."""
        fills = FILLS.get(config, {})
        values = {
            field: getattr(self, fills.get(field, field))
            for field in config.model_fields
            if fills.get(field, field) in type(self).model_fields
        }
        try:
            return config(**(values | converted))
        except ValidationError as exc:
            raise SettingsError(describe(exc, fills)) from None

    def graph_limits(self) -> GraphLimits:
        return self._typed(GraphLimits)

    def action_policy(self) -> ActionPolicy:
        return self._typed(
            ActionPolicy,
            allowed_namespaces=frozenset(_split(self.allowed_namespaces)),
            protected_namespaces=frozenset(_split(self.protected_namespaces)),
            protected_deployments=frozenset(_split(self.protected_deployments)),
            approvers=frozenset(_split(self.action_approvers)),
        )

    def model_spec(self) -> ModelSpec:
        key = self.google_api_key
        return self._typed(ModelSpec, api_key=key.get_secret_value() if key else None)

    def judge_spec(self) -> ModelSpec:
        return self.model_spec().model_copy(update={"model": self.judge_model or self.llm_model})

    def grader_spec(self) -> ModelSpec:
        return self.model_spec().model_copy(update={"model": self.grader_model or self.llm_model})

    def redis_spec(self) -> RedisSpec:
        """Where Redis is and how to reach it; SettingsError names the settings that clash."""
        problems = []
        url = urlsplit(self.redis_url)
        sentinel = url.scheme == SENTINEL_SCHEME
        password = self.redis_password.get_secret_value() if self.redis_password else None
        in_url = unquote(url.password) if url.password else None
        if password and in_url and password != in_url:
            problems.append(
                "REDIS_PASSWORD: differs from the password in REDIS_URL; set it in one place"
            )
        user_in_url = unquote(url.username) if url.username else None
        if self.redis_username and user_in_url and self.redis_username != user_in_url:
            problems.append(
                "REDIS_USERNAME: differs from the user in REDIS_URL; set it in one place"
            )
        if not sentinel:
            for name in ("redis_sentinel_username", "redis_sentinel_password"):
                if getattr(self, name):
                    problems.append(
                        f"{name.upper()}: set, but REDIS_URL is not a redis+sentinel:// URL"
                    )
            if self.redis_sentinel_tls:
                problems.append(
                    "REDIS_SENTINEL_TLS: true, but REDIS_URL is not a redis+sentinel:// URL"
                )
        if url.scheme == "unix" and self.redis_tls:
            problems.append("REDIS_TLS: true, but REDIS_URL is a unix:// socket (no TLS there)")
        if self.redis_tls_ca_file and not (
            self.redis_tls or self.redis_sentinel_tls or url.scheme == "rediss"
        ):
            problems.append(
                "REDIS_TLS_CA_FILE: set, but nothing uses TLS; set REDIS_TLS=true (or "
                "REDIS_SENTINEL_TLS=true, or a rediss:// URL)"
            )
        if problems:
            raise SettingsError("\n".join(problems))
        sentinel_password = self.redis_sentinel_password
        return RedisSpec(
            url=self.redis_url,
            username=self.redis_username or user_in_url,
            password=password or in_url,
            sentinel_username=self.redis_sentinel_username,
            sentinel_password=sentinel_password.get_secret_value() if sentinel_password else None,
            tls=self.redis_tls or url.scheme == "rediss",
            sentinel_tls=self.redis_sentinel_tls,
            tls_ca_file=self.redis_tls_ca_file,
            failover_timeout_s=self.redis_failover_timeout,
            socket_timeout_s=self.redis_socket_timeout,
        )

    def tempo_spec(self) -> TempoSpec:
        if not self.tempo_url:
            raise SettingsError(
                "TEMPO_URL: not set; set it to your Tempo's HTTP API, e.g. http://tempo:3200"
            )
        return self._typed(TempoSpec, grafana_url=self.grafana_url)

    def prometheus_spec(self) -> PrometheusSpec | None:
        """None when PROMETHEUS_URL is not set: no metric tools."""
        if not self.prometheus_url:
            return None
        return self._typed(PrometheusSpec, grafana_url=self.grafana_url)

    def loki_spec(self) -> LokiSpec | None:
        """None when LOKI_URL is not set: no log-query tools."""
        if not self.loki_url:
            return None
        return self._typed(LokiSpec, grafana_url=self.grafana_url)

    def tool_settings(self) -> dict[str, BaseModel]:
        """The settings of each configured tool set, by its name."""
        configured = {"prometheus": self.prometheus_spec(), "loki": self.loki_spec()}
        return {name: spec for name, spec in configured.items() if spec is not None}

    def evidence_sources(self) -> list[str]:
        """The sources the agent reads, for the start-up line."""
        sources = ["Tempo"]
        if self.kubernetes_configured:
            sources.append("Kubernetes (rollouts, pods, events, logs)")
        if self.prometheus_url:
            sources.append("Prometheus")
        if self.loki_url:
            sources.append("Loki")
        return sources

    def worker_timing(self) -> WorkerTiming:
        return self._typed(WorkerTiming)

    def capacity_limits(self) -> CapacityLimits:
        return self._typed(CapacityLimits, fallback_model=self.llm_fallback_model or None)

    def alert_policy(self) -> AlertPolicy:
        return AlertPolicy(
            channel=self.alert_channel or None,
            severities=frozenset(s.lower() for s in _split(self.auto_investigate_severities)),
            per_hour=self.auto_investigations_per_hour,
            channels=frozenset(_split(self.auto_investigate_channels)),
        )

    def typed_problems(self) -> list[str]:
        """What the typed configs refuse, one line each (TEMPO_URL is `missing`'s to check)."""
        problems = []
        for build in (
            self.graph_limits,
            self.action_policy,
            self.model_spec,
            self.worker_timing,
            self.capacity_limits,
            self.redis_spec,
            lambda: self._typed(TempoSpec, url=self.tempo_url or ""),
            lambda: self._typed(PrometheusSpec, url=self.prometheus_url or ""),
            lambda: self._typed(LokiSpec, url=self.loki_url or ""),
        ):
            try:
                build()
            except SettingsError as exc:
                problems.append(str(exc))
        return problems

    def rubric_editor_ids(self) -> tuple[bool, frozenset[str]]:
        """RUBRIC_EDITORS as (anyone, user ids); no ids means the action approvers."""
        ids = frozenset(_split(self.rubric_editors))
        return "*" in ids, ids - {"*"}

    @property
    def rubric(self) -> str | None:
        """DEFAULT_RUBRIC, with `\\n` accepted for newlines (one-line environment values)."""
        text = self.default_rubric.replace("\\n", "\n").strip()
        return text or None


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


# pydantic's bound errors → how they read for a number and for a duration, and the bound
_BOUNDS = {
    "greater_than_equal": ("is below the minimum", "is shorter than the minimum", "ge"),
    "less_than_equal": ("is above the maximum", "is longer than the maximum", "le"),
    "greater_than": ("must be more than", "must be longer than", "gt"),
    "less_than": ("must be less than", "must be shorter than", "lt"),
}
# pydantic's parse errors → what the value is not
_NOT_A = {
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_parsing": "a number",
    "bool_parsing": "true or false",
}


def describe(exc: ValidationError, fills: dict[str, str] | None = None) -> str:
    """One line per error, named by the environment variable: `fills` maps a typed config's
    fields to the settings that fill them (a Settings error is named by its own field)."""
    return "\n".join(_problem((fills or {}), error) for error in exc.errors())


def _problem(fills: dict[str, str], error: ErrorDetails) -> str:
    field = str(error["loc"][0]) if error["loc"] else "settings"
    setting = fills.get(field, field)
    owner = Settings.model_fields.get(setting)
    duration = owner is not None and _AS_SECONDS in owner.metadata
    given = error.get("input")
    if setting == "redis_url":  # its password stays out of messages and logs
        given = redacted(str(given))
    if error["type"] in _BOUNDS:
        number, longer, key = _BOUNDS[error["type"]]
        bound = _shown(error.get("ctx", {})[key], duration)
        phrase = longer if duration else number
        return f"{setting.upper()}: {_shown(given, duration)} {phrase} {bound}"
    if error["type"] in _NOT_A:
        return f"{setting.upper()}: {_shown(given, duration)!r} is not {_NOT_A[error['type']]}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{setting.upper()}: {message} (got {_shown(given, duration)!r})"


def _shown(value: object, duration: bool) -> str:
    """A value as the user writes it: `15m` for 900 seconds of a duration, `a,b` for a set."""
    if isinstance(value, frozenset):
        return ",".join(sorted(map(str, value)))
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if duration:
        for unit, size in (("h", 3600), ("m", 60)):
            if value and value % size == 0:
                return f"{value // size:g}{unit}"
        return f"{value:g}s"
    return f"{value:g}" if isinstance(value, float) and not value.is_integer() else str(int(value))


def load_settings(command: Command | None = None, **overrides: Any) -> Settings:
    """Read and validate the settings, including the limits handed to the graph and, with
    `command`, what that command needs. Every problem is reported at once: a setting that
    fails is replaced by its default so the checks that depend on it still run."""
    problems: list[str] = []
    replaced: dict[str, Any] = {}
    settings: Settings | None = None
    while settings is None:
        try:
            settings = Settings(**{**overrides, **replaced})
        except ValidationError as exc:
            problems.append(describe(exc))
            failed = {str(e["loc"][0]) for e in exc.errors() if e["loc"]} - set(replaced)
            if not failed & set(Settings.model_fields):
                # A default that fails with the other values: nothing left to replace.
                raise SettingsError("\n".join(problems)) from None
            for name in failed & set(Settings.model_fields):
                replaced[name] = Settings.model_fields[name].get_default(call_default_factory=True)
    problems += settings.typed_problems()
    if command is not None:
        reported = {name.upper() for name in replaced}
        problems += [p for p in settings.missing(command) if p.split(":")[0] not in reported]
    if problems:
        raise SettingsError("\n".join(problems))
    return settings
