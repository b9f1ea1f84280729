"""What a scenario is: the incident's world (services, their calls, releases and pods), the
fault and the red herrings in it, what the on-call engineer sees and asks, and the truth.

A scenario is data (`evals/scenarios/<name>/scenario.json`), read into these models. The
world is compiled into telemetry and cluster state by `evals/world.py`; the truth is read
only by the scoring (`evals/score.py`) and the live judge, never shown to the investigator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Release(_Strict):
    """One revision of a Deployment: its version (the image tag), when it was created, and
    what `kubectl rollout history` shows as its change-cause."""

    version: str
    hours_ago: float
    change_cause: str | None = None
    env: dict[str, str] = Field(default_factory=dict)


class Service(_Strict):
    """A Deployment in the namespace whose pods send spans."""

    name: str
    operation: str  # the server span's name
    calls: list[str] = Field(default_factory=list)  # services or dependencies, in call order
    releases: list[Release]  # oldest first; the last one runs
    replicas: int = 3
    nodes: list[str] = Field(default_factory=list)  # where its pods run (spread in order)
    latency_ms: tuple[int, int] = (5, 40)  # its own work, per span
    first_revision: int = 1

    @property
    def version(self) -> str:
        return self.releases[-1].version


class Dependency(_Strict):
    """Something called but not traced itself: a database, a cache, a third-party API. It
    shows as a client span of its caller, with `peer.service` (and `db.system`)."""

    name: str
    operation: str
    system: str | None = None  # db.system, e.g. postgresql, redis
    latency_ms: tuple[int, int] = (2, 15)
    aliases: list[str] = Field(default_factory=list)  # what people call it in answers


class EntryPoint(_Strict):
    """A kind of request: its root span on `service`, calling `calls` (not the service's own)."""

    service: str
    operation: str
    calls: list[str]
    weight: int = 1


class Fault(_Strict):
    """What broke. `service` fails (at its call to `call`, when given) in `share` of the
    requests that reach it from `minutes_ago` on, saying `message`; its callers pass the
    failure up. `version`/`nodes` narrow it to pods of that version or on those nodes;
    `retries` adds that many failing repeats of the call from `retried_by`."""

    service: str
    call: str | None = None
    message: str
    http: int = 503
    share: float = Field(gt=0, le=1)
    minutes_ago: float
    latency_ms: int = 0  # added to the failing span
    version: str | None = None
    nodes: list[str] = Field(default_factory=list)
    retried_by: str | None = None
    retries: int = 0
    silent: bool = False  # the failing process dies mid-request: its spans never arrive
    # The failing pods' containers keep dying with this reason (e.g. OOMKilled), as the
    # Kubernetes API shows them (restarts, last termination, BackOff events).
    crash: str | None = None
    caller_message: str = "upstream {service} returned {http}"


class Noise(_Strict):
    """A red herring in the telemetry: errors or slowness that are not the cause — present
    before the incident as well as during it."""

    service: str
    message: str | None = None  # errors with this status message; None: only slow
    http: int | None = None
    share: float = Field(default=0.1, gt=0, le=1)
    latency_ms: int = 0


class Metric(_Strict):
    """A Prometheus series the scenario's Prometheus serves: (minutes ago, value) points."""

    labels: dict[str, str]
    points: list[tuple[float, float]]


class LogStream(_Strict):
    """A Loki stream: its labels and (minutes ago, line) entries."""

    labels: dict[str, str]
    lines: list[tuple[float, str]]


class KubeEvent(_Strict):
    """A Kubernetes event the cluster holds (core/v1, as the kubelet or a controller writes
    it): about each pod of `service` (on `nodes`, when given), or about the object `name`
    of `kind`. `not_ready`: the pods it is about are not ready (their node is, say)."""

    reason: str
    message: str
    service: str | None = None
    nodes: list[str] = Field(default_factory=list)
    kind: str = "Pod"
    name: str | None = None
    type: Literal["Normal", "Warning"] = "Warning"
    count: int = 1
    minutes_ago: float  # the first time
    last_minutes_ago: float = 0.5
    component: str = "kubelet"
    not_ready: bool = False


class ScenarioAlert(_Strict):
    """The alert that opened the thread, as Alertmanager posts it."""

    alertname: str
    service: str
    severity: str = "page"
    minutes_ago: float
    summary: str


class Message(_Strict):
    user: str
    text: str
    minutes_ago: float


class Action(_Strict):
    action: Literal["rollout_undo", "scale"]
    deployment: str
    replicas: int | None = None  # scale: at least this many


class Truth(_Strict):
    """The answer key. `root_cause`: the entities (service, workload, version, pod, node,
    dependency, flag) a right answer names as the cause; `chain`: how the failure spread,
    cause first; `evidence`: strings some tool result must show for the cause to be
    provable; `action`: the right one (None: none is right); `wrong_actions`: proposals
    that would do harm."""

    root_cause: list[str] = Field(default_factory=list)
    chain: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(min_length=1)
    action: Action | None = None
    wrong_actions: list[Action] = Field(default_factory=list)
    criteria: list[str] = Field(default_factory=list)  # for the live judge only
    # Nothing is wrong in the cluster (a misfiring alert, traffic that fell outside it): the
    # right answer says so and proposes nothing; root_cause and chain stay empty.
    nothing_wrong: bool = False

    @model_validator(mode="after")
    def _a_cause_or_none(self) -> Truth:
        if self.nothing_wrong and (self.root_cause or self.action is not None):
            raise ValueError("a truth with nothing wrong names no root cause and no action")
        if not self.nothing_wrong and not (self.root_cause and self.chain):
            raise ValueError("a truth names its root cause and chain (or says nothing_wrong)")
        return self


class RecordedSpan(_Strict):
    span_id: str
    parent_id: str | None
    resource: dict[str, str]  # service.name, service.version, k8s.* as Tempo returned them
    name: str
    start_ns: int
    end_ns: int
    error: bool
    status_message: str = ""
    attributes: dict[str, str] = Field(default_factory=dict)


class RecordedTrace(_Strict):
    trace_id: str
    spans: list[RecordedSpan]


class RecordedRevision(_Strict):
    revision: int
    images: list[str]
    change_cause: str = ""
    created: str = ""  # ISO 8601, as the API wrote it


class RecordedDeployment(_Strict):
    namespace: str
    name: str
    replicas: int
    revisions: list[RecordedRevision]  # oldest first


class RecordedMessage(_Strict):
    author: str  # "person U123" | "app Alertmanager"
    text: str
    seconds_before: float  # before the capture


class CapturedThread(_Strict):
    """A real incident thread, captured (`tracegate eval capture`): what the turn saw —
    the thread, the traces and Deployments its tools read, the tool calls and the answer
    posted — redacted, with every time shifted to the run's clock when it is replayed."""

    source: str  # the thread link
    captured_at: float
    thread: list[RecordedMessage] = Field(default_factory=list)
    traces: list[RecordedTrace] = Field(default_factory=list)
    deployments: list[RecordedDeployment] = Field(default_factory=list)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    answer: str = ""


class EvalScenario(_Strict):
    """A generated incident (services, entries, fault, alert) or a captured one (recorded)."""

    name: str
    title: str
    kind: str
    seed: int = 0
    namespace: str = "shop"
    window_minutes: int = 60
    interval_s: int = 20  # one request every interval, over the window
    services: list[Service] = Field(default_factory=list)
    dependencies: list[Dependency] = Field(default_factory=list)
    entries: list[EntryPoint] = Field(default_factory=list)
    fault: Fault | None = None
    also: list[Fault] = Field(default_factory=list)  # faults at the same time (two at once)
    noise: list[Noise] = Field(default_factory=list)
    metrics: list[Metric] = Field(default_factory=list)  # served by Prometheus when given
    logs: list[LogStream] = Field(default_factory=list)  # served by Loki when given
    events: list[KubeEvent] = Field(default_factory=list)  # in the cluster's event list
    alert: ScenarioAlert | None = None
    thread: list[Message] = Field(default_factory=list)
    recorded: CapturedThread | None = None
    question: str
    truth: Truth
    # Causes that are no service or dependency (a node's zone, a feature flag, DNS), with
    # the words that name them; a word here that names another entity merges it in.
    other_entities: dict[str, list[str]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names_resolve(self) -> EvalScenario:
        faultless = self.truth.nothing_wrong
        if self.recorded is None and (
            (self.fault is None and not faultless) or self.alert is None or not self.entries
        ):
            raise ValueError(
                f"{self.name}: a scenario needs services, entries, a fault (unless nothing is "
                "wrong) and an alert"
            )
        if faultless and self.fault is not None:
            raise ValueError(f"{self.name}: nothing is wrong, yet the scenario has a fault")
        vocabulary = {e.lower() for e in self.entities()}
        if missing := [e for e in self.truth.root_cause if e.lower() not in vocabulary]:
            raise ValueError(f"{self.name}: root cause {missing} is not an entity of the world")
        if self.recorded is not None:
            return self
        assert self.alert is not None
        known = {s.name for s in self.services} | {d.name for d in self.dependencies}
        calls = [c for s in self.services for c in s.calls] + [
            c for e in self.entries for c in e.calls
        ]
        named = [*calls, self.alert.service]
        named += [e.service for e in self.entries] + [n.service for n in self.noise]
        named += [e.service for e in self.events if e.service]
        for fault in self.faults():
            named += [fault.service, *([fault.call] if fault.call else [])]
        if unknown := sorted(set(named) - known):
            raise ValueError(f"{self.name}: no service or dependency named {unknown}")
        return self

    def faults(self) -> list[Fault]:
        """Every fault of the world, the main one first (none when nothing is wrong)."""
        return [self.fault, *self.also] if self.fault is not None else []

    def service(self, name: str) -> Service | None:
        return next((s for s in self.services if s.name == name), None)

    def entities(self) -> dict[str, list[str]]:
        """Everything an answer could name as a cause, with the words that name it."""
        names: dict[str, list[str]] = {}
        for s in self.services:
            names[s.name] = [s.name]
            for release in s.releases:
                names.setdefault(release.version, [release.version])
            names.update({node: [node] for node in s.nodes})
        for d in self.dependencies:
            names[d.name] = [d.name, *d.aliases]
        if self.recorded is not None:
            for trace in self.recorded.traces:
                for span in trace.spans:
                    for key in ("service.name", "service.version", "k8s.pod.name", "k8s.node.name"):
                        if value := span.resource.get(key):
                            names.setdefault(value, [value])
                    if peer := span.attributes.get("peer.service"):
                        names.setdefault(peer, [peer])
            for deployment in self.recorded.deployments:
                names.setdefault(deployment.name, [deployment.name])
                for revision in deployment.revisions:
                    for image in revision.images:
                        tag = image.rpartition(":")[2]
                        names.setdefault(tag, [tag])
        for other, aliases in self.other_entities.items():
            words = [other, *aliases]
            for word in words:
                names.pop(word, None)
            names[other] = words
        return names


class ScenarioError(ValueError):
    """A scenario file that cannot be used as it is, and what to fix."""


def load(name: str, folder: Path = SCENARIOS) -> EvalScenario:
    path = folder / name / "scenario.json"
    if not path.is_file():
        known = ", ".join(names(folder)) or "none"
        raise ScenarioError(f"no scenario {name!r} in {folder} (known: {known})")
    try:
        document = json.loads(path.read_text())
        if document.get("kind") == "captured" and not document["truth"].get("root_cause"):
            raise ScenarioError(
                f"{path}: a captured scenario without its truth; write truth.root_cause, chain, "
                "evidence and action (docs/evals.md, 'From real incidents')"
            )
        return EvalScenario.model_validate({"name": name, **document})
    except (ValueError, ValidationError, KeyError) as exc:
        if isinstance(exc, ScenarioError):
            raise
        raise ScenarioError(f"{path}: {exc}") from exc


def names(folder: Path = SCENARIOS) -> list[str]:
    return sorted(p.parent.name for p in folder.glob("*/scenario.json"))
