"""B8: charts. Drawing the largest chart data a turn can hold, against a small chart drawn
in the same run: time per chart and the process's peak memory.

- Metric: 8 series of 11,000 points (Prometheus' most points a range query answers per
  series) through `metric_data` and `render_metric`; the baseline is 1 series of 100 points.
- Trace: a 20,000-span trace through `trace_data` (60 rows picked) and `render_waterfall`;
  the baseline is a 3-span trace.

Each case runs in a fresh process (so its peak resident memory is its own): one warm-up
render, then BENCH_REPEATS timed renders; the figure is the median, the smallest and largest
beside it. Peak memory is the process's `ru_maxrss` after them, imports included (the
baseline's shows what the imports and one figure cost).

`.venv/bin/python -m bench.charts` writes its section of BENCHMARKS.md; `make bench` runs it
with the rest.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness import write_section

OUT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
BEGIN, END = "<!-- charts: begin -->", "<!-- charts: end -->"
REPEATS = max(1, int(os.environ.get("BENCH_REPEATS", "3")))
T0 = 1_767_000_000.0
CASES = {
    "metric-baseline": "metric chart, 1 series × 100 points (baseline)",
    "metric-large": "metric chart, 8 series × 11,000 points",
    "trace-baseline": "waterfall, 3-span trace (baseline)",
    "trace-large": "waterfall, 20,000-span trace (60 rows drawn)",
}
TARGETS = {"metric-large": "< 2 s, < 300 MiB", "trace-large": "< 2 s, < 300 MiB"}


def _metric(series: int, points: int) -> Callable[[], bytes]:
    from bot.outbound.charts import render_metric
    from graph.charts import ChartSpec, metric_data

    raw = [
        ({"pod": f"payment-api-{i}"}, [(T0 + 15 * k, float(i + (k % 97))) for k in range(points)])
        for i in range(series)
    ]

    def run() -> bytes:
        data = metric_data("query_prometheus_range", "sum by (pod) (x)", T0, T0 + 15 * points, raw)
        marker = {"at": T0 + 15 * points / 2, "label": "rollout", "kind": "rollout"}
        spec: ChartSpec = {"data": data, "markers": [marker], "unit": "bytes"}  # type: ignore[list-item]
        return render_metric(spec)

    return run


def _trace(count: int) -> Callable[[], bytes]:
    from bot.outbound.charts import render_waterfall
    from graph.charts import ChartSpec
    from graph.tools.tempo import Span, Workload, trace_data

    start = int(T0 * 1e9)
    spans = [
        Span(
            span_id=f"{i + 1:016x}",
            parent_id=f"{(i + 1) // 2:016x}" if i else None,  # a binary call tree
            workload=Workload(f"svc{i % 12}", ()),
            name=f"GET /api/{i}",
            start_ns=start + i * 10_000,
            end_ns=start + i * 10_000 + (count - i) * 1_000,
            error=i == count - 1,
            status_message="",
            attributes={},
        )
        for i in range(count)
    ]

    def run() -> bytes:
        spec: ChartSpec = {"data": trace_data("ab" * 16, spans), "markers": []}
        return render_waterfall(spec)

    return run


def one(case: str) -> dict[str, Any]:
    """Run one case in this process: timed renders, then the peak resident memory."""
    run = {
        "metric-baseline": lambda: _metric(1, 100),
        "metric-large": lambda: _metric(8, 11_000),
        "trace-baseline": lambda: _trace(3),
        "trace-large": lambda: _trace(20_000),
    }[case]()
    png = run()  # warm-up: fonts and caches
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"ms": times, "peak_mib": peak_kib / 1024, "png_kib": len(png) / 1024}


def _in_a_process(case: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.charts", "--one", case],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure() -> str:
    results = {case: _in_a_process(case) for case in CASES}
    rows = []
    for case, label in CASES.items():
        r = results[case]
        base = results[case.split("-")[0] + "-baseline"]
        ms = statistics.median(r["ms"])
        figure = (
            f"{ms:.0f} ms ({min(r['ms']):.0f}–{max(r['ms']):.0f}) a chart; "
            f"peak RSS {r['peak_mib']:.0f} MiB; PNG {r['png_kib']:.0f} KiB"
        )
        vs = (
            "—"
            if r is base
            else f"{ms / statistics.median(base['ms']):.2f}× the time, "
            f"+{r['peak_mib'] - base['peak_mib']:.0f} MiB"
        )
        rows.append(f"| B8 charts | {label} | {figure} | {vs} | {TARGETS.get(case, '')} |")
    return "\n".join(
        [
            BEGIN,
            "## Charts (`python -m bench.charts`)",
            "",
            "| benchmark | variant | figure | vs baseline | target |",
            "|---|---|---|---|---|",
            *rows,
            "",
            "- Each case in a fresh process: a warm-up render, then the timed ones (median,",
            "  min–max); peak RSS is the process's `ru_maxrss`, interpreter and matplotlib",
            "  included (the baseline's row is what they and one small figure cost).",
            "- A metric chart keeps and draws at most 1,200 points a series (each bucket's",
            "  min and max, so spikes stay); a waterfall at most 60 rows: the cost is bounded",
            "  by those, not by the data a tool returned.",
            END,
        ]
    )


def write(section: str) -> None:
    write_section(OUT, BEGIN, END, section)


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(one(sys.argv[2])))
        return
    section = measure()
    write(section)
    print(section)


if __name__ == "__main__":
    main()
