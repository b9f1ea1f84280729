"""Every setting, read once from the environment (or `.env`) and handed down as typed objects.

Errors name the variable to fix. The README's settings table mirrors this class.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.worker import ABORT_WAIT_S, WorkerTiming
from gates.config import ActionPolicy
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.rubric import DEFAULT_RUBRIC

LEASE_KUBE_CALLS = 6
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
Command = Literal["serve", "worker", "investigate"]


class SettingsError(Exception):
    """One line per bad setting: `NAME: what is wrong; what to set`."""


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

    # The model
    google_api_key: SecretStr | None = None
    llm_model: str = "google_genai:gemini-3.8-flash"
    gemini_base_url: str | None = None
    llm_timeout: float = Field(default=60.0, gt=0)
    llm_max_retries: int = Field(default=2, ge=0, le=10)
    # Grafana Tempo
    tempo_url: str | None = None
    tempo_tenant: str | None = None
    tempo_timeout: float = Field(default=5.0, gt=0)
    # Redis (checkpoints)
    redis_url: str = "redis://localhost:6379/0"
    redis_prefix: str = "tracegate"  # key prefix for the bot's own keys (not checkpoints)
    checkpoint_ttl_minutes: float = Field(default=7 * 24 * 60, gt=0)
    # Limits of one investigation turn (validated by GraphLimits)
    tool_budget: int = 8
    recursion_limit: int = 25
    trace_max_revisions: int = 2
    claim_max_revisions: int = 2
    trace_verify_concurrency: int = 64
    context_budget_tokens: int = 2000
    question_max_chars: int = 8000
    # The incident thread as context (0 messages: not read)
    thread_context_messages: int = Field(default=50, ge=0, le=1000)
    thread_context_chars: int = Field(default=12_000, ge=1000, le=200_000)
    # Rubric grading
    default_rubric: str = DEFAULT_RUBRIC  # empty: no grading unless a channel sets a rubric
    rubric_max_iterations: Any = 3  # validated by GraphLimits, which names the setting
    grader_model: str | None = None  # default: LLM_MODEL
    grader_max_steps: int = 3
    rubric_editors: str = ""  # Slack user IDs; empty: the action approvers; `*`: anyone
    rubric_max_chars: int = Field(default=4000, ge=1, le=40_000)
    # Kubernetes actions
    kubeconfig: str | None = None
    kube_timeout: float = Field(default=10.0, gt=0)
    actions_enabled: bool = False
    allowed_namespaces: str = ""
    protected_namespaces: str = "kube-system,kube-public,kube-node-lease"
    protected_deployments: str = ""
    max_scale_factor: float = Field(default=10.0, gt=1)
    max_replicas: int = Field(default=50, ge=1)
    breaker_failure_threshold: int = Field(default=3, ge=1)
    breaker_window_minutes: int = Field(default=30, ge=1)
    breaker_max_actions_per_target: int = Field(default=3, ge=1)
    breaker_max_actions_global: int = Field(default=10, ge=1)
    approval_ttl: str = "15m"
    action_approvers: str = ""
    action_approver_group: str | None = None
    allow_self_approval: bool = False
    judge_fail_mode: Literal["closed", "open"] = "closed"
    judge_model: str | None = None  # default: LLM_MODEL
    action_lease: str = "2m"  # approved/executing longer than this: settled by the reconciler
    reconcile_interval: str = "30s"
    rollout_watch_timeout: str = "5m"
    # Durable turns
    worker_mode: Literal["inline", "queue"] = "inline"  # queue: `tracegate worker` runs turns
    max_attempts: int = Field(default=3, ge=1, le=20)  # runs of one turn before giving up
    shutdown_grace: float = Field(default=20.0, gt=0, le=600)  # seconds, on SIGTERM
    recovery: float = Field(default=30.0, ge=10, le=600)  # a dead worker's turn resumes within
    worker_concurrency: int = Field(default=32, ge=1, le=1000)
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

    @field_validator("tempo_url", "gemini_base_url", "grafana_url", "slack_api_url")
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

    @field_validator("approval_ttl", "action_lease", "reconcile_interval", "rollout_watch_timeout")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_duration(value)
        return value

    @field_validator("action_lease")
    @classmethod
    def _lease_outlasts_an_execution(cls, value: str, info: ValidationInfo) -> str:
        # A live executor makes at most this many API calls between two transitions; a
        # shorter lease would let the reconciler settle a request that is still running.
        floor = LEASE_KUBE_CALLS * info.data.get("kube_timeout", 0)
        if parse_duration(value) < floor:
            raise ValueError(
                f"{value} is shorter than {LEASE_KUBE_CALLS} × KUBE_TIMEOUT ({floor:g}s); "
                "raise ACTION_LEASE or lower KUBE_TIMEOUT"
            )
        return value

    @property
    def action_lease_s(self) -> int:
        return parse_duration(self.action_lease)

    @property
    def reconcile_interval_s(self) -> int:
        return parse_duration(self.reconcile_interval)

    @field_validator("protected_deployments")
    @classmethod
    def _targets(cls, value: str) -> str:
        for entry in _split(value):
            if entry.count("/") != 1 or not all(entry.split("/")):
                raise ValueError(f"entry {entry!r} is not namespace/name")
        return value

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

    def judge_spec(self) -> ModelSpec:
        return self.model_spec().model_copy(update={"model": self.judge_model or self.llm_model})

    def action_policy(self) -> ActionPolicy:
        return ActionPolicy(
            actions_enabled=self.actions_enabled,
            allowed_namespaces=frozenset(_split(self.allowed_namespaces)),
            protected_namespaces=frozenset(_split(self.protected_namespaces)),
            protected_deployments=frozenset(_split(self.protected_deployments)),
            max_scale_factor=self.max_scale_factor,
            max_replicas=self.max_replicas,
            breaker_failure_threshold=self.breaker_failure_threshold,
            breaker_window_s=self.breaker_window_minutes * 60,
            breaker_max_per_target=self.breaker_max_actions_per_target,
            breaker_max_global=self.breaker_max_actions_global,
            approval_ttl_s=parse_duration(self.approval_ttl),
            approvers=frozenset(_split(self.action_approvers)),
            allow_self_approval=self.allow_self_approval,
            judge_fail_mode=self.judge_fail_mode,
            rollout_watch_s=parse_duration(self.rollout_watch_timeout),
        )

    def model_spec(self) -> ModelSpec:
        return ModelSpec(
            model=self.llm_model,
            api_key=self.google_api_key.get_secret_value() if self.google_api_key else None,
            base_url=self.gemini_base_url,
            timeout_s=self.llm_timeout,
            max_retries=self.llm_max_retries,
        )

    def tempo_spec(self) -> TempoSpec:
        if not self.tempo_url:
            raise SettingsError(
                "TEMPO_URL: not set; set it to your Tempo's HTTP API, e.g. http://tempo:3200"
            )
        return TempoSpec(url=self.tempo_url, tenant=self.tempo_tenant, timeout_s=self.tempo_timeout)

    def worker_timing(self) -> WorkerTiming:
        """Lease, heartbeat and sweep, derived from RECOVERY so a dead worker's turn is
        taken up within it: heartbeat + two sweeps + saq's abort wait = RECOVERY."""
        r = self.recovery
        sweep = max(1, int(r / 10))
        return WorkerTiming(
            lease_s=r / 3,
            heartbeat_s=max(3, int(r - 2 * sweep - ABORT_WAIT_S)),
            sweep_s=sweep,
            shutdown_grace_s=self.shutdown_grace,
            concurrency=self.worker_concurrency,
        )

    def graph_limits(self) -> GraphLimits:
        return GraphLimits(
            tool_budget=self.tool_budget,
            recursion_limit=self.recursion_limit,
            trace_max_revisions=self.trace_max_revisions,
            claim_max_revisions=self.claim_max_revisions,
            trace_verify_concurrency=self.trace_verify_concurrency,
            context_budget_tokens=self.context_budget_tokens,
            question_max_chars=self.question_max_chars,
            rubric_max_iterations=self.rubric_max_iterations,
            grader_max_steps=self.grader_max_steps,
        )

    def grader_spec(self) -> ModelSpec:
        return self.model_spec().model_copy(update={"model": self.grader_model or self.llm_model})

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


_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(value: str) -> int:
    """Seconds from `900`, `900s`, `15m` or `1h`."""
    text = value.strip().lower()
    unit = _UNITS.get(text[-1:])
    number = text[:-1] if unit else text
    if not number.isdigit() or int(number) == 0:
        raise ValueError(f"{value!r} is not a duration like 900, 900s, 15m or 1h")
    return int(number) * (unit or 1)


def describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        name = str(error["loc"][0]).upper() if error["loc"] else "settings"
        message = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"{name}: {message} (got {error.get('input')!r})")
    return "\n".join(lines)


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
    for check in (settings.graph_limits, settings.action_policy):
        try:
            check()
        except ValidationError as exc:
            problems.append(describe(exc))
    if command is not None:
        reported = {name.upper() for name in replaced}
        problems += [p for p in settings.missing(command) if p.split(":")[0] not in reported]
    if problems:
        raise SettingsError("\n".join(problems))
    return settings
