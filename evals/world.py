"""A scenario compiled into what the simulators serve and what the thread holds.

Deterministic: the same scenario and the same `now` give the same trace IDs, pods and
times, so reruns and regrades see one data window (the scenario clock). Telemetry is what
real pipelines write: identity on the resource (version, ReplicaSet, pod, node), one server
span per service hop, a client span for each call to something untraced (a database, a
cache, a third-party API) naming it in `peer.service`.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bot.turn.alerts import read_alert
from evals.spec import CapturedThread, Dependency, EvalScenario, Fault, Noise, Service
from graph.context import ContextMessage, ThreadContext
from sandbox.kubernetes import KubernetesSimulator, pod_name, template_hash
from sandbox.traces import SimResource, SimSpan, SimTrace

REGISTRY = "registry"
MS = 1_000_000


def image(service: str, version: str) -> str:
    return f"{REGISTRY}/{service}:{version}"


def replicaset(service: Service) -> str:
    """The ReplicaSet the Kubernetes simulator (and Kubernetes) names for the running
    release: the Deployment's name and its pod template's hash."""
    container: dict[str, object] = {
        "name": service.name,
        "image": image(service.name, service.version),
    }
    if env := service.releases[-1].env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    template = {"metadata": {"labels": {"app": service.name}}, "spec": {"containers": [container]}}
    return f"{service.name}-{template_hash(template)}"


def pods(scenario: EvalScenario, service: Service) -> list[SimResource]:
    """The running release's pods, spread over the service's nodes in order."""
    rs = replicaset(service)
    nodes: list[str | None] = list(service.nodes) or [None]
    return [
        SimResource(
            service=service.name,
            version=service.version,
            environment="production",
            namespace=scenario.namespace,
            deployment=service.name,
            replicaset=rs,
            pod=pod_name(rs, i),  # the name the Kubernetes simulator gives the same pod
            node=nodes[i % len(nodes)],
        )
        for i in range(service.replicas)
    ]


@dataclass
class _Request:
    """One trace being built."""

    trace_id: str
    faulty: frozenset[int]  # the faults (indices) that hit this request, where they apply
    spans: list[SimSpan] = field(default_factory=list)


class TraceWriter:
    def __init__(self, scenario: EvalScenario, now: float) -> None:
        self.scenario = scenario
        self.faults = scenario.faults()  # none: a world where nothing is wrong
        self.now = now
        self.rng = random.Random(scenario.seed)
        self.pods = {s.name: pods(scenario, s) for s in scenario.services}
        self.dependencies = {d.name: d for d in scenario.dependencies}
        self.fault_from_ns = [int((now - f.minutes_ago * 60) * 1e9) for f in self.faults]

    def _hex(self, chars: int) -> str:
        return "".join(self.rng.choice("0123456789abcdef") for _ in range(chars))

    def traces(self) -> list[SimTrace]:
        sc = self.scenario
        entries = sc.entries
        weights = [e.weight for e in entries]
        out = []
        for i in range(sc.window_minutes * 60 // sc.interval_s):
            start_s = self.now - (i + 1) * sc.interval_s + self.rng.uniform(0, sc.interval_s / 2)
            entry = self.rng.choices(entries, weights)[0]
            start_ns = int(start_s * 1e9)
            trace_id = self._hex(32)
            faulty = frozenset(
                n
                for n, fault in enumerate(self.faults)
                if start_ns >= self.fault_from_ns[n] and self.rng.random() < fault.share
            )
            request = _Request(trace_id, faulty)
            self._visit(request, entry.service, entry.operation, entry.calls, None, start_ns)
            out.append(SimTrace(request.trace_id, tuple(request.spans)))
        return out

    def _noise(self, service: str) -> Noise | None:
        hits = [n for n in self.scenario.noise if n.service == service]
        return next((n for n in hits if self.rng.random() < n.share), None)

    def _hit(self, request: _Request, service: Service, pod: SimResource) -> Fault | None:
        """The fault that hits this service's span of the request, if any."""
        return next(
            (
                fault
                for n, fault in enumerate(self.faults)
                if n in request.faulty
                and service.name == fault.service
                and (fault.version is None or fault.version == service.version)
                and (not fault.nodes or pod.node in fault.nodes)
            ),
            None,
        )

    def _visit(
        self,
        request: _Request,
        service_name: str,
        operation: str,
        calls: list[str],
        parent_id: str | None,
        start_ns: int,
    ) -> tuple[int, Fault | None]:
        """Write the service's span and its calls'; return when it ended and, when a fault
        made it fail, which one."""
        service = self.scenario.service(service_name)
        assert service is not None  # the scenario's names were checked when it was read
        pod = self.rng.choice(self.pods[service_name])
        span_id = self._hex(16)
        hit = self._hit(request, service, pod)
        noise = self._noise(service_name)
        own_ms = self.rng.randint(*service.latency_ms) + (noise.latency_ms if noise else 0)
        at = start_ns + MS
        written = len(request.spans)
        failed_callee: str | None = None
        failed: Fault | None = None
        for callee in calls:
            retries = max(
                (
                    f.retries
                    for f in self.faults
                    if f.retried_by == service_name and callee == f.service
                ),
                default=0,
            )
            for _ in range(1 + retries):
                at, failure = self._call_one(request, pod, span_id, callee, at, hit)
                if failure is None:
                    break  # a call that worked is not repeated
                failed_callee, failed = callee, failure
        end_ns = at + own_ms * MS
        if hit is not None and hit.silent:
            del request.spans[written:]  # the process died: nothing it sent arrives
            return end_ns + hit.latency_ms * MS, hit
        if hit is not None and hit.call is None:
            end_ns += hit.latency_ms * MS
            status, message, http = "error", hit.message, hit.http
            failed = hit
        elif failed is not None:
            message = failed.caller_message.format(service=failed_callee, http=failed.http)
            status, http = "error", 502
        elif noise is not None and noise.message:
            status, message, http = "error", noise.message, noise.http or 500
        else:
            status, message, http = "ok", "", 200
        request.spans.append(
            SimSpan(
                span_id,
                pod,
                operation,
                start_ns,
                end_ns - start_ns,
                parent_id=parent_id,
                status="error" if status == "error" else "ok",
                status_message=message,
                attributes={"http.status_code": http},
            )
        )
        return end_ns, failed

    def _call_one(
        self,
        request: _Request,
        pod: SimResource,
        span_id: str,
        callee: str,
        at: int,
        hit: Fault | None,
    ) -> tuple[int, Fault | None]:
        """One call of the service's span `span_id` to `callee`: a traced service's own span
        (and its calls), or a client span to an untraced dependency."""
        if callee in self.dependencies:
            return self._call(request, pod, span_id, self.dependencies[callee], at, hit)
        service = self.scenario.service(callee)
        assert service is not None
        end, failed = self._visit(request, callee, service.operation, service.calls, span_id, at)
        return end + MS, failed

    def _call(
        self,
        request: _Request,
        pod: SimResource,
        caller_id: str,
        dependency: Dependency,
        start_ns: int,
        hit: Fault | None,
    ) -> tuple[int, Fault | None]:
        """A client span of `caller` to an untraced dependency."""
        failing = hit if hit is not None and hit.call == dependency.name else None
        duration_ms = self.rng.randint(*dependency.latency_ms) + (
            failing.latency_ms if failing else 0
        )
        attributes: dict[str, str | int | float | bool] = {"peer.service": dependency.name}
        if dependency.system:
            attributes["db.system"] = dependency.system
        request.spans.append(
            SimSpan(
                self._hex(16),
                pod,
                dependency.operation,
                start_ns,
                duration_ms * MS,
                parent_id=caller_id,
                status="error" if failing else "ok",
                status_message=failing.message if failing else "",
                attributes=attributes,
            )
        )
        return start_ns + duration_ms * MS, failing


def traces(scenario: EvalScenario, now: float) -> list[SimTrace]:
    if scenario.recorded is not None:
        return replayed_traces(scenario.recorded, now)
    return TraceWriter(scenario, now).traces()


def replayed_traces(recorded: CapturedThread, now: float) -> list[SimTrace]:
    """A captured incident's traces, moved in time so the capture happens `now`."""
    shift = int((now - recorded.captured_at) * 1e9)
    out = []
    for trace in recorded.traces:
        spans = []
        for s in trace.spans:
            r = s.resource
            resource = SimResource(
                service=r.get("service.name", "?"),
                version=r.get("service.version"),
                environment=r.get("deployment.environment"),
                namespace=r.get("k8s.namespace.name"),
                deployment=r.get("k8s.deployment.name"),
                replicaset=r.get("k8s.replicaset.name"),
                pod=r.get("k8s.pod.name"),
                node=r.get("k8s.node.name"),
            )
            spans.append(
                SimSpan(
                    s.span_id,
                    resource,
                    s.name,
                    s.start_ns + shift,
                    s.end_ns - s.start_ns,
                    parent_id=s.parent_id,
                    status="error" if s.error else "unset",
                    status_message=s.status_message,
                    attributes=dict(s.attributes),
                )
            )
        out.append(SimTrace(trace.trace_id, tuple(spans)))
    return out


def _at(iso: str, shift_s: float) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() + shift_s


def deploy(scenario: EvalScenario, kube: KubernetesSimulator, now: float) -> None:
    """Every service as a Deployment with its rollout history (a captured scenario: the
    Deployments the turn read, their revisions renumbered in order from the first)."""
    if scenario.recorded is not None:
        shift = now - scenario.recorded.captured_at
        for d in scenario.recorded.deployments:
            kube.add_deployment(
                d.namespace,
                d.name,
                [r.images[0] for r in d.revisions],
                replicas=d.replicas,
                change_causes=[r.change_cause for r in d.revisions],
                first_revision=d.revisions[0].revision,
                now=now,
                created_at=[_at(r.created, shift) if r.created else now for r in d.revisions],
            )
        return
    for s in scenario.services:
        kube.add_deployment(
            scenario.namespace,
            s.name,
            [image(s.name, r.version) for r in s.releases],
            replicas=s.replicas,
            change_causes=[r.change_cause or f"deploy {r.version}" for r in s.releases],
            first_revision=s.first_revision,
            envs=[r.env for r in s.releases],
            now=now,
            created_at=[now - r.hours_ago * 3600 for r in s.releases],
        )
        kube.add_pods(
            scenario.namespace,
            s.name,
            nodes=tuple(s.nodes) or ("node-a1",),
            age_s=s.releases[-1].hours_ago * 3600,
            now=now,
        )
    _crash(scenario, kube, now)
    _events(scenario, kube, now)


def _events(scenario: EvalScenario, kube: KubernetesSimulator, now: float) -> None:
    """The scenario's own events (a node gone NotReady, an autoscaler's rescale), about
    the pods they name or a named object; their pods marked not ready when they say so."""
    for event in scenario.events:
        service = scenario.service(event.service) if event.service else None
        if service is not None:
            names = [
                p.pod for p in pods(scenario, service) if not event.nodes or p.node in event.nodes
            ]
        else:
            names = [event.name or ""]
        for name in names:
            assert name is not None
            if event.not_ready:
                kube.not_ready(scenario.namespace, name, event.reason)
            kube.add_event(
                scenario.namespace,
                event.kind,
                name,
                event.reason,
                event.message,
                type=event.type,
                count=event.count,
                first=now - event.minutes_ago * 60,
                last=now - event.last_minutes_ago * 60,
                component=event.component,
            )


def _crash(scenario: EvalScenario, kube: KubernetesSimulator, now: float) -> None:
    """The failing service's pods crash-looping, with the kubelet's events, when the
    fault says so."""
    for fault in scenario.faults():
        service = scenario.service(fault.service)
        if fault.crash is not None and service is not None:
            _crash_one(scenario, kube, now, fault, service)


def _crash_one(
    scenario: EvalScenario, kube: KubernetesSimulator, now: float, fault: Fault, service: Service
) -> None:
    assert fault.crash is not None
    restarts = max(2, int(fault.minutes_ago // 4))
    for pod in pods(scenario, service):
        assert pod.pod is not None
        kube.crash_loop(
            scenario.namespace, pod.pod, reason=fault.crash, restarts=restarts, finished=now - 40
        )
        kube.add_event(
            scenario.namespace,
            "Pod",
            pod.pod,
            "BackOff",
            f"Back-off restarting failed container {service.name} in pod {pod.pod}",
            type="Warning",
            count=restarts,
            first=now - fault.minutes_ago * 60,
            last=now - 30,
        )


def alertmanager_slack_text(scenario: EvalScenario, now: float) -> str:
    """The alert as Alertmanager's common Slack template posts it."""
    a = scenario.alert
    assert a is not None
    starts = datetime.fromtimestamp(now - a.minutes_ago * 60, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f"[FIRING:1] {a.alertname} {a.service}\n*Summary:* {a.summary}\n"
        f"• *alertname:* `{a.alertname}`\n• *service:* `{a.service}`\n"
        f"• *namespace:* `{scenario.namespace}`\n• *severity:* `{a.severity}`\n"
        f"Starts at: {starts}"
    )


def thread_context(scenario: EvalScenario, now: float) -> ThreadContext:
    """What the thread reader gives the investigation: the alert, read as the bot reads
    Alertmanager's posts, and the people's messages, oldest first."""
    if scenario.recorded is not None:
        return _replayed_context(scenario.recorded, now)
    assert scenario.alert is not None
    posted = datetime.fromtimestamp(now - scenario.alert.minutes_ago * 60 + 30, UTC)
    text = alertmanager_slack_text(scenario, now)
    alert = read_alert(text, "Alertmanager", posted)
    messages = [ContextMessage(at=posted, author="app Alertmanager", text=text)]
    messages += [
        ContextMessage(
            at=datetime.fromtimestamp(now - m.minutes_ago * 60, UTC),
            author=f"person {m.user}",
            text=m.text,
        )
        for m in sorted(scenario.thread, key=lambda m: -m.minutes_ago)
    ]
    return ThreadContext(alerts=[alert] if alert else [], messages=messages)


def _replayed_context(recorded: CapturedThread, now: float) -> ThreadContext:
    messages = [
        ContextMessage(
            at=datetime.fromtimestamp(now - m.seconds_before, UTC), author=m.author, text=m.text
        )
        for m in recorded.thread
    ]
    alerts = [
        alert
        for m in messages
        if m.author.startswith("app ")
        and (alert := read_alert(m.text, m.author.removeprefix("app "), m.at)) is not None
    ]
    return ThreadContext(alerts=alerts, messages=messages)


def scenario_clock() -> float:
    """One clock per run: every scenario of a run is built at the same `now`."""
    return time.time()
