"""docs/configuration.md, written from the settings model (`make docs`).

Every variable of `Settings` is one row, in its group's section: its name, its type and
bounds, its default as it is written in the environment, and its description. Nothing is
read from the environment or `.env`: the page is the same on every machine, and a secret's
default is never shown.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path

from annotated_types import Ge, Gt, Le, Lt
from pydantic import SecretStr
from pydantic.fields import FieldInfo

from bot.process.settings import Command, Settings, Variable, variables, written

PAGE = Path("docs/configuration.md")
COMMAND = "make docs"

_SIGNS = {Ge: ("≥", "ge"), Gt: (">", "gt"), Le: ("≤", "le"), Lt: ("<", "lt")}
_TYPES: dict[object, str] = {
    bool: "`true` or `false`",
    int: "whole number",
    float: "number",
    str: "text",
    frozenset: "text",  # comma-separated, as each such setting's description says
}


def render(model: type[Settings] = Settings) -> str:
    """The page for `model`: a section per group title, a row per variable."""
    # Variable → the commands that refuse to start without it (asked of the defaults).
    defaults = model.model_construct()
    required: dict[str, list[str]] = {}
    for command in typing.get_args(Command):
        for problem in defaults.missing(command):
            required.setdefault(problem.split(":")[0], []).append(command)
    long_defaults: list[tuple[str, str]] = []
    body: list[str] = []
    contents: list[str] = []
    title = None
    for variable in variables(model).values():
        section = variable.section
        if section.title != title:
            title = section.title
            contents.append(f"- [{title}](#{_anchor(title)})")
            body += ["", f"## {title}", ""]
            body += [section.intro, ""] if section.intro else []
            body += ["| variable | type | default | what it does |", "|---|---|---|---|"]
        field = variable.info
        if not field.description:
            raise ValueError(
                f"{variable.name} has no description: add Field(description=...) to "
                f"{variable.group}.{variable.field}"
            )
        default = _default(variable, required.get(variable.name, []))
        if "\n" in default:
            heading = f"Default of `{variable.name}`"
            long_defaults.append((heading, default))
            default = f"[below](#{_anchor(heading)})"
        cells = [f"`{variable.name}`", _type(variable), default, field.description]
        body.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    if long_defaults:
        contents.append(f"- [Long defaults](#{_anchor('Long defaults')})")
        body += ["", "## Long defaults"]
    for heading, text in long_defaults:
        body += ["", f"### {heading}", "", "```text", text, "```"]
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


def _default(variable: Variable, required_by: list[str]) -> str:
    field = variable.info
    needed = ", ".join(f"`{command}`" for command in required_by)
    value = field.get_default(call_default_factory=True)
    if _is_secret(field) or (required_by and field.get_default() is None):
        shown = "—"
    elif value is None:
        shown = "none"
    elif value in ("", frozenset()):
        shown = "empty"
    elif isinstance(value, str) and "\n" in value:
        return value
    else:
        shown = f"`{written(value, variable.duration)}`"
    return f"{shown} (required by {needed})" if needed else shown


def _type(variable: Variable) -> str:
    field = variable.info
    kind = _unwrap(field.annotation)
    if _is_secret(field):
        shown = "secret"
    elif variable.duration:
        shown = "duration"
    elif typing.get_origin(kind) is typing.Literal:
        shown = " or ".join(f"`{choice}`" for choice in typing.get_args(kind))
    else:  # a type, or the origin of one (frozenset[str])
        shown = _TYPES.get(typing.get_origin(kind) or kind, getattr(kind, "__name__", str(kind)))
    bounds = bounds_of(variable)
    return f"{shown}, {bounds}" if bounds else shown


def bounds_of(variable: Variable) -> str:
    """What a variable's field allows, as the `type` column writes it after the type."""
    found = {
        type(rule): getattr(rule, _SIGNS[type(rule)][1])
        for rule in variable.info.metadata
        if type(rule) in _SIGNS
    }
    if Ge in found and Le in found:
        return f"{written(found[Ge], variable.duration)}–{written(found[Le], variable.duration)}"
    return ", ".join(
        f"{_SIGNS[kind][0]} {written(b, variable.duration)}" for kind, b in found.items()
    )


def _unwrap(annotation: object) -> object:
    """`X | None` → X, `Annotated[X, ...]` → X."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [kind for kind in typing.get_args(annotation) if kind is not type(None)]
        return _unwrap(kinds[0]) if len(kinds) == 1 else annotation
    return annotation


def _is_secret(field: FieldInfo) -> bool:
    return _unwrap(field.annotation) is SecretStr


def _anchor(title: str) -> str:
    """The anchor GitHub gives a heading."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")
