"""Every setting, read once from the environment (or `.env`) and handed down as typed objects.

`Settings` is made of groups, one per concern: each field of it is a model (the typed config
itself where one exists: `GraphLimits`, `ModelSpec`, `ActionPolicy`, ...) annotated with its
`Group` (the variables' prefix, the page's section). A model's field is set by one variable:
its `validation_alias`, else the group's prefix and the field's name (`TEMPO_` + `tenant`).
The reader (`_Variables`), the error lines (`_problem`) and docs/configuration.md
(`make docs`, `bot/process/settings_docs.py`) all read that one declaration: each default,
bound and description is written once, in its model.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.sources import EnvSettingsSource, InitSettingsSource

from bot.process.redis_client import (
    SCHEMES,
    SENTINEL_SCHEME,
    RedisSpec,
    parse_sentinel_url,
    redacted,
)
from bot.turn.notifications import AlertPolicy
from bot.turn.timing import WorkerTiming
from gates.config import (
    NOT_A_SETTING,
    ActionPolicy,
    Duration,
    Names,
    SettingsGroup,
    parse_duration,
)
from gates.store import DEFAULT_LEASE_S
from graph.capacity import CapacityLimits
from graph.config import (
    GraphLimits,
    HttpUrl,
    ModelSpec,
    TempoSettings,
    TempoSpec,
)
from graph.rubric import DEFAULT_RUBRIC
from graph.tools import ToolSet
from graph.tools.registry import TOOLSETS

LEASE_KUBE_CALLS = 6
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
Command = Literal["serve", "worker", "investigate"]


class SettingsError(Exception):
    """One line per bad setting: `NAME: what is wrong; what to set`."""


@dataclass(frozen=True)
class Group:
    """A field of `Settings` as the environment and the page see it."""

    prefix: str  # of its variables, for the fields without a validation_alias
    title: str  # the page's section; consecutive groups of one title share it
    intro: str = ""  # under the section's title (the first group's)


class SlackSettings(SettingsGroup):
    bot_token: SecretStr | None = Field(
        default=None, description="The Bot User OAuth Token, `xoxb-…`."
    )
    signing_secret: SecretStr | None = Field(
        default=None,
        description=(
            "Verifies that requests come from Slack: needed in HTTP mode, not with "
            "`SLACK_APP_TOKEN` (Socket Mode)."
        ),
    )
    app_token: SecretStr | None = Field(
        default=None,
        description="An app-level token (`xapp-…`): set it to use Socket Mode instead of HTTP.",
    )
    api_url: HttpUrl = Field(
        default="https://slack.com/api/",
        description="Where the Slack Web API is (the sandbox simulator in tests).",
    )
    port: int = Field(
        default=3000,
        ge=0,
        le=65535,
        validation_alias="PORT",
        description=(
            "HTTP port for `/slack/events` (serve), and for `/livez`, `/readyz` (alias "
            "`/healthz`) and `/metrics` (serve and worker; `0`: any free port)."
        ),
    )
    progress_interval: float = Field(
        default=1.5,
        ge=0,
        validation_alias="PROGRESS_INTERVAL",
        description="Seconds between edits of the placeholder (Slack rate limits).",
    )
    streaming: Literal["auto", "on", "off"] = Field(
        default="auto",
        description=(
            "`auto`: the answer streams as a live task timeline (`chat.startStream`) where "
            "Slack allows it, else the placeholder and edits (a workspace's refusal is "
            "remembered for an hour); `on`: every turn tries streaming first; `off`: "
            "placeholder and edits only. The answer is added only after every guard passed."
        ),
    )
    charts: Literal["on", "off"] = Field(
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
        validation_alias="APPROVER_GROUP_CACHE",
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
        validation_alias="ALLOW_EXTERNAL_USERS",
        description=(
            "Let Slack Connect users (people of another organisation's workspace, in a shared "
            "channel) start investigations and approve actions. Off: they are told so in the "
            "thread, and no model or tool call is made."
        ),
    )
    allow_guest_users: bool = Field(
        default=False,
        validation_alias="ALLOW_GUEST_USERS",
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
        validation_alias="INVESTIGATIONS_PER_USER_PER_HOUR",
        description=(
            "Investigations one person may start per clock hour (UTC), all processes together; "
            "past it the thread says when the next question is taken and no model call is made."
        ),
    )
    investigations_per_channel_per_hour: int = Field(
        default=120,
        ge=1,
        validation_alias="INVESTIGATIONS_PER_CHANNEL_PER_HOUR",
        description=(
            "Investigations people may start in one channel per clock hour (UTC), all processes "
            "together (automatic ones count against `AUTO_INVESTIGATIONS_PER_HOUR` instead)."
        ),
    )


class GrafanaSettings(SettingsGroup):
    url: HttpUrl | None = Field(
        default=None,
        description=(
            "Grafana base URL: verified trace IDs link to Explore, and each checked fact of an "
            "answer links to the query that showed it (Steps and the footer's sources)."
        ),
    )


def _redis_url(value: str) -> str:
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


def _ca_file(value: str | None) -> str | None:
    if value and not Path(value).is_file():
        raise ValueError(f"{value} is not a file; point it at a PEM CA bundle or unset it")
    return value or None


class RedisSettings(SettingsGroup):
    url: Annotated[str, AfterValidator(_redis_url)] = Field(
        default="redis://localhost:6379/0",
        description=(
            "Redis with RedisJSON + RediSearch (Redis 8, Redis Stack 7.4, or a managed "
            "equivalent): `redis://`, `rediss://` (TLS), `unix://`, or Sentinel: "
            "`redis+sentinel://host1:26379,host2:26379/<service>/<db>` (the primary of "
            "`<service>`, followed through failovers). Redis Cluster is not supported."
        ),
    )
    prefix: str = Field(
        default="tracegate",
        description=(
            "Prefix of every key and search index the bot makes in Redis (turns, leases, "
            "dedupe, actions, audit, checkpoints), so bots can share a Redis. Checkpoints "
            "written before it applied to them: `tracegate migrate-checkpoints`."
        ),
    )
    username: str | None = Field(
        default=None,
        description="User of the Redis data nodes (ACL), when not in `REDIS_URL`.",
    )
    password: SecretStr | None = Field(
        default=None,
        description=(
            "Password of the Redis data nodes, when not in `REDIS_URL` (a password in both "
            "must agree)."
        ),
    )
    sentinel_username: str | None = Field(
        default=None,
        description="User of the Sentinel nodes (ACL), with a `redis+sentinel://` URL.",
    )
    sentinel_password: SecretStr | None = Field(
        default=None,
        description=(
            "Password of the Sentinel nodes (`requirepass` of the sentinels), with a "
            "`redis+sentinel://` URL; the data nodes' is `REDIS_PASSWORD`."
        ),
    )
    tls: bool = Field(
        default=False,
        description=(
            "TLS to the Redis data nodes. `rediss://` URLs use TLS anyway; with Sentinel this "
            "is how TLS to the primary is asked for."
        ),
    )
    sentinel_tls: bool = Field(
        default=False, description="TLS to the Sentinel nodes (`redis+sentinel://` URLs)."
    )
    tls_ca_file: Annotated[str | None, AfterValidator(_ca_file)] = Field(
        default=None,
        description=(
            "PEM file of the CA that signed the Redis (and Sentinel) server certificates; "
            "unset: the system's trusted CAs."
        ),
    )
    failover_timeout: float = Field(
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
    socket_timeout: float = Field(
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
        validation_alias="CHECKPOINT_TTL_MINUTES",
        description="Thread checkpoints expire this long after last use (the default: 7 days).",
    )
    allow_eviction: bool = Field(
        default=False,
        description=(
            "`serve`, `worker` and `investigate` refuse to start on a Redis whose "
            "`maxmemory-policy` is not `noeviction` (read from `INFO memory`): evicted leases, "
            "turns and action requests would be lost without a trace. `true`: start anyway, "
            "with a warning, for those who accept that risk."
        ),
    )


class ThreadSettings(SettingsGroup):
    messages: int = Field(
        default=50,
        ge=0,
        le=1000,
        description=(
            "Messages of the incident thread (posted before the question, not yet seen by the "
            "investigation) handed to the agent as context: the thread's first message, then the "
            "newest. `0`: the thread is not read."
        ),
    )
    chars: int = Field(
        default=12_000,
        ge=1000,
        le=200_000,
        description="Upper bound on the size of that context, markers included.",
    )


class RubricSettings(SettingsGroup):
    default_rubric: str = Field(
        default=DEFAULT_RUBRIC,
        validation_alias="DEFAULT_RUBRIC",
        description=(
            "Newline-separated checklist (`\\n` accepted on one line). Empty: no grading unless a "
            "channel sets a rubric."
        ),
    )
    grader_model: str | None = Field(
        default=None,
        validation_alias="GRADER_MODEL",
        description="The grader's model (a cheaper one is fine). Unset: `LLM_MODEL`.",
    )
    editors: Names = Field(
        default=frozenset(),
        description=(
            "Comma-separated Slack user IDs who may `/rubric set` and `/rubric clear`; `*` lets "
            "anyone. Every change (and every refused one) goes to the audit stream with its "
            "actor. Empty: the action approvers (`ACTION_APPROVERS` and `ACTION_APPROVER_GROUP`)."
        ),
    )
    max_chars: int = Field(
        default=4000,
        ge=1,
        le=40_000,
        description=(
            "Longest checklist `/rubric set` accepts (after cleaning); a longer one is refused, "
            "naming this setting."
        ),
    )

    @property
    def checklist(self) -> str | None:
        """DEFAULT_RUBRIC, with `\\n` accepted for newlines (one-line environment values)."""
        text = self.default_rubric.replace("\\n", "\n").strip()
        return text or None

    def editor_ids(self) -> tuple[bool, frozenset[str]]:
        """RUBRIC_EDITORS as (anyone, user ids); no ids means the action approvers."""
        return "*" in self.editors, self.editors - {"*"}


def _kubeconfig(value: str | None) -> str | None:
    if value:
        first = value.split(os.pathsep)[0]  # the file kubernetes_asyncio reads
        if not Path(first).is_file():
            raise ValueError(f"{first} is not a file; point it at a kubeconfig or unset it")
    return value


class KubernetesSettings(SettingsGroup):
    """The cluster, and what of actions `ActionPolicy` does not hold (who else approves,
    the judge, the leases)."""

    kubeconfig: Annotated[str | None, AfterValidator(_kubeconfig)] = Field(
        default=None,
        description=(
            "Kubeconfig for the Kubernetes tools and actions (first path if a list). Unset: "
            "in-cluster credentials when running in a pod, otherwise no Kubernetes tools."
        ),
    )
    kube_timeout: float = Field(default=10.0, gt=0, description="Seconds per Kubernetes API call.")
    action_approver_group: str | None = Field(
        default=None, description="A Slack user group whose members may approve."
    )
    judge_model: str | None = Field(
        default=None, description="The model that reviews proposals. Unset: `LLM_MODEL`."
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

    @field_validator("action_lease")
    @classmethod
    def _lease_outlasts_an_execution(cls, value: int, info: ValidationInfo) -> int:
        # A live executor makes at most this many API calls between two transitions; a
        # shorter lease would let the reconciler settle a request that is still running.
        floor = LEASE_KUBE_CALLS * info.data.get("kube_timeout", 0)
        if value < floor:
            raise ValueError(
                f"{written(value, duration=True)} is shorter than {LEASE_KUBE_CALLS} × "
                f"KUBE_TIMEOUT ({floor:g}s); raise ACTION_LEASE or lower KUBE_TIMEOUT"
            )
        return value


class TurnSettings(SettingsGroup):
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


class LogSettings(SettingsGroup):
    level: str = Field(
        default="INFO",
        description="Python logging level: `DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`.",
    )
    format: Literal["text", "json"] = Field(
        default="text",
        description=(
            "`text`, or `json`: one JSON object a line (for log shippers). Either way a turn's "
            "lines carry team, channel, thread, turn and correlation id."
        ),
    )

    @field_validator("level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        if value.strip().upper() not in LOG_LEVELS:
            raise ValueError(f"{value!r} is not one of {', '.join(LOG_LEVELS)}")
        return value.strip().upper()


class _First(BaseSettings):
    """The groups before the optional evidence sources, in the page's order."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", frozen=True)

    slack: Annotated[
        SlackSettings, Group("SLACK_", "Slack", "The app's tokens, the Web API, the HTTP port.")
    ] = Field(default_factory=SlackSettings)
    grafana: Annotated[
        GrafanaSettings,
        Group("GRAFANA_", "Grafana links", "Only for links in answers; never queried."),
    ] = Field(default_factory=GrafanaSettings)
    model: Annotated[
        ModelSpec, Group("", "The model", "Gemini, through langchain-google-genai.")
    ] = Field(default_factory=ModelSpec)
    capacity: Annotated[
        CapacityLimits,
        Group(
            "MODEL_",
            "Model capacity",
            "One limit for every `serve` and `worker` process (kept in Redis), waits for quota, "
            "a fallback model, token budgets.",
        ),
    ] = Field(default_factory=CapacityLimits)
    tempo: Annotated[
        TempoSettings,
        Group("TEMPO_", "Grafana Tempo", "Traces: the tools and the trace guard."),
    ] = Field(default_factory=TempoSettings)


def tool_groups(toolsets: Sequence[ToolSet], taken: Iterable[str] = ()) -> dict[str, Any]:
    """A group for each tool set with settings of its own, as its module declares them; a
    set named as a group already is (`taken`, or `slack`, `tempo`, ...) is refused."""
    taken = {*taken, *_First.model_fields}
    for toolset in toolsets:
        if toolset.settings is not None and toolset.name in taken:
            raise ValueError(f"tool set {toolset.name!r}: a settings group has that name")
    return {
        toolset.name: (
            Annotated[
                toolset.settings,
                Group(toolset.env_prefix, toolset.section or toolset.label, toolset.intro),
            ],
            Field(default_factory=toolset.settings),
        )
        for toolset in toolsets
        if toolset.settings is not None
    }


if TYPE_CHECKING:

    class _WithTools(_First):
        pass

else:  # the registry's tool sets, after Tempo (PROMETHEUS_*, LOKI_*)
    _WithTools = create_model("_WithTools", __base__=_First, **tool_groups(TOOLSETS))


class Settings(_WithTools):
    """The groups, in the order of docs/configuration.md."""

    redis: Annotated[
        RedisSettings,
        Group("REDIS_", "Redis", "Checkpoints, turns, the queue, actions and the audit stream."),
    ] = Field(default_factory=RedisSettings)
    limits: Annotated[
        GraphLimits, Group("", "One investigation", "Limits and checks of one turn of the graph.")
    ] = Field(default_factory=GraphLimits)
    thread: Annotated[
        ThreadSettings,
        Group("THREAD_CONTEXT_", "The incident thread", "What the agent reads of the thread."),
    ] = Field(default_factory=ThreadSettings)
    rubric: Annotated[
        RubricSettings,
        Group("RUBRIC_", "Rubric grading", "How answers are graded, and who may change it."),
    ] = Field(default_factory=RubricSettings)
    kubernetes: Annotated[
        KubernetesSettings,
        Group(
            "",
            "Kubernetes and actions",
            "The cluster's tools, and the gates, approvals and follow-up of actions.",
        ),
    ] = Field(default_factory=KubernetesSettings)
    actions: Annotated[ActionPolicy, Group("", "Kubernetes and actions")] = Field(
        default_factory=ActionPolicy
    )
    turns: Annotated[
        TurnSettings,
        Group("", "Durable turns", "Who runs turns, retries, graceful stop, recovery."),
    ] = Field(default_factory=TurnSettings)
    worker: Annotated[WorkerTiming, Group("", "Durable turns")] = Field(
        default_factory=WorkerTiming
    )
    alerts: Annotated[
        AlertPolicy,
        Group(
            "ALERT_",
            "Alerts",
            "Investigations alerts start: webhooks, channels where alerts are posted, storm "
            "control (docs/alerts.md).",
        ),
    ] = Field(default_factory=AlertPolicy)
    logs: Annotated[LogSettings, Group("LOG_", "Logs")] = Field(default_factory=LogSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        assert isinstance(init_settings, InitSettingsSource)
        assert isinstance(env_settings, EnvSettingsSource)
        assert isinstance(dotenv_settings, EnvSettingsSource)
        return tuple(
            _Variables(settings_cls, values)
            for values in (
                init_settings.init_kwargs,
                env_settings.env_vars,
                dotenv_settings.env_vars,
            )
        )

    def check_for_serve(self, *, worker: bool = False) -> None:
        """Everything `tracegate serve` (or, with `worker`, `tracegate worker`) needs,
        reported together, by name."""
        if problems := self.missing("worker" if worker else "serve"):
            raise SettingsError("\n".join(problems))

    def missing(self, command: Command) -> list[str]:
        """What `command` needs and is not set (or not usable), one line each."""
        problems = []
        if command != "investigate":
            problems += self._missing_slack(worker=command == "worker")
        problems += self.missing_model()
        if not self.tempo.url:
            problems.append("TEMPO_URL: not set; set it to your Tempo's HTTP API")
        return problems

    def missing_model(self) -> list[str]:
        """What calling the model needs: an API key, or Vertex AI's project and location."""
        if not self.model.vertexai:
            if self.model.api_key:
                return []
            return [
                "GOOGLE_API_KEY: not set; the agent needs a Gemini API key "
                "(or GOOGLE_GENAI_USE_VERTEXAI=true for Vertex AI)"
            ]
        return [
            f"{name}: not set; GOOGLE_GENAI_USE_VERTEXAI=true needs {what}"
            for name, value, what in (
                ("GOOGLE_CLOUD_PROJECT", self.model.project, "the Google Cloud project"),
                ("GOOGLE_CLOUD_LOCATION", self.model.location, "the Vertex AI region"),
            )
            if not value
        ]

    def _missing_slack(self, *, worker: bool) -> list[str]:
        problems = []
        bot = self.slack.bot_token.get_secret_value() if self.slack.bot_token else ""
        if not bot:
            problems.append("SLACK_BOT_TOKEN: not set; use the app's Bot User OAuth Token (xoxb-…)")
        elif not bot.startswith("xoxb-"):
            problems.append(
                "SLACK_BOT_TOKEN: does not start with xoxb-; use the Bot User OAuth Token"
            )
        app = self.slack.app_token.get_secret_value() if self.slack.app_token else ""
        if app and not app.startswith("xapp-"):
            problems.append("SLACK_APP_TOKEN: does not start with xapp-; use an app-level token")
        if not worker and not app and not self.slack.signing_secret:
            problems.append(
                "SLACK_SIGNING_SECRET: not set; copy it from the app's Basic Information page "
                "(or set SLACK_APP_TOKEN for Socket Mode)"
            )
        return problems

    @property
    def kubernetes_configured(self) -> bool:
        return bool(self.kubernetes.kubeconfig) or "KUBERNETES_SERVICE_HOST" in os.environ

    def judge_spec(self) -> ModelSpec:
        return self.model.model_copy(
            update={"model": self.kubernetes.judge_model or self.model.model}
        )

    def grader_spec(self) -> ModelSpec:
        return self.model.model_copy(update={"model": self.rubric.grader_model or self.model.model})

    def redis_spec(self) -> RedisSpec:
        """Where Redis is and how to reach it; SettingsError names the settings that clash."""
        redis = self.redis
        problems = []
        url = urlsplit(redis.url)
        password = redis.password.get_secret_value() if redis.password else None
        in_url = unquote(url.password) if url.password else None
        user_in_url = unquote(url.username) if url.username else None
        for name, what, given, written_in_url in (
            ("REDIS_PASSWORD", "password", password, in_url),
            ("REDIS_USERNAME", "user", redis.username, user_in_url),
        ):
            if given and written_in_url and given != written_in_url:
                problems.append(
                    f"{name}: differs from the {what} in REDIS_URL; set it in one place"
                )
        for name, value, state in (
            ("REDIS_SENTINEL_USERNAME", redis.sentinel_username, "set"),
            ("REDIS_SENTINEL_PASSWORD", redis.sentinel_password, "set"),
            ("REDIS_SENTINEL_TLS", redis.sentinel_tls, "true"),
        ):
            if value and url.scheme != SENTINEL_SCHEME:
                problems.append(f"{name}: {state}, but REDIS_URL is not a redis+sentinel:// URL")
        if url.scheme == "unix" and redis.tls:
            problems.append("REDIS_TLS: true, but REDIS_URL is a unix:// socket (no TLS there)")
        if redis.tls_ca_file and not (redis.tls or redis.sentinel_tls or url.scheme == "rediss"):
            problems.append(
                "REDIS_TLS_CA_FILE: set, but nothing uses TLS; set REDIS_TLS=true (or "
                "REDIS_SENTINEL_TLS=true, or a rediss:// URL)"
            )
        if problems:
            raise SettingsError("\n".join(problems))
        sentinel_password = redis.sentinel_password
        return RedisSpec(
            url=redis.url,
            username=redis.username or user_in_url,
            password=password or in_url,
            sentinel_username=redis.sentinel_username,
            sentinel_password=sentinel_password.get_secret_value() if sentinel_password else None,
            tls=redis.tls or url.scheme == "rediss",
            sentinel_tls=redis.sentinel_tls,
            tls_ca_file=redis.tls_ca_file,
            failover_timeout_s=redis.failover_timeout,
            socket_timeout_s=redis.socket_timeout,
        )

    def tempo_spec(self) -> TempoSpec:
        if not self.tempo.url:
            raise SettingsError(
                "TEMPO_URL: not set; set it to your Tempo's HTTP API, e.g. http://tempo:3200"
            )
        return TempoSpec(**self.tempo.model_dump(), grafana_url=self.grafana.url)

    def tool_settings(self, toolsets: Sequence[ToolSet] = TOOLSETS) -> dict[str, BaseModel]:
        """What each configured tool set's tools are bound to, by the set's name."""
        configured = {}
        for toolset in toolsets:
            group = getattr(self, toolset.name, None)
            if isinstance(group, BaseModel):
                bound = toolset.bound_settings(group, self.grafana.url)
                if bound is not None:
                    configured[toolset.name] = bound
        return configured

    def evidence_sources(self) -> list[str]:
        """The sources the agent reads, for the start-up line."""
        sources = ["Tempo"]
        if self.kubernetes_configured:
            sources.append("Kubernetes (rollouts, pods, events, logs)")
        configured = self.tool_settings()
        return sources + [t.label for t in TOOLSETS if t.name in configured]


tool_groups(TOOLSETS, Settings.__annotations__)  # nor as a group declared after them (redis)


# --- the variables: one per field of a group --------------------------------------------


@dataclass(frozen=True)
class Variable:
    """One environment variable: the group field it sets."""

    name: str  # TEMPO_TIMEOUT
    group: str  # Settings' field: tempo
    field: str  # the group model's field: timeout_s
    info: FieldInfo
    section: Group

    @property
    def duration(self) -> bool:
        return any(getattr(rule, "func", None) is parse_duration for rule in self.info.metadata)


def variables(model: type[Settings] = Settings) -> dict[str, Variable]:
    """Every variable `model` reads, by name, in the page's order."""
    found: dict[str, Variable] = {}
    for attribute, group in model.model_fields.items():
        section = next(rule for rule in group.metadata if isinstance(rule, Group))
        config = group.annotation
        assert isinstance(config, type) and issubclass(config, BaseModel)
        for field, info in config.model_fields.items():
            if info.json_schema_extra == NOT_A_SETTING:
                continue
            alias = info.validation_alias
            name = alias if isinstance(alias, str) else section.prefix + field.upper()
            if name in found:
                raise ValueError(f"{name} is set by two fields: {attribute}.{field} and another")
            found[name] = Variable(name, attribute, field, info, section)
    return found


VARIABLES = variables()


class _Variables(PydanticBaseSettingsSource):
    """The groups from `values` keyed by variable (any case: the environment, `.env`, or
    `Settings(tempo_url=...)`), and from values already grouped (`Settings(**s.model_dump())`;
    a variable given beside them wins)."""

    def __init__(self, settings_cls: type[BaseSettings], values: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self.values = values

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads every field at once

    def __call__(self) -> dict[str, Any]:
        assert issubclass(self.settings_cls, Settings)
        known = variables(self.settings_cls)
        grouped: dict[str, dict[str, Any]] = {}
        for key, value in self.values.items():
            if key in self.settings_cls.model_fields and isinstance(value, Mapping):
                grouped.setdefault(key, {}).update(value)
        for key, value in self.values.items():
            variable = known.get(key.upper())
            if variable is not None:
                grouped.setdefault(variable.group, {})[variable.field] = value
        return grouped


# --- errors, named by the variable --------------------------------------------------------

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


def _variable(error: ErrorDetails, known: Mapping[str, Variable]) -> Variable | None:
    where = tuple(map(str, error["loc"][:2]))
    return next((v for v in known.values() if (v.group, v.field) == where), None)


def _problem(error: ErrorDetails, known: Mapping[str, Variable]) -> str:
    """One error of `Settings` in one line, named by the environment variable (of `known`)."""
    variable = _variable(error, known)
    name = variable.name if variable else ".".join(map(str, error["loc"])).upper() or "SETTINGS"
    duration = variable is not None and variable.duration
    given = error.get("input")
    if name == "REDIS_URL":  # its password stays out of messages and logs
        given = redacted(str(given))
    if error["type"] in _BOUNDS:
        number, longer, key = _BOUNDS[error["type"]]
        bound = written(error.get("ctx", {})[key], duration)
        return f"{name}: {written(given, duration)} {longer if duration else number} {bound}"
    if error["type"] in _NOT_A:
        return f"{name}: {written(given, duration)!r} is not {_NOT_A[error['type']]}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{name}: {message} (got {written(given, duration)!r})"


def written(value: object, duration: bool = False) -> str:
    """A value as it is written in the environment: `15m` for 900 seconds of a duration,
    `false`, `1.5`, `a,b` for a set."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, frozenset):
        return ",".join(sorted(map(str, value)))
    if not isinstance(value, int | float):
        return str(value)
    if duration:
        for unit, size in (("h", 3600), ("m", 60)):
            if value and value % size == 0:
                return f"{value // size:g}{unit}"
        return f"{value:g}s"
    return f"{value:g}" if isinstance(value, float) and not value.is_integer() else str(int(value))


def load_settings(
    command: Command | None = None, model: type[Settings] = Settings, **overrides: Any
) -> Settings:
    """Read and validate the settings (`overrides` by variable, any case: `tempo_url=`),
    with `command`, what that command needs. Every problem is reported at once: a setting
    that fails is replaced by its default so the checks that depend on it still run.
    (`model`: `Settings` with more tool sets' groups, as a test makes with `tool_groups`.)"""
    known = VARIABLES if model is Settings else variables(model)
    problems: list[str] = []
    replaced: dict[str, Any] = {}
    settings: Settings | None = None
    while settings is None:
        try:
            settings = model(**{**overrides, **replaced})
        except ValidationError as exc:
            problems += [_problem(error, known) for error in exc.errors()]
            found = (_variable(error, known) for error in exc.errors())
            failed = {v.name.lower(): v for v in found if v and v.name.lower() not in replaced}
            if not failed:
                # A default that fails with the other values: nothing left to replace.
                raise SettingsError("\n".join(problems)) from None
            for key, variable in failed.items():
                replaced[key] = variable.info.get_default(call_default_factory=True)
    try:
        settings.redis_spec()
    except SettingsError as exc:
        problems.append(str(exc))
    if command is not None:
        reported = {name.upper() for name in replaced}
        problems += [p for p in settings.missing(command) if p.split(":")[0] not in reported]
    if problems:
        raise SettingsError("\n".join(problems))
    return settings
