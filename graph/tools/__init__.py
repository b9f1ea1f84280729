"""The agent's tools, each declared where it is written.

A tool module holds one external system's tools and a `TOOLSET` saying what they need
(settings of their own, the Kubernetes API), how they are opened and closed, and, for each
tool, how it is shown (`Shown`): its timeline title, its output budget, the kinds of facts
it hands over as evidence and what a link to its result is called. `graph.tools.registry`
lists the tool sets; the runner, the timeline, the answer's sources and the docs read them
from there. LangChain's `@tool` keeps the rest together: name, description, arguments.
A tool that cannot do its job says so by raising `ToolFailed`. The searching tools' time
window (`window`, `Since`, `IncidentStart`) is declared here too, the same for each.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from langchain_core.tools import BaseTool
from langgraph.prebuilt import InjectedState
from pydantic import BaseModel

if TYPE_CHECKING:
    from gates.pipeline import ActionPipeline
    from graph.tools.tempo import TempoClient

DEFAULT_RESULT_CHARS = 12_000  # for a tool that names no budget of its own
SHOWN = "tracegate"  # the key of a tool's `Shown` in its metadata


@dataclass(frozen=True)
class Shown:
    """How one tool appears outside the model's view."""

    # The timeline's title, formatted with the call's arguments ("{promql}"); one the call
    # lacks reads "…". A mapping: the title by the value of the argument it is keyed by.
    title: str
    budget: int = DEFAULT_RESULT_CHARS  # what the model is sent of one result, at most
    facts: tuple[str, ...] = ()  # the kinds of facts it hands over as evidence
    cited_as: str | None = None  # a link to its result, labelled ("Prometheus query")
    headline: bool = True  # its result's first line is the task's result line
    titles_by: tuple[str, Mapping[str, str]] | None = None  # (argument, value -> title)

    def title_for(self, args: Mapping[str, Any]) -> str:
        if self.titles_by is not None:
            argument, titles = self.titles_by
            return titles.get(str(args.get(argument)), self.title)
        return self.title


class ToolFailed(Exception):
    """The system behind a tool failed or refused (Tempo down, a Kubernetes API error).

    Raised, so the call is recorded as failed (its ToolMessage has `status="error"`; the
    Steps view, the notices and the metrics say so). The model still reads the message,
    written for it, and whether the same call may work later.
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def shown(tool: BaseTool | None) -> Shown | None:
    found = (tool.metadata or {}).get(SHOWN) if tool is not None else None
    return found if isinstance(found, Shown) else None


def result_budget(tool: BaseTool | None) -> int:
    declared = shown(tool)
    return declared.budget if declared is not None else DEFAULT_RESULT_CHARS


@dataclass(frozen=True)
class Bound:
    """What a tool set's tools may be bound to when it is opened."""

    settings: BaseModel | None  # the set's own settings, when it has any
    tempo: TempoClient  # the trace guard's client: Tempo's tools share it
    actions: ActionPipeline | None  # the cluster and the gates, when configured

    @property
    def pipeline(self) -> ActionPipeline:
        assert self.actions is not None  # a cluster tool set is opened only with the cluster
        return self.actions


@dataclass(frozen=True)
class ToolSet:
    """One external system's tools, and what they need."""

    name: str  # "prometheus"; its settings' group
    label: str  # "Prometheus", as the start-up line names it
    # The tools, bound and opened; closed when the investigation closes.
    open: Callable[[Bound], AbstractAsyncContextManager[Sequence[BaseTool]]]
    shown: Mapping[str, Shown]  # each tool's name -> how it is shown
    # Its own settings (`settings`, the variables an operator sets, under `env_prefix`, in
    # the configuration page's `section`); the set is offered only when its `url` is set,
    # bound to `spec` (the same fields and `grafana_url` for links; else the settings).
    settings: type[BaseModel] | None = None
    spec: type[BaseModel] | None = None
    env_prefix: str = ""  # PROMETHEUS_: PROMETHEUS_URL, PROMETHEUS_TENANT
    section: str = ""  # "Metrics and logs" (else its label); consecutive sets share one
    intro: str = ""  # under the section's title (its first set's)
    cluster: bool = False  # needs the Kubernetes API (and the action gates)
    grader: bool = False  # read-only evidence the grader may look up too
    needs: str = ""  # what to set, in words, for the docs

    def bound_settings(self, settings: BaseModel, grafana_url: str | None) -> BaseModel | None:
        """What the set's tools are bound to, from its settings; None: not configured."""
        spec = self.spec or self.settings
        if spec is None or not getattr(settings, "url", None):
            return None
        links = {"grafana_url": grafana_url} if "grafana_url" in spec.model_fields else {}
        return spec(**settings.model_dump(), **links)


def declared(shown: Mapping[str, Shown], tools: Sequence[BaseTool]) -> list[BaseTool]:
    """`tools` with their `Shown` attached and their descriptions as the model is sent
    them: a docstring's line breaks and indentation collapsed to single spaces (every
    declaration is sent with every model call, so each character is paid for on each call).
    A tool `shown` does not declare is a mistake, caught here."""
    for each in tools:
        if each.name not in shown:
            raise ValueError(f"{each.name} is not declared: give it a Shown")
        each.metadata = {**(each.metadata or {}), SHOWN: shown[each.name]}
        each.description = " ".join(each.description.split())
    return list(tools)


# The time window a search covers, as every searching tool takes it. `since_minutes_ago` and
# `until_minutes_ago` count back from now; without `since`, a search starts 15 minutes before
# the thread's alert, else an hour ago (the thread's incident start is injected from the
# state, never chosen by the model).
ALERT_LEAD_MINUTES = 15  # errors often start a little before an alert fires
DEFAULT_MINUTES = 60

# A searching tool's window arguments, the same in each.
Since = int | None
IncidentStart = Annotated[float | None, InjectedState("incident_start")]


def window(
    since_minutes_ago: Since, until_minutes_ago: int, incident_start: float | None
) -> tuple[int, int] | str:
    """(start, end) in whole unix seconds, or why the window makes no sense."""
    now = int(time.time())
    if since_minutes_ago is None:  # from 15 minutes before the thread's alert, else an hour
        since_minutes_ago = (
            DEFAULT_MINUTES
            if not isinstance(incident_start, int | float) or incident_start > now
            else math.ceil((now - incident_start) / 60) + ALERT_LEAD_MINUTES
        )
    if since_minutes_ago <= until_minutes_ago or until_minutes_ago < 0:
        return "since_minutes_ago must be larger than until_minutes_ago (e.g. 60 and 0)."
    return now - since_minutes_ago * 60, now - until_minutes_ago * 60


def utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
