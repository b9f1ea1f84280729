"""docs/configuration.md, written from the settings model (`make docs`).

Every field of `Settings` is one row: its variable, its type and bounds (the bounds of the
typed config it fills included), its default as it is written in the environment, and its
description. Nothing is read from the environment or `.env`: the page is the same on every
machine, and a secret's default is never shown.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from pathlib import Path

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from bot.process.settings import FILLS, Command, Settings, parse_duration

PAGE = Path("docs/configuration.md")
COMMAND = "make docs"

# The page's sections, each from its first setting to the next section's first, in the
# order Settings declares them: a new setting lands in the section it is declared in.
SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("slack_bot_token", "Slack", "The app's tokens, the Web API, the HTTP port."),
    ("grafana_url", "Grafana links", "Only for links in answers; never queried."),
    ("google_api_key", "The model", "Gemini, through langchain-google-genai."),
    (
        "model_rpm",
        "Model capacity",
        "One limit for every `serve` and `worker` process (kept in Redis), waits for quota, "
        "a fallback model, token budgets.",
    ),
    ("tempo_url", "Grafana Tempo", "Traces: the tools and the trace guard."),
    (
        "prometheus_url",
        "Metrics and logs",
        "Optional evidence: each source's tools are offered only when its URL is set.",
    ),
    ("redis_url", "Redis", "Checkpoints, turns, the queue, actions and the audit stream."),
    ("tool_budget", "One investigation", "Limits and checks of one turn of the graph."),
    ("thread_context_messages", "The incident thread", "What the agent reads of the thread."),
    ("default_rubric", "Rubric grading", "How answers are graded, and who may change it."),
    (
        "kubeconfig",
        "Kubernetes and actions",
        "The cluster's tools, and the gates, approvals and follow-up of actions.",
    ),
    ("worker_mode", "Durable turns", "Who runs turns, retries, graceful stop, recovery."),
    (
        "alert_webhook_token",
        "Alerts",
        "Investigations alerts start: webhooks, channels where alerts are posted, storm control "
        "(docs/alerts.md).",
    ),
    ("log_level", "Logs", ""),
)

_SIGNS = {Ge: ("≥", "ge"), Gt: (">", "gt"), Le: ("≤", "le"), Lt: ("<", "lt")}
_TYPES: dict[object, str] = {
    bool: "`true` or `false`",
    int: "whole number",
    float: "number",
    str: "text",
}


def render(
    model: type[Settings] = Settings,
    fills: Mapping[type[BaseModel], Mapping[str, str]] = FILLS,
) -> str:
    """The page for `model`; `fills` maps typed configs' fields to the settings filling them."""
    fields = model.model_fields
    starts = {first: (title, intro) for first, title, intro in SECTIONS}
    unknown = sorted(set(starts) - set(fields))
    if unknown:
        raise ValueError(f"SECTIONS starts at settings that do not exist: {unknown}")
    if next(iter(fields)) not in starts:
        raise ValueError(f"SECTIONS must start at the first setting, {next(iter(fields))}")
    required = _required_by(model)
    long_defaults: list[tuple[str, str]] = []
    body: list[str] = []
    contents: list[str] = []
    for name, field in fields.items():
        if name in starts:
            title, intro = starts[name]
            contents.append(f"- [{title}](#{_anchor(title)})")
            body += ["", f"## {title}", ""]
            body += [intro, ""] if intro else []
            body += ["| variable | type | default | what it does |", "|---|---|---|---|"]
        if not field.description:
            raise ValueError(
                f"{name.upper()} has no description: add Field(description=...) to it in "
                "bot/process/settings.py"
            )
        default = _default(name, field, required.get(name, []))
        if "\n" in default:
            long_defaults.append((name.upper(), default))
            default = f"[below](#{_anchor(_long_default_title(name.upper()))})"
        cells = [f"`{name.upper()}`", _type(name, field, fills), default, field.description]
        body.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    if long_defaults:
        contents.append(f"- [Long defaults](#{_anchor('Long defaults')})")
        body += ["", "## Long defaults"]
    for variable, text in long_defaults:
        body += ["", f"### {_long_default_title(variable)}", "", "```text", text, "```"]
    return "\n".join(_HEADER + contents + body) + "\n"


_HEADER = [
    "# Configuration",
    "",
    "<!-- Generated from bot/process/settings.py by `make docs`: edit the descriptions "
    "there, not here. -->",
    "",
    "tracegate reads every setting once, at start, from the environment (or a `.env` file in "
    "the working directory; `.env.example` lists them all) in `bot/process/settings.py`. A "
    "missing or malformed value stops the process with one line per problem, each naming the "
    "variable and what to set, in the variable's own terms "
    "(`APPROVAL_TTL: 10s is shorter than the minimum 30s`); `tracegate serve` then exits 2.",
    "",
    "A *duration* is written `900`, `900s`, `15m` or `1h`. *Required by* names the commands "
    "that refuse to start without the setting. A secret's value is never shown here.",
    "",
]


def _long_default_title(variable: str) -> str:
    return f"Default of `{variable}`"


def _required_by(model: type[Settings]) -> dict[str, list[str]]:
    """Setting → the commands that refuse to start without it (asked of the defaults)."""
    defaults = model.model_construct()
    required: dict[str, list[str]] = {}
    for command in typing.get_args(Command):
        for problem in defaults.missing(command):
            required.setdefault(problem.split(":")[0].lower(), []).append(command)
    return required


def _default(name: str, field: FieldInfo, required_by: list[str]) -> str:
    needed = ", ".join(f"`{command}`" for command in required_by)
    if _is_secret(field) or (required_by and field.get_default() is None):
        return f"— (required by {needed})" if needed else "—"
    value = field.get_default(call_default_factory=True)
    if value is None:
        shown = "none"
    elif value == "":
        shown = "empty"
    elif isinstance(value, str) and "\n" in value:
        return value
    else:
        shown = f"`{_in_env_terms(field, value)}`"
    return f"{shown} (required by {needed})" if needed else shown


def _type(name: str, field: FieldInfo, fills: Mapping[type[BaseModel], Mapping[str, str]]) -> str:
    kind = _unwrap(field.annotation)
    if _is_secret(field):
        shown = "secret"
    elif _is_duration(field):
        shown = "duration"
    elif typing.get_origin(kind) is typing.Literal:
        shown = " or ".join(f"`{choice}`" for choice in typing.get_args(kind))
    else:
        shown = _TYPES.get(kind, getattr(kind, "__name__", str(kind)))
    bounds = _bounds(name, field, fills)
    return f"{shown}, {bounds}" if bounds else shown


def _bounds(name: str, field: FieldInfo, fills: Mapping[type[BaseModel], Mapping[str, str]]) -> str:
    """The bounds of the setting and of every typed config's field it fills."""
    owners = [field] + [
        config.model_fields[inner]
        for config, renamed in fills.items()
        for inner in config.model_fields
        if renamed.get(inner, inner) == name
    ]
    found: dict[type, object] = {}
    for owner in owners:
        for rule in owner.metadata:
            if type(rule) in _SIGNS:
                found[type(rule)] = getattr(rule, _SIGNS[type(rule)][1])
    if Ge in found and Le in found:
        return f"{_in_env_terms(field, found[Ge])}–{_in_env_terms(field, found[Le])}"
    return ", ".join(f"{_SIGNS[kind][0]} {_in_env_terms(field, b)}" for kind, b in found.items())


def _in_env_terms(field: FieldInfo, value: object) -> str:
    """A value as it is written in the environment: `15m`, `false`, `1.5`, `a,b`."""
    if isinstance(value, bool):
        return str(value).lower()
    if _is_duration(field) and isinstance(value, int | float):
        seconds = int(value)
        for unit, size in (("h", 3600), ("m", 60)):
            if seconds and seconds % size == 0:
                return f"{seconds // size}{unit}"
        return f"{seconds}s"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _unwrap(annotation: object) -> object:
    """`X | None` → X."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [kind for kind in typing.get_args(annotation) if kind is not type(None)]
        return kinds[0] if len(kinds) == 1 else annotation
    return annotation


def _is_secret(field: FieldInfo) -> bool:
    return _unwrap(field.annotation) is SecretStr


def _is_duration(field: FieldInfo) -> bool:
    return any(getattr(rule, "func", None) is parse_duration for rule in field.metadata)


def _anchor(title: str) -> str:
    """The anchor GitHub gives a heading."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")
