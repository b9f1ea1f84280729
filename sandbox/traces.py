"""Simulated traces and their rendering as Tempo renders them (OTLP JSON)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal

SpanStatus = Literal["ok", "error", "unset"]

_STATUS_CODES = {"ok": "STATUS_CODE_OK", "error": "STATUS_CODE_ERROR", "unset": "STATUS_CODE_UNSET"}


@dataclass(frozen=True)
class SimSpan:
    span_id: str  # 16 hex
    service: str
    name: str
    start_ns: int
    duration_ns: int
    parent_id: str | None = None
    status: SpanStatus = "unset"
    status_message: str = ""
    attributes: dict[str, str | int | float | bool] = field(default_factory=dict)

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
    def root(self) -> SimSpan:
        roots = [s for s in self.spans if s.parent_id is None]
        return roots[0] if roots else min(self.spans, key=lambda s: s.start_ns)

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
    """One resourceSpans entry per service, as an OTLP exporter would send them."""
    by_service: dict[str, list[SimSpan]] = {}
    for span in trace.spans:
        by_service.setdefault(span.service, []).append(span)
    return [
        {
            "resource": {"attributes": otlp_attributes({"service.name": service})},
            "scopeSpans": [
                {
                    "scope": {"name": "sandbox"},
                    "spans": [otlp_span(trace, s) for s in spans],
                }
            ],
        }
        for service, spans in by_service.items()
    ]
