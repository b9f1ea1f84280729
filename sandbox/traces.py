"""Simulated traces and their rendering as Tempo renders them (OTLP JSON).

As real OpenTelemetry pipelines write them: what identifies the process (service, version,
environment, Kubernetes workload and pod) lives on the *resource*, set by the SDK and by
the collector's k8sattributes processor, never on spans; each resource (one pod of a
service) is its own `resourceSpans` entry; trace and span IDs are base64, as Tempo's
proto JSON renders OTLP's bytes fields.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal

SpanStatus = Literal["ok", "error", "unset"]

_STATUS_CODES = {"ok": "STATUS_CODE_OK", "error": "STATUS_CODE_ERROR", "unset": "STATUS_CODE_UNSET"}
_SDK = {"telemetry.sdk.name": "opentelemetry", "telemetry.sdk.language": "java"}


@dataclass(frozen=True)
class SimResource:
    """The process that sent spans. Unset fields are left out, as for a process outside
    Kubernetes or one whose SDK was given no version."""

    service: str
    version: str | None = None
    environment: str | None = None
    namespace: str | None = None
    deployment: str | None = None
    replicaset: str | None = None
    pod: str | None = None
    node: str | None = None

    @property
    def attributes(self) -> dict[str, str]:
        """Resource attributes under their semantic-convention names."""
        named = {
            "service.name": self.service,
            "service.version": self.version,
            "deployment.environment": self.environment,  # from OTEL_RESOURCE_ATTRIBUTES
            "k8s.namespace.name": self.namespace,  # k8sattributes from here on
            "k8s.deployment.name": self.deployment,
            "k8s.replicaset.name": self.replicaset,
            "k8s.pod.name": self.pod,
            "k8s.node.name": self.node,
        }
        return {key: value for key, value in named.items() if value is not None}


def k8s_pod(deployment: str, version: str, replicaset: str, pod_suffix: str) -> SimResource:
    """A pod of a Deployment in the shop's production namespace; its service bears its name."""
    return SimResource(
        service=deployment,
        version=version,
        environment="production",
        namespace="shop",
        deployment=deployment,
        replicaset=replicaset,
        pod=f"{replicaset}-{pod_suffix}",
    )


@dataclass(frozen=True)
class SimSpan:
    span_id: str  # 16 hex
    resource: SimResource
    name: str
    start_ns: int
    duration_ns: int
    parent_id: str | None = None
    status: SpanStatus = "unset"
    status_message: str = ""
    attributes: dict[str, str | int | float | bool] = field(default_factory=dict)

    @property
    def service(self) -> str:
        return self.resource.service

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


@dataclass(frozen=True)
class SimTrace:
    trace_id: str  # 32 lower-case hex, as stored by Tempo
    spans: tuple[SimSpan, ...]

    def __post_init__(self) -> None:
        if len(self.trace_id) != 32 or self.trace_id != self.trace_id.lower():
            raise ValueError(f"trace_id must be 32 lower-case hex chars, got {self.trace_id!r}")

    @property
    def root(self) -> SimSpan | None:
        """The span without a parent; None while Tempo has not received it."""
        return next((s for s in self.spans if s.parent_id is None), None)

    @property
    def start_ns(self) -> int:
        return min(s.start_ns for s in self.spans)

    @property
    def duration_ms(self) -> int:
        end = max(s.end_ns for s in self.spans)
        return (end - self.start_ns) // 1_000_000


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def otlp_value(value: str | int | float | bool) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # int64 is a string in proto JSON
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": value}


def otlp_attributes(attrs: dict[str, str | int | float | bool]) -> list[dict[str, Any]]:
    return [{"key": k, "value": otlp_value(v)} for k, v in attrs.items()]


def otlp_span(trace: SimTrace, span: SimSpan) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": _b64(trace.trace_id),
        "spanId": _b64(span.span_id),
        "name": span.name,
        "kind": "SPAN_KIND_SERVER" if span.parent_id is None else "SPAN_KIND_CLIENT",
        "startTimeUnixNano": str(span.start_ns),
        "endTimeUnixNano": str(span.end_ns),
        "attributes": otlp_attributes(span.attributes),
        "status": {"code": _STATUS_CODES[span.status]},
    }
    if span.parent_id:
        out["parentSpanId"] = _b64(span.parent_id)
    if span.status_message:
        out["status"]["message"] = span.status_message
    return out


def resource_spans(trace: SimTrace) -> list[dict[str, Any]]:
    """One resourceSpans entry per resource (pod), as each pod's exporter sends its own."""
    by_resource: dict[SimResource, list[SimSpan]] = {}
    for span in trace.spans:
        by_resource.setdefault(span.resource, []).append(span)
    return [
        {
            "resource": {"attributes": otlp_attributes({**resource.attributes, **_SDK})},
            "scopeSpans": [
                {
                    "scope": {"name": "sandbox"},
                    "spans": [otlp_span(trace, s) for s in spans],
                }
            ],
        }
        for resource, spans in by_resource.items()
    ]
