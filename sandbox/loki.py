"""A Grafana Loki simulator: LogQL range queries over stored streams, with Loki's answers.

Behaviour copied from Loki:
- `GET /loki/api/v1/query_range` (`query`, `start`, `end` in unix nanoseconds, unix seconds
  or RFC 3339, `limit` default 100, `direction` backward|forward, `step` for metric queries):
  `{"status": "success", "data": {"resultType": "streams", "result": [{"stream": {labels},
  "values": [["<ns>", "<line>"], ...]}], "stats": {...}}}`; the limit counts lines across all
  streams, the newest first (backward) or the oldest (forward). Metric queries answer
  `matrix` like Prometheus.
- Errors are plain text: 400 `parse error at line 1, col N: syntax error: ...` for bad LogQL,
  a selector whose every matcher matches the empty string, `limit` above 5000, an unknown
  `direction`, `end` not after `start`.
- `/loki/api/v1/labels`, `/loki/api/v1/label/<name>/values`.
- With `tenant` set, every request must carry `X-Scope-OrgID` (401 "no org id" otherwise).

LogQL subset (anything else is a 400 parse error):
  log query    := {matchers} [filter ...]        filter := (|=|!=|~|!~) "text"
  metric query := [(sum|max|min|count) [by (l, ...)]] ( (count_over_time|rate)
                  ( log query [dur] ) )
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aiohttp import web

from sandbox.prometheus import format_value, label_matches, parse_duration
from sandbox.server import SimulatorServer

MAX_ENTRIES = 5000  # limits_config.max_entries_limit_per_query
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')
_FILTER = re.compile(r'\s*(\|=|!=|\|~|!~)\s*"((?:[^"\\]|\\.)*)"')
_METRIC = re.compile(
    r"^\s*(?:(sum|max|min|count)\s*(?:by\s*\(([\w\s,]*)\))?\s*\()?\s*"
    r"(count_over_time|rate)\s*\((.*)\[(\w+)\]\s*\)\s*(\))?\s*$",
    re.DOTALL,
)


class LogQLError(ValueError):
    pass


@dataclass
class LogQuery:
    matchers: list[tuple[str, str, str]]
    filters: list[tuple[str, str]]

    def selects(self, labels: dict[str, str]) -> bool:
        return all(label_matches(labels.get(k, ""), op, v) for k, op, v in self.matchers)

    def keeps(self, line: str) -> bool:
        for op, text in self.filters:
            if op == "|=" and text not in line:
                return False
            if op == "!=" and text in line:
                return False
            if op in ("|~", "!~") and (re.search(text, line) is None) == (op == "|~"):
                return False
        return True


@dataclass
class MetricQuery:
    log: LogQuery
    function: str  # count_over_time | rate
    range_s: float
    aggregation: str | None
    by: list[str] | None


def _syntax(query: str, at: int, message: str) -> LogQLError:
    return LogQLError(f"parse error at line 1, col {at + 1}: syntax error: {message}")


def parse_log_query(query: str) -> LogQuery:
    text = query.strip()
    if not text.startswith("{"):
        found = text.split(maxsplit=1)[0] if text else "end of input"
        raise _syntax(query, 0, f"unexpected {found}, expecting {{")
    close = text.find("}")
    if close < 0:
        raise _syntax(query, len(text), "unexpected end of input, expecting }")
    inner, rest = text[1:close], text[close + 1 :]
    matchers = []
    pos = 0
    while pos < len(inner):
        m = _MATCHER.match(inner, pos)
        if m is None:
            raise _syntax(query, pos + 1, f"unexpected {inner[pos:].strip()[:20]!r}")
        value = m.group(3).encode().decode("unicode_escape")
        if m.group(2) in ("=~", "!~"):
            try:
                re.compile(value)
            except re.error as exc:
                raise LogQLError(f"parse error : invalid regexp: {exc}") from None
        matchers.append((m.group(1), m.group(2), value))
        pos = m.end()
        if pos < len(inner):
            if inner[pos] != ",":
                raise _syntax(query, pos + 1, f"unexpected {inner[pos]!r}, expecting ,")
            pos += 1
    if not matchers or all(label_matches("", op, v) for _, op, v in matchers):
        raise LogQLError(
            "parse error : queries require at least one regexp or equality matcher that does "
            'not have an empty-compatible value. For instance, app=~".*" does not meet this '
            'requirement, but app=~".+" will'
        )
    filters = []
    pos = 0
    while pos < len(rest.rstrip()):
        m = _FILTER.match(rest, pos)
        if m is None:
            at = close + 1 + pos
            raise _syntax(query, at, f"unexpected {rest[pos:].strip()[:20]!r}")
        value = m.group(2).encode().decode("unicode_escape")
        op = m.group(1)
        if op in ("|~", "!~"):
            try:
                re.compile(value)
            except re.error as exc:
                raise LogQLError(f"parse error : invalid regexp: {exc}") from None
        filters.append((op, value))
        pos = m.end()
    return LogQuery(matchers, filters)


def parse_logql(query: str) -> LogQuery | MetricQuery:
    if query.strip().startswith("{"):
        return parse_log_query(query)
    m = _METRIC.match(query)
    if m is None or (m.group(1) is None) != (m.group(6) is None):
        word = query.strip().split("(", 1)[0].strip() or "end of input"
        raise _syntax(query, 0, f"unexpected {word}")
    by = [b.strip() for b in m.group(2).split(",") if b.strip()] if m.group(2) else None
    try:
        range_s = parse_duration(m.group(5))
    except ValueError as exc:
        raise LogQLError(f"parse error : {exc}") from None
    return MetricQuery(parse_log_query(m.group(4)), m.group(3), range_s, m.group(1), by)


def parse_time_ns(text: str) -> int:
    """Unix nanoseconds, unix seconds (with a fraction) or RFC 3339, as Loki takes them."""
    if re.fullmatch(r"\d+", text):
        return int(text) if len(text) > 12 else int(text) * 10**9
    try:
        return int(float(text) * 1e9)
    except ValueError:
        pass
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        raise ValueError(f'could not parse "{text}" as a timestamp') from None


@dataclass
class LokiFaults:
    status: int | None = None  # answer every request with this HTTP status
    latency_s: float = 0.0
    body: str | None = None  # answer every request 200 with this as its JSON (garbage, say)


@dataclass
class LokiSimulator(SimulatorServer):
    # (labels, [(ns, line)]) per stream
    streams: list[tuple[dict[str, str], list[tuple[int, str]]]] = field(default_factory=list)
    tenant: str | None = None
    faults: LokiFaults = field(default_factory=LokiFaults)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    def add(self, labels: dict[str, str], entries: list[tuple[float, str]]) -> None:
        """A stream's lines; times in unix seconds."""
        self.streams.append((dict(labels), sorted((int(t * 1e9), line) for t, line in entries)))

    def routes(self, app: web.Application) -> None:
        app.middlewares.append(self._middleware)
        app.router.add_get("/loki/api/v1/query_range", self._query_range)
        app.router.add_get("/loki/api/v1/labels", self._labels)
        app.router.add_get("/loki/api/v1/label/{name}/values", self._label_values)
        app.router.add_get("/ready", self._ready)

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append((request.path, dict(request.query)))
        if self.tenant is not None and request.headers.get("X-Scope-OrgID") != self.tenant:
            return web.Response(status=401, text="no org id\n")
        if self.faults.latency_s:
            await asyncio.sleep(self.faults.latency_s)
        if self.faults.status is not None:
            return web.Response(status=self.faults.status, text="injected failure\n")
        if self.faults.body is not None:
            return web.Response(text=self.faults.body, content_type="application/json")
        response: web.StreamResponse = await handler(request)
        return response

    async def _ready(self, request: web.Request) -> web.Response:
        return web.Response(text="ready\n")

    async def _query_range(self, request: web.Request) -> web.Response:
        q = request.query
        try:
            query = parse_logql(q.get("query", ""))
            end = parse_time_ns(q["end"]) if "end" in q else time.time_ns()
            start = parse_time_ns(q["start"]) if "start" in q else end - 3600 * 10**9
            limit = int(q.get("limit", "100"))
        except (LogQLError, ValueError) as exc:
            return _bad(str(exc))
        if end <= start:
            return _bad("end timestamp must not be before or equal to start time")
        if limit > MAX_ENTRIES:
            return _bad(
                f"max entries limit per query exceeded, limit > max_entries_limit_per_query "
                f"({limit} > {MAX_ENTRIES})"
            )
        direction = q.get("direction", "backward")
        if direction not in ("backward", "forward"):
            return _bad(f"invalid direction {direction!r}")
        if isinstance(query, MetricQuery):
            try:
                step = parse_duration(q["step"]) if "step" in q else max(1.0, (end - start) / 250e9)
            except ValueError as exc:
                return _bad(str(exc))
            return _success("matrix", self._matrix(query, start, end, step))
        picked = [
            (labels, t, line)
            for labels, entries in self.streams
            if query.selects(labels)
            for t, line in entries
            if start <= t < end and query.keeps(line)
        ]
        picked.sort(key=lambda item: item[1], reverse=direction == "backward")
        by_stream: dict[tuple[tuple[str, str], ...], list[list[str]]] = {}
        for labels, t, line in picked[:limit]:
            by_stream.setdefault(tuple(sorted(labels.items())), []).append([str(t), line])
        result = [{"stream": dict(key), "values": values} for key, values in by_stream.items()]
        return _success("streams", result)

    def _matrix(
        self, query: MetricQuery, start: int, end: int, step: float
    ) -> list[dict[str, Any]]:
        series: dict[tuple[tuple[str, str], ...], list[list[Any]]] = {}
        at = start
        while at <= end:
            values: dict[tuple[tuple[str, str], ...], float] = {}
            for labels, entries in self.streams:
                if not query.log.selects(labels):
                    continue
                low = at - query.range_s * 1e9
                count = sum(1 for t, line in entries if low < t <= at and query.log.keeps(line))
                if not count:
                    continue
                value = count / query.range_s if query.function == "rate" else float(count)
                if query.aggregation is None:
                    key = tuple(sorted(labels.items()))
                else:
                    key = tuple(sorted((k, labels[k]) for k in query.by or [] if k in labels))
                if query.aggregation in (None, "sum"):
                    values[key] = values.get(key, 0.0) + value
                elif query.aggregation == "max":
                    values[key] = max(values.get(key, value), value)
                elif query.aggregation == "min":
                    values[key] = min(values.get(key, value), value)
                else:  # count
                    values[key] = values.get(key, 0.0) + 1
            for key, value in values.items():
                series.setdefault(key, []).append([at / 1e9, format_value(value)])
            at += int(step * 1e9)
        return [{"metric": dict(key), "values": points} for key, points in series.items()]

    async def _labels(self, request: web.Request) -> web.Response:
        names = sorted({k for labels, _ in self.streams for k in labels})
        return web.json_response({"status": "success", "data": names})

    async def _label_values(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        values = sorted({labels[name] for labels, _ in self.streams if name in labels})
        return web.json_response({"status": "success", "data": values})


def _bad(message: str) -> web.Response:
    return web.Response(status=400, text=message + "\n", content_type="text/plain")


def _success(result_type: str, result: list[dict[str, Any]]) -> web.Response:
    stats = {"summary": {"totalLinesProcessed": sum(len(r.get("values", [])) for r in result)}}
    return web.json_response(
        {
            "status": "success",
            "data": {"resultType": result_type, "result": result, "stats": stats},
        }
    )
