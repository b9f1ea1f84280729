"""Chart data: what a chart of the evidence is drawn from, taken from tool results only.

A range query's series (Prometheus, or a Loki metric query) and a fetched trace's spans are
kept in the turn's state beside the facts (`ChartData`), bounded when the tool returns.
When the answer has passed its checks, `charts_for_answer` picks what to draw: the series of
the range query the answer rests on (a grounded claim of the answer read from it), the
spans of the first trace the answer cites, and the markers (the alert's start, the rollout
of the Deployment the answer names) from the thread's evidence. The model supplies none of
it: no numbers, labels or colours come from its text. The bot draws and uploads them
(bot/outbound/charts.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal, NotRequired, TypedDict

from graph.grounding.claims import normalise
from graph.grounding.evidence import ROLLOUT, Fact, parse_iso, source_call
from graph.trace_ids import find_trace_ids
from graph.untrusted import clip

MAX_SERIES = 8  # series one metric chart draws, the highest first
MAX_ROWS = 60  # spans one waterfall draws; the rest are summarised
MAX_POINTS = 1200  # points kept of one series (each bucket's lowest and highest)
MAX_CHARTS_KEPT = 4  # chart data one turn keeps in its checkpoint (the newest)
_EXACT_MATCHER = re.compile(r'[a-zA-Z_]\w*\s*=\s*"([^"\\]*)"')  # label="value", not =~ or !=


class SeriesData(TypedDict):
    labels: dict[str, str]
    points: list[tuple[float, float]]  # (unix seconds, value), oldest first


class MetricData(TypedDict):
    kind: Literal["metric"]
    source: str  # the tool call, as its facts name it: "query_prometheus_range rate(...)"
    tool: str
    query: str
    start: float
    end: float
    series: list[SeriesData]  # the top MAX_SERIES by their highest value
    total_series: int


class SpanRow(TypedDict):
    service: str
    name: str
    start_ns: int
    end_ns: int
    depth: int  # 0: a root (or a span whose parent Tempo does not hold)
    error: bool
    origin: bool  # the failure starts here (the span the trace summary marks)


class TraceData(TypedDict):
    kind: Literal["trace"]
    source: str  # "get_trace <id>"
    trace_id: str  # normalised
    rows: list[SpanRow]  # at most MAX_ROWS, in start order
    total_spans: int
    omitted_errors: int  # failed spans not among the rows


ChartData = MetricData | TraceData


class Marker(TypedDict):
    at: float  # unix seconds
    label: str  # "alert HighErrorRate started", "deployment payment-api revision 42"
    kind: Literal["alert", "rollout"]


class ChartSpec(TypedDict):
    """One chart to draw: its data and the markers on its time axis."""

    data: ChartData
    markers: list[Marker]
    unit: NotRequired[str]


class Findings(list[Fact]):
    """A tool result's facts, with the chart data of the same result beside them: the
    `tools` node moves the facts to `evidence` and the chart data to `charts`."""

    def __init__(self, facts: Iterable[Fact], chart: ChartData | None = None) -> None:
        super().__init__(facts)
        self.chart = chart


def keep_charts(left: list[ChartData] | None, right: list[ChartData] | None) -> list[ChartData]:
    """The turn's chart data: `right` appended, the newest MAX_CHARTS_KEPT kept; an empty
    `right` (the runner's input at the start of a turn) starts afresh."""
    if not right:
        return []
    return [*(left or []), *right][-MAX_CHARTS_KEPT:]


def downsampled(points: Sequence[tuple[float, float]], most: int) -> list[tuple[float, float]]:
    """At most about `most` points: each bucket's lowest and highest, so spikes survive."""
    if len(points) <= most:
        return list(points)
    size = math.ceil(len(points) / (most // 2))
    kept: list[tuple[float, float]] = []
    for i in range(0, len(points), size):
        bucket = [p for p in points[i : i + size] if not math.isnan(p[1])]
        if bucket:
            low, high = min(bucket, key=lambda p: p[1]), max(bucket, key=lambda p: p[1])
            kept += sorted({low, high})
    return kept


def metric_data(
    tool: str, query: str, start: float, end: float, series: Iterable[tuple[dict[str, str], Any]]
) -> MetricData:
    """A range query's series for a chart: the top MAX_SERIES by their highest value (the
    order the tool's summary lists them in)."""
    cleaned: list[SeriesData] = []
    for labels, points in series:
        kept = [(float(t), float(v)) for t, v in points if not math.isinf(float(v))]
        cleaned.append({"labels": dict(labels), "points": downsampled(kept, MAX_POINTS)})

    def highest(s: SeriesData) -> float:
        values = [v for _, v in s["points"] if not math.isnan(v)]
        return max(values, default=-math.inf)

    ranked = sorted(cleaned, key=highest, reverse=True)
    return {
        "kind": "metric",
        "source": f"{tool} {clip(query, 120)}",
        "tool": tool,
        "query": query,
        "start": start,
        "end": end,
        "series": ranked[:MAX_SERIES],
        "total_series": len(cleaned),
    }


def _rollout_marker(evidence: Sequence[Fact], answer: str) -> Marker | None:
    """When the Deployment the answer names rolled out its current revision (else its
    newest one): of the Deployments whose rollout history the turn read, the one the answer
    names first."""
    created: dict[str, list[tuple[float, Fact]]] = {}
    current: dict[str, set[str]] = {}
    for f in evidence:
        subject = f.get("subject", "")
        if f.get("pool") == ROLLOUT and subject and (at := parse_iso(f["value"])) is not None:
            created.setdefault(subject, []).append((at, f))
        if f["kind"] == "revision" and f.get("role") == "current" and subject:
            current.setdefault(subject, set()).add(f["value"])
    text = answer.lower()
    named = [
        (m.start(), d)
        for d in created
        if (m := re.search(rf"(?<![\w.-]){re.escape(d)}(?![\w.-])", text)) is not None
    ]
    if not named:
        return None
    deployment = min(named)[1]
    dated = created[deployment]
    own = [(at, f) for at, f in dated if f.get("revision") in current.get(deployment, set())]
    at, chosen = max(own or dated, key=lambda pair: pair[0])
    revision = chosen.get("revision")
    label = f"{deployment} rev {revision} rolled out" if revision else f"{deployment} rolled out"
    return {"at": at, "label": label, "kind": "rollout"}


def _alert_marker(evidence: Sequence[Fact], incident_start: float | None) -> Marker | None:
    """When the thread's alert started, named as the thread's context recorded its start
    (runner: "alert X started")."""
    if not isinstance(incident_start, int | float):
        return None
    name = None
    for f in evidence:
        source = f.get("source", "")
        if f["kind"] == "time" and source.startswith("alert ") and source.endswith(" started"):
            at = parse_iso(f["value"])
            if at is not None and abs(at - incident_start) < 1:
                name = source.removeprefix("alert ").removesuffix(" started")
                break
    label = f"alert {name} started" if name else "alert started"
    return {"at": float(incident_start), "label": label, "kind": "alert"}


def _rested_on(charts: Sequence[ChartData], checks: Sequence[dict[str, Any]]) -> MetricData | None:
    """The metric chart data of the range query the answer rests on: the one that showed
    the most of the answer's grounded claims, as the claim's source, a label value of its
    series (a pod) or a value its selectors match exactly (`deployment="payment-api"`);
    the newest of equals; None when it rests on none."""
    metrics = [c for c in charts if c["kind"] == "metric" and c["series"]]
    grounded = [c for c in checks if c.get("status") == "grounded"]
    best: tuple[int, int] = (0, -1)
    for position, chart in enumerate(metrics):
        values = {v.lower() for s in chart["series"] for v in s["labels"].values()}
        values |= {m.group(1).lower() for m in _EXACT_MATCHER.finditer(chart["query"])}
        shown = sum(
            source_call(str(c.get("source") or "")).lower() == chart["source"].lower()
            or normalise(c["kind"], c["text"]) in values
            for c in grounded
        )
        best = max(best, (shown, position))
    return metrics[best[1]] if best[0] else None


def unit_of(query: str) -> str:
    """The unit a query's values are in, where its metric name says (Prometheus' naming
    conventions: _bytes, _seconds, a ratio); "" when it does not say."""
    text = query.lower()
    if "rate(" in text or "increase(" in text:
        if "_bytes" in text:
            return "bytes/s"
        if "_seconds" in text and "histogram_quantile" in text:
            return "seconds"
        return "per second" if "rate(" in text else ""
    for suffix, unit in (("_bytes", "bytes"), ("_seconds", "seconds"), ("_ratio", "ratio")):
        if suffix in text:
            return unit
    return ""


def charts_for_answer(
    state: dict[str, Any], answer: str, checks: Sequence[dict[str, Any]]
) -> list[ChartSpec]:
    """What to draw under a checked answer: the metric chart of the range query it rests
    on, then the waterfall of the first trace it cites (fetched this turn)."""
    charts: list[ChartData] = list(state.get("charts") or [])
    evidence: list[Fact] = list(state.get("evidence") or [])
    alert = _alert_marker(evidence, state.get("incident_start"))
    markers = [m for m in (alert, _rollout_marker(evidence, answer)) if m is not None]
    specs: list[ChartSpec] = []
    if metric := _rested_on(charts, checks):
        shown = [m for m in markers if metric["start"] <= m["at"] <= metric["end"]]
        specs.append({"data": metric, "markers": shown, "unit": unit_of(metric["query"])})
    traces = {c["trace_id"]: c for c in charts if c["kind"] == "trace"}
    for trace_id in find_trace_ids(answer):
        if trace_id in traces:
            specs.append({"data": traces[trace_id], "markers": []})
            break
    return specs
