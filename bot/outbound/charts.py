"""Charts of the evidence under an answer: PNGs drawn from tool data, uploaded to the thread.

What is drawn comes from `InvestigationResult.charts` (graph/charts.py): a range query's
series and a trace's spans as the tools returned them, and markers from the thread's
evidence. The model's text supplies no number, label or colour. Drawn with matplotlib's
object-oriented API on the Agg canvas (no display, no pyplot global state), so renders in
concurrent turns do not share a figure.

Uploads follow Slack's external upload flow (files.getUploadURLExternal, the bytes to the
URL it hands out, files.completeUploadExternal with channel_id and thread_ts), through
slack_sdk's `files_upload_v2`. An upload Slack refuses never fails the turn: the answer is
already posted, and Steps says which chart was not posted and why.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import math
import textwrap
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound.posts import first_message
from graph.charts import ChartSpec
from graph.tools.prometheus import number
from graph.untrusted import clip

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# matplotlib is imported where a chart is drawn (a worker, after an answer), not when the
# module is: `serve` and the CLI never draw, and the import is ~0.5 s of every start-up.

UPLOAD_TIMEOUT_S = 30.0  # the three calls of one upload, together
WIDTH_IN, HEIGHT_IN, DPI = 10.0, 4.8, 110
TITLE_CHARS = 90  # of the query in a title
LEGEND_CHARS = 48  # of one series' labels in the legend
ROW_LABEL_CHARS = 34  # service and span name on a waterfall row
ALT_CHARS = 1000  # Slack's alt text limit is larger; a reader needs less
# A palette that stays apart for the colour-blind (Okabe–Ito), in the order series rank.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
MARKER_COLOURS = {"alert": "#D55E00", "rollout": "#6A3D9A"}
ERROR_COLOUR, ORIGIN_COLOUR, OK_COLOUR = "#E69F00", "#D55E00", "#7FA7C9"
# A legend right of the axes.
LEGEND: Any = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "fontsize": 8, "frameon": False}


@dataclass(frozen=True)
class Chart:
    """One PNG to post: its bytes, file name, title and alt text."""

    filename: str
    title: str
    alt: str
    png: bytes


def _literal(text: str) -> str:
    """Text drawn as it is: matplotlib reads `$…$` as mathtext."""
    return text.replace("$", r"\$")


# Where Unix time 0 falls on a date axis (matplotlib's date numbers: days since its epoch).
@cache
def _unix_epoch() -> float:
    from matplotlib.dates import date2num

    return float(date2num(datetime(1970, 1, 1, tzinfo=UTC)))  # type: ignore[no-untyped-call]


def _utc(at: float) -> float:
    """A Unix time on a date axis."""
    return _unix_epoch() + at / 86400.0


def _hhmm(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S UTC")


def _legend(labels: dict[str, str]) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__")
    return clip(shown or labels.get("__name__", "") or "(no labels)", LEGEND_CHARS)


def _png(figure: Figure) -> bytes:
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=DPI)
    return out.getvalue()


ENGINEERING_UNITS = {"bytes": "B", "bytes/s": "B/s", "seconds": "s"}  # shown as 3kB, 340ms


def render_metric(spec: ChartSpec) -> bytes:
    """A range query's top series over the window, UTC time axis, the markers labelled."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter, FuncFormatter

    data = spec["data"]
    assert data["kind"] == "metric"
    unit = spec.get("unit", "")
    figure = Figure(figsize=(WIDTH_IN, HEIGHT_IN), layout="constrained")
    axes = figure.add_subplot()
    for i, series in enumerate(data["series"]):
        axes.plot(
            [_utc(p[0]) for p in series["points"]],
            [p[1] for p in series["points"]],
            color=PALETTE[i % len(PALETTE)],
            linewidth=1.6,
            label=_literal(_legend(series["labels"])),
        )
    axes.set_xlim(_utc(data["start"]), _utc(data["end"]))
    if spec["markers"]:  # room above the curves for the markers' labels
        low, high = axes.get_ylim()
        axes.set_ylim(low, high + (high - low) * (0.12 + 0.08 * len(spec["markers"])))
    # Vertical lines, each labelled at the top, one label a line so none overlaps; a label of
    # a marker in the window's right third is written to the left of its line.
    start, end = data["start"], data["end"]
    for i, marker in enumerate(sorted(spec["markers"], key=lambda m: m["at"])):
        leftwards = end > start and (marker["at"] - start) / (end - start) > 0.66
        colour = MARKER_COLOURS.get(marker["kind"], "#444444")
        axes.axvline(_utc(marker["at"]), color=colour, linestyle="--", linewidth=1.4)
        axes.annotate(
            _literal(f"{marker['label']} {_hhmm(marker['at'])[:5]}"),
            xy=(_utc(marker["at"]), 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(-4 if leftwards else 4, -12 - 14 * i),
            textcoords="offset points",
            ha="right" if leftwards else "left",
            fontsize=8,
            color=colour,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": colour, "alpha": 0.9},
        )
    locator = AutoDateLocator(maxticks=8, tz=UTC)  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]
    if unit in ENGINEERING_UNITS:
        axes.yaxis.set_major_formatter(EngFormatter(unit=ENGINEERING_UNITS[unit], places=0, sep=""))
    else:
        axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
    axes.set_xlabel("time (UTC)")
    axes.set_ylabel(unit or "value")
    axes.grid(True, alpha=0.3)
    more = data["total_series"] - len(data["series"])
    # The query on up to two lines of TITLE_CHARS, broken at a space, clipped after that.
    lines = textwrap.wrap(" ".join(data["query"].split()), TITLE_CHARS, break_on_hyphens=False)
    if len(lines) > 2:
        lines = [lines[0], clip(" ".join(lines[1:]), TITLE_CHARS)]
    axes.set_title(_literal("\n".join(lines)), fontsize=9, loc="left", family="monospace")
    if data["series"]:
        axes.legend(
            **LEGEND,
            title=f"top {len(data['series'])} of {data['total_series']} series" if more else None,
            title_fontsize=8,
        )
    else:
        axes.text(0.5, 0.5, "no series", transform=axes.transAxes, ha="center")
    return _png(figure)


def render_waterfall(spec: ChartSpec) -> bytes:
    """A trace's spans as bars by start and duration, one row each, labelled with service
    and span name; failed spans in amber, the span where the failure starts in red."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    data = spec["data"]
    assert data["kind"] == "trace"
    rows = data["rows"]
    height = max(2.6, 0.6 + 0.24 * (len(rows) + 1))
    figure = Figure(figsize=(WIDTH_IN, height), layout="constrained")
    axes = figure.add_subplot()
    start = min((r["start_ns"] for r in rows), default=0)
    lefts = [(r["start_ns"] - start) / 1e6 for r in rows]
    widths = [max((r["end_ns"] - r["start_ns"]) / 1e6, 0.0) for r in rows]
    axes.barh(  # one call, one artist for all rows: a figure of 60 bars draws in time
        range(len(rows)),
        widths,
        left=lefts,
        height=0.7,
        color=[
            ORIGIN_COLOUR if r["origin"] else ERROR_COLOUR if r["error"] else OK_COLOUR
            for r in rows
        ],
        edgecolor=["black" if r["origin"] else "none" for r in rows],
        linewidth=[1.2 if r["origin"] else 0.0 for r in rows],
    )
    for y, row in enumerate(rows):
        if row["origin"]:
            axes.annotate(
                "failure starts here",
                xy=(lefts[y] + widths[y], y),
                xytext=(6, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
                color=ORIGIN_COLOUR,
                fontweight="bold",
            )
    labels = [_literal(clip(f"{r['service']}: {r['name']}", ROW_LABEL_CHARS)) for r in rows]
    axes.set_yticks(range(len(rows)), labels, fontsize=8, family="monospace")
    axes.set_ylim(len(rows) - 0.5, -0.5)  # the first span on top
    axes.set_xlabel(f"ms since the trace started ({_hhmm(start / 1e9)})")
    axes.grid(True, axis="x", alpha=0.3)
    end = max(((r["end_ns"] - start) / 1e6 for r in rows), default=1.0)
    axes.set_xlim(0, max(end, 1e-3) * 1.28)  # room right of the bars for the origin's label
    rest = data["total_spans"] - len(rows)
    title = f"trace {data['trace_id']}: {data['total_spans']} spans"
    if rest:
        title += f", {len(rows)} shown ({rest} more"
        title += f", {data['omitted_errors']} of them failed)" if data["omitted_errors"] else ")"
    axes.set_title(title, fontsize=10, loc="left")
    axes.legend(
        handles=[
            Patch(color=ORIGIN_COLOUR, label="failure starts here"),
            Patch(color=ERROR_COLOUR, label="failed (passed on)"),
            Patch(color=OK_COLOUR, label="ok"),
        ],
        **LEGEND,
    )
    return _png(figure)


def metric_alt(spec: ChartSpec) -> str:
    """What the metric chart shows, in words (from the same data)."""
    data = spec["data"]
    assert data["kind"] == "metric"
    window = f"{_hhmm(data['start'])} to {_hhmm(data['end'])}"
    parts = [
        f"Line chart of {data['query']} from {window}, "
        f"{len(data['series'])} of {data['total_series']} series."
    ]
    for series in data["series"][:3]:
        values = [v for _, v in series["points"] if not math.isnan(v)]
        if values:
            parts.append(
                f"{_legend(series['labels'])}: from {number(values[0])} to {number(values[-1])}, "
                f"max {number(max(values))}."
            )
    parts += [f"Marker: {m['label']} at {_hhmm(m['at'])}." for m in spec["markers"]]
    return clip(" ".join(parts), ALT_CHARS)


def trace_alt(spec: ChartSpec) -> str:
    data = spec["data"]
    assert data["kind"] == "trace"
    origins = [r for r in data["rows"] if r["origin"]]
    where = (
        "; the failure starts in " + ", ".join(f"{r['service']} {r['name']}" for r in origins[:3])
        if origins
        else "; no failed span"
    )
    return clip(
        f"Waterfall of trace {data['trace_id']}: {data['total_spans']} spans, "
        f"{len(data['rows'])} drawn by start time and duration{where}.",
        ALT_CHARS,
    )


def chart_key(index: int, spec: dict[str, Any]) -> str:
    """The delivery step of a result's `index`th chart."""
    return f"chart:{index}:{spec['data']['kind']}"


def draw(index: int, raw: dict[str, Any], turn_id: str) -> Chart:
    """The PNG of a result's `index`th chart spec; its file name carries a tag of the turn,
    so a resumed turn can find a chart an earlier run uploaded."""
    tag = hashlib.sha256(turn_id.encode()).hexdigest()[:8]
    spec: ChartSpec = raw  # type: ignore[assignment]  # stored with the turn as plain JSON
    data = spec["data"]
    if data["kind"] == "metric":
        title, alt, png = clip(data["query"], TITLE_CHARS), metric_alt(spec), render_metric(spec)
    else:
        title, alt, png = f"trace {data['trace_id']}", trace_alt(spec), render_waterfall(spec)
    return Chart(filename=f"{data['kind']}-{tag}-{index}.png", title=title, alt=alt, png=png)


def refusal(exc: BaseException) -> str:
    """Why Slack did not take a chart, in words for Steps (and what to change)."""
    if isinstance(exc, SlackApiError):
        data = exc.response.data if isinstance(exc.response.data, dict) else {}
        error = str(data.get("error") or exc.response.status_code)
        if error == "missing_scope":
            needed = data.get("needed") or "files:write"
            return f"missing_scope: the app lacks {needed} (reinstall it with manifest.yml)"
        if error == "ratelimited" or exc.response.status_code == 429:
            return "ratelimited: Slack's rate limit for file uploads"
        return error
    if isinstance(exc, TimeoutError):
        return f"timeout: no answer from Slack within {UPLOAD_TIMEOUT_S:.0f} s"
    if isinstance(exc, SlackRequestError):
        return f"upload refused ({clip(str(exc), 120)})"
    return type(exc).__name__


async def upload(client: AsyncWebClient, channel: str, thread_ts: str, chart: Chart) -> None:
    """Slack's external upload flow, through slack_sdk: files.getUploadURLExternal (the
    declared length), the bytes to the URL it handed out, files.completeUploadExternal
    into the thread."""
    async with asyncio.timeout(UPLOAD_TIMEOUT_S):
        await client.files_upload_v2(
            channel=channel,
            thread_ts=thread_ts,
            file=chart.png,
            filename=chart.filename,
            title=chart.title,
            alt_txt=chart.alt,
        )


async def uploaded(
    client: AsyncWebClient, channel: str, thread_ts: str, filename: str, since: float
) -> bool:
    """Whether a file named `filename` was shared in the thread after `since` (an earlier
    run of the turn may have uploaded it before it could record so)."""
    first = await client.conversations_replies(
        channel=channel, ts=thread_ts, oldest=f"{since:.6f}", limit=200
    )

    def shares_it(message: dict[str, Any]) -> bool:
        return any(f.get("name") == filename for f in message.get("files") or [])

    return await first_message(first, shares_it) is not None
