"""Every setting, read once from the environment (or `.env`) and handed down as typed objects.

The typed configs (`GraphLimits`, `ModelSpec`, `TempoSpec`, `ActionPolicy`, `WorkerTiming`)
own their defaults and bounds: a field here that fills one takes its default from it
(`_owned`), and a value it refuses is reported under the variable the user sets (`FILLS`
maps its fields back). The settings no typed config holds keep their default and bound
here. Errors name the variable to fix. The README's settings table mirrors this class.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

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
    },
    CapacityLimits: {
        "rpm": "model_rpm",
        "tpm": "model_tpm",
        "window_s": "model_rate_window",
        "wait_max_s": "model_wait_max",
        "fallback_model": "llm_fallback_model",
        "fallback_after_s": "model_fallback_after",
    },
    TempoSpec: {"url": "tempo_url", "tenant": "tempo_tenant", "timeout_s": "tempo_timeout"},
    PrometheusSpec: {
        "url": "prometheus_url",
        "tenant": "prometheus_tenant",
        "timeout_s": "prometheus_timeout",
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
    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None  # set: Socket Mode instead of HTTP
    slack_api_url: str = "https://slack.com/api/"
    port: int = Field(default=3000, ge=0, le=65535)  # 0: any free port (tests)
    progress_interval: float = Field(default=1.5, ge=0)  # seconds between placeholder edits
    approver_group_cache: int = Field(default=300, ge=0)  # seconds
    # Grafana (links only)
    grafana_url: str | None = None
    grafana_tempo_datasource: str = "tempo"
    grafana_loki_datasource: str = _owned(LokiSpec, "datasource")

    # The model (ModelSpec)
    google_api_key: SecretStr | None = _owned(ModelSpec, "api_key")
    llm_model: str = _owned(ModelSpec, "model")
    gemini_base_url: str | None = _owned(ModelSpec, "base_url")
    llm_timeout: float = _owned(ModelSpec, "timeout_s")
    llm_max_retries: int = _owned(ModelSpec, "max_retries")
    # Model capacity (CapacityLimits): one limit for every process, waits, fallback, budgets
    model_rpm: int = _owned(CapacityLimits, "rpm")
    model_tpm: int = _owned(CapacityLimits, "tpm")
    model_rate_window: Duration = int(_owned(CapacityLimits, "window_s"))
    model_wait_max: Duration = int(_owned(CapacityLimits, "wait_max_s"))
    llm_fallback_model: str | None = _owned(CapacityLimits, "fallback_model")
    model_fallback_after: Duration = int(_owned(CapacityLimits, "fallback_after_s"))
    thread_token_budget: int = _owned(CapacityLimits, "thread_token_budget")
    channel_daily_token_budget: int = _owned(CapacityLimits, "channel_daily_token_budget")
    # Grafana Tempo (TempoSpec)
    tempo_url: str | None = None
    tempo_tenant: str | None = _owned(TempoSpec, "tenant")
    tempo_timeout: float = _owned(TempoSpec, "timeout_s")
    # Optional evidence: Prometheus (or Mimir, Thanos) metrics, Loki logs
    prometheus_url: str | None = None
    prometheus_tenant: str | None = _owned(PrometheusSpec, "tenant")
    prometheus_timeout: float = _owned(PrometheusSpec, "timeout_s")
    loki_url: str | None = None
    loki_tenant: str | None = _owned(LokiSpec, "tenant")
    loki_timeout: float = _owned(LokiSpec, "timeout_s")
    # Redis (checkpoints)
    redis_url: str = "redis://localhost:6379/0"
    redis_prefix: str = "tracegate"  # key prefix for the bot's own keys (not checkpoints)
    checkpoint_ttl_minutes: float = Field(default=7 * 24 * 60, gt=0)
    # Limits of one investigation turn (GraphLimits)
    tool_budget: int = _owned(GraphLimits, "tool_budget")
    recursion_limit: int = _owned(GraphLimits, "recursion_limit")
    trace_max_revisions: int = _owned(GraphLimits, "trace_max_revisions")
    claim_max_revisions: int = _owned(GraphLimits, "claim_max_revisions")
    grounding_max_revisions: int = _owned(GraphLimits, "grounding_max_revisions")
    grounding_mode: Literal["remove", "mark"] = _owned(GraphLimits, "grounding_mode")
    grounding_time_tolerance: Duration = _owned(GraphLimits, "grounding_time_tolerance_s")
    trace_verify_concurrency: int = _owned(GraphLimits, "trace_verify_concurrency")
    context_budget_tokens: int = _owned(GraphLimits, "context_budget_tokens")
    question_max_chars: int = _owned(GraphLimits, "question_max_chars")
    # The incident thread as context (0 messages: not read)
    thread_context_messages: int = Field(default=50, ge=0, le=1000)
    thread_context_chars: int = Field(default=12_000, ge=1000, le=200_000)
    # Rubric grading
    default_rubric: str = DEFAULT_RUBRIC  # empty: no grading unless a channel sets a rubric
    rubric_max_iterations: int = _owned(GraphLimits, "rubric_max_iterations")
    grader_model: str | None = None  # default: LLM_MODEL
    grader_max_steps: int = _owned(GraphLimits, "grader_max_steps")
    rubric_editors: str = ""  # Slack user IDs; empty: the action approvers; `*`: anyone
    rubric_max_chars: int = Field(default=4000, ge=1, le=40_000)
    # Kubernetes actions (ActionPolicy)
    kubeconfig: str | None = None
    kube_timeout: float = Field(default=10.0, gt=0)
    actions_enabled: bool = _owned(ActionPolicy, "actions_enabled")
    allowed_namespaces: str = _owned_list(ActionPolicy, "allowed_namespaces")
    protected_namespaces: str = _owned_list(ActionPolicy, "protected_namespaces")
    protected_deployments: str = _owned_list(ActionPolicy, "protected_deployments")
    max_scale_factor: float = _owned(ActionPolicy, "max_scale_factor")
    max_replicas: int = _owned(ActionPolicy, "max_replicas")
    breaker_failure_threshold: int = _owned(ActionPolicy, "breaker_failure_threshold")
    breaker_window_minutes: int = _owned(ActionPolicy, "breaker_window_minutes")
    breaker_max_actions_per_target: int = _owned(ActionPolicy, "breaker_max_per_target")
    breaker_max_actions_global: int = _owned(ActionPolicy, "breaker_max_global")
    approval_ttl: Duration = _owned(ActionPolicy, "approval_ttl_s")
    action_approvers: str = _owned_list(ActionPolicy, "approvers")
    action_approver_group: str | None = None
    allow_self_approval: bool = _owned(ActionPolicy, "allow_self_approval")
    judge_fail_mode: Literal["closed", "open"] = _owned(ActionPolicy, "judge_fail_mode")
    judge_model: str | None = None  # default: LLM_MODEL
    # proposed/approved/executing longer than this: settled by the reconciler (the lease)
    action_lease: Duration = Field(default=int(DEFAULT_LEASE_S), gt=0)
    reconcile_interval: Duration = Field(default=30, gt=0)
    rollout_watch_timeout: Duration = _owned(ActionPolicy, "rollout_watch_s")
    # Durable turns (WorkerTiming)
    worker_mode: Literal["inline", "queue"] = "inline"  # queue: `tracegate worker` runs turns
    max_attempts: int = Field(default=3, ge=1, le=20)  # runs of one turn before giving up
    shutdown_grace: float = _owned(WorkerTiming, "shutdown_grace_s")  # seconds, on SIGTERM
    recovery: float = _owned(WorkerTiming, "recovery_budget_s")  # a dead worker's turn resumes
    worker_concurrency: int = _owned(WorkerTiming, "concurrency")
    # Logging
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"  # json: one object a line, for log shippers

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
        if urlsplit(value).scheme not in ("redis", "rediss", "unix"):
            raise ValueError(f"{value!r} is not a URL like redis://host:6379/0")
        return value

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
        if not self.google_api_key:
            problems.append("GOOGLE_API_KEY: not set; the agent needs a Gemini API key")
        if not self.tempo_url:
            problems.append("TEMPO_URL: not set; set it to your Tempo's HTTP API")
        return problems

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

    def tempo_spec(self) -> TempoSpec:
        if not self.tempo_url:
            raise SettingsError(
                "TEMPO_URL: not set; set it to your Tempo's HTTP API, e.g. http://tempo:3200"
            )
        return self._typed(TempoSpec)

    def prometheus_spec(self) -> PrometheusSpec | None:
        """None when PROMETHEUS_URL is not set: no metric tools."""
        return self._typed(PrometheusSpec) if self.prometheus_url else None

    def loki_spec(self) -> LokiSpec | None:
        """None when LOKI_URL is not set: no log-query tools."""
        if not self.loki_url:
            return None
        return self._typed(LokiSpec, grafana_url=self.grafana_url)

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

    def typed_problems(self) -> list[str]:
        """What the typed configs refuse, one line each (TEMPO_URL is `missing`'s to check)."""
        problems = []
        for build in (
            self.graph_limits,
            self.action_policy,
            self.model_spec,
            self.worker_timing,
            self.capacity_limits,
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
