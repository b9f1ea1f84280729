"""What the charts under an answer are drawn from: tool data only, bounded, picked for the
checked answer (graph/charts.py), and drawn as PNGs that decode (bot/outbound/charts.py)."""

from __future__ import annotations

import io
from typing import Any

from matplotlib.image import imread

from bot.outbound.charts import draw, metric_alt
from graph.charts import MAX_ROWS, ChartData, charts_for_answer, metric_data
from graph.grounding.evidence import ROLLOUT, fact, iso
from graph.tools.tempo import Span, Workload, summarise_trace, trace_data

T0 = 1_767_000_000.0
QUERY = 'sum by (pod) (rate(http_server_errors_total{deployment="payment-api"}[5m]))'


def _series(count: int) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    return [({"pod": f"p{i}"}, [(T0, 0.0), (T0 + 15, float(i))]) for i in range(count)]


def _span(
    span_id: str, parent: str | None, service: str, *, error: bool = False, ms: int = 5
) -> Span:
    start = int(T0 * 1e9) + int(span_id, 16) * 1000
    return Span(
        span_id=span_id,
        parent_id=parent,
        workload=Workload(service, ()),
        name=f"call {span_id}",
        start_ns=start,
        end_ns=start + ms * 1_000_000,
        error=error,
        status_message="",
        attributes={},
    )


def test_a_metric_chart_keeps_the_top_8_series_by_their_highest_value() -> None:
    data = metric_data("query_prometheus_range", QUERY, T0, T0 + 15, _series(11))
    assert [s["labels"]["pod"] for s in data["series"]] == [f"p{i}" for i in range(10, 2, -1)]
    assert data["total_series"] == 11


def test_a_series_of_11000_points_is_kept_as_1200_with_its_spike() -> None:
    points = [(T0 + 15 * k, 1.0 if k != 7_777 else 99.0) for k in range(11_000)]
    (kept,) = metric_data("query_prometheus_range", QUERY, T0, T0 + 165_000, [({}, points)])[
        "series"
    ]
    assert len(kept["points"]) <= 1_200
    assert (T0 + 15 * 7_777, 99.0) in kept["points"]


def test_the_waterfall_highlights_the_span_the_summary_marks_where_the_failure_starts() -> None:
    spans = [
        _span("0000000000000001", None, "checkout", error=True),
        _span("0000000000000002", "0000000000000001", "payment-api", error=True),
        _span("0000000000000003", "0000000000000002", "postgres"),
    ]
    (marked,) = [
        line for line in summarise_trace("ab" * 16, spans).splitlines() if "failure starts" in line
    ]
    (origin,) = [r for r in trace_data("ab" * 16, spans)["rows"] if r["origin"]]
    assert marked.startswith(f"- {origin['service']} {origin['name']}")
    assert origin["service"] == "payment-api"


def test_a_20000_span_trace_draws_60_rows_with_the_failure_origin_and_its_callers() -> None:
    # a chain of calls, the deeper ones longer; one call made by the fifth fails
    spans = [_span(f"{1:016x}", None, "checkout")]
    spans += [
        _span(f"{i:016x}", f"{i - 1:016x}", f"svc{i % 7}", ms=5 if i <= 5 else 10)
        for i in range(2, 20_000)
    ]
    spans.append(_span(f"{20_000:016x}", f"{5:016x}", "payment-api", error=True))
    data = trace_data("ab" * 16, spans)
    rows = data["rows"]
    assert len(rows) == MAX_ROWS and data["total_spans"] == 20_000
    assert [r["service"] for r in rows if r["origin"]] == ["payment-api"]
    # its callers are drawn with it: the five spans from the root down to it
    assert {r["name"] for r in rows} >= {f"call {i:016x}" for i in (1, 2, 3, 4, 5, 20_000)}


def _state(charts: list[ChartData], deployment: str = "payment-api") -> dict[str, Any]:
    source = f"get_rollout_history shop/{deployment}"
    evidence = [
        fact(
            "time",
            iso(T0 - 3600),
            f"{source}: revision 41: created",
            pool=ROLLOUT,
            revision="41",
            subject=deployment,
        ),
        fact(
            "time",
            iso(T0 + 600),
            f"{source}: revision 42: created",
            pool=ROLLOUT,
            revision="42",
            subject=deployment,
        ),
        fact("revision", "42", source, role="current", subject=deployment),
        fact("time", iso(T0 + 780), "alert CheckoutErrorRate started"),
    ]
    return {"charts": charts, "evidence": evidence, "incident_start": T0 + 780}


GROUNDED = [{"kind": "workload", "text": "payment-api", "status": "grounded", "source": "x"}]


def test_the_markers_are_the_alert_start_and_the_named_deployments_current_rollout() -> None:
    data = metric_data("query_prometheus_range", QUERY, T0, T0 + 3600, _series(2))
    (spec,) = charts_for_answer(_state([data]), "`payment-api` revision 42 fails.", GROUNDED)
    markers = {m["kind"]: (m["at"], m["label"]) for m in spec["markers"]}
    assert markers == {
        "rollout": (T0 + 600, "payment-api rev 42 rolled out"),
        "alert": (T0 + 780, "alert CheckoutErrorRate started"),
    }


def test_an_answer_resting_on_no_range_query_gets_no_metric_chart() -> None:
    data = metric_data("query_prometheus_range", 'up{job="orders"}', T0, T0 + 3600, _series(2))
    assert charts_for_answer(_state([data]), "`payment-api` revision 42 fails.", GROUNDED) == []


def test_the_charts_are_pngs_that_decode_and_their_alt_text_names_the_markers() -> None:
    data = metric_data("query_prometheus_range", QUERY, T0, T0 + 3600, _series(3))
    trace = trace_data("ab" * 16, [_span("0000000000000001", None, "checkout", error=True)])
    answer = f"`payment-api` fails; see {'ab' * 16}."
    specs = charts_for_answer(_state([data, trace]), answer, GROUNDED)
    metric, waterfall = (draw(i, dict(s), "turn-1") for i, s in enumerate(specs))
    for chart in (metric, waterfall):
        pixels = imread(io.BytesIO(chart.png), format="png")
        assert pixels.shape[0] > 200 and pixels.shape[1] > 800
    assert "payment-api rev 42 rolled out at " + "09:30:00 UTC" in metric_alt(specs[0])
    assert metric.filename != waterfall.filename
