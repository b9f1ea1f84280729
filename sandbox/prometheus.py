"""A Prometheus HTTP API simulator (Mimir and Thanos serve the same API): instant and range
queries over stored series, label discovery, the API's response and error shapes.

Behaviour copied from Prometheus:
- `GET|POST /api/v1/query` (`query`, `time`), `/api/v1/query_range` (`query`, `start`,
  `end`, `step`): `{"status": "success", "data": {"resultType": ..., "result": [...]}}`;
  sample values are strings, timestamps unix seconds.
- Errors: `{"status": "error", "errorType": ..., "error": ...}`: 400 `bad_data` for a bad
  parameter or a parse error (`invalid parameter "query": 1:7: parse error: ...`), 422
  `execution` when the expression cannot be evaluated (two series of one labelset after a
  function drops the metric name), 503 `timeout` (injected).
- Range queries: `end` before `start`, a step of 0 or less, more than 11,000 points per
  series and a range-vector expression are 400, worded as Prometheus words them.
- Instant selectors look back 5 minutes (the default lookback delta).
- `/api/v1/labels`, `/api/v1/label/<name>/values`, `/api/v1/series` with `match[]`.
- With `tenant` set (Mimir), every request must carry `X-Scope-OrgID` (401 otherwise).

PromQL subset (anything else is a 400 parse error):
  expr     := agg | func | selector
  agg      := (sum|min|max|avg|count) [by|without (l, ...)] ( expr ) [by|without (l, ...)]
  func     := (rate|increase|max_over_time|min_over_time|avg_over_time) ( selector[dur] )
  selector := name [{matchers}] | {matchers}     matcher := label (=|!=|=~|!~) "value"
`rate` is (last - first) / (their time apart) over the window, counter resets included;
Prometheus also extrapolates to the window's edges, which this does not.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aiohttp import web
from multidict import MultiDict

from sandbox.server import SimulatorServer

LOOKBACK_S = 300.0
MAX_POINTS = 11_000
AGGREGATIONS = ("sum", "min", "max", "avg", "count")
FUNCTIONS = ("rate", "increase", "max_over_time", "min_over_time", "avg_over_time")
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNITS_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_TOKEN = re.compile(
    r"\s*(?:(?P<string>\"(?:[^\"\\]|\\.)*\")|(?P<duration>\[\s*(?:\d+(?:ms|s|m|h|d|w|y))+\s*\])"
    r"|(?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)|(?P<op>=~|!~|!=|=|[(){},])|(?P<other>\S))"
)


class PromQLError(ValueError):
    """A parse error, worded as Prometheus' parser words them."""


class ExecutionError(ValueError):
    """An expression that parsed but cannot be evaluated (422 `execution`)."""


def parse_duration(text: str) -> float:
    """`5m`, `1h30m`, `90s` in seconds; a float is taken as seconds (as Prometheus does)."""
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f'cannot parse "{text}" to a valid duration')
    return sum(int(n) * _UNITS_S[u] for n, u in parts)


def parse_time(text: str) -> float:
    """Unix seconds or RFC 3339, as the API takes them."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ValueError(f'cannot parse "{text}" to a valid timestamp') from None


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


@dataclass
class SimSeries:
    labels: dict[str, str]  # with `__name__`
    samples: list[tuple[float, float]]  # (unix seconds, value), oldest first


Matcher = tuple[str, str, str]  # label, op, value


@dataclass
class Selector:
    matchers: list[Matcher]
    range_s: float | None = None

    def matches(self, labels: dict[str, str]) -> bool:
        return all(label_matches(labels.get(k, ""), op, v) for k, op, v in self.matchers)


def label_matches(have: str, op: str, want: str) -> bool:
    """A label matcher (`=`, `!=`, `=~`, `!~`; regexes anchored), as PromQL and LogQL read it."""
    if op == "=":
        return have == want
    if op == "!=":
        return have != want
    hit = re.fullmatch(want, have) is not None
    return hit if op == "=~" else not hit


@dataclass
class Call:
    function: str
    arg: Selector


@dataclass
class Aggregation:
    op: str
    inner: Expr
    by: list[str] | None = None
    without: list[str] | None = None


Expr = Aggregation | Call | Selector


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.lastgroup is None:
                break
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0

    def error(self, message: str, at: int | None = None) -> PromQLError:
        column = (at if at is not None else self._pos()) + 1
        return PromQLError(f"1:{column}: parse error: {message}")

    def _pos(self) -> int:
        return self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, value: str | None = None, kind: str | None = None) -> str:
        token = self.peek()
        if token is None:
            raise self.error(f"unexpected end of input, expected {value or kind}")
        if (value is not None and token[1] != value) or (kind is not None and token[0] != kind):
            raise self.error(f'unexpected "{token[1]}", expected {value or kind}')
        self.i += 1
        return token[1]

    def parse(self) -> Expr:
        if not self.tokens:
            raise PromQLError("no expression found in input")
        expr = self.expr()
        if self.peek() is not None:
            raise self.error(
                f'unexpected "{self.tokens[self.i][1]}" (not in the simulator\'s subset)'
            )
        return expr

    def expr(self) -> Expr:
        token = self.peek()
        if token is None:
            raise self.error("unexpected end of input")
        kind, value, _ = token
        following = self.tokens[self.i + 1][1] if self.i + 1 < len(self.tokens) else ""
        if kind == "ident" and value in AGGREGATIONS and following in ("(", "by", "without"):
            return self.aggregation()
        if kind == "ident" and following == "(":
            if value not in FUNCTIONS:
                raise self.error(f'unknown function with name "{value}"')
            return self.call()
        return self.selector()

    def grouping(self) -> tuple[str, list[str]] | None:
        token = self.peek()
        if token is None or token[1] not in ("by", "without"):
            return None
        self.i += 1
        self.take("(")
        labels = []
        while self.peek() is not None and self.peek()[1] != ")":  # type: ignore[index]
            labels.append(self.take(kind="ident"))
            if self.peek() is not None and self.peek()[1] == ",":  # type: ignore[index]
                self.i += 1
        self.take(")")
        return token[1], labels

    def aggregation(self) -> Aggregation:
        op = self.take(kind="ident")
        group = self.grouping()
        self.take("(")
        inner = self.expr()
        self.take(")")
        group = group or self.grouping()
        agg = Aggregation(op, inner)
        if group is not None:
            setattr(agg, group[0] if group[0] == "by" else "without", group[1])
        if isinstance(inner, Selector) and inner.range_s is not None:
            raise self.error(
                "expected type instant vector in aggregation expression, got range vector"
            )
        return agg

    def call(self) -> Call:
        name = self.take(kind="ident")
        self.take("(")
        at = self._pos()
        arg = self.selector()
        self.take(")")
        if arg.range_s is None:
            raise self.error(
                f'expected type range vector in call to function "{name}", got instant vector',
                at,
            )
        return Call(name, arg)

    def selector(self) -> Selector:
        matchers: list[Matcher] = []
        token = self.peek()
        if token is not None and token[0] == "ident":
            matchers.append(("__name__", "=", self.take(kind="ident")))
        if self.peek() is not None and self.peek()[1] == "{":  # type: ignore[index]
            self.i += 1
            while self.peek() is not None and self.peek()[1] != "}":  # type: ignore[index]
                label = self.take(kind="ident")
                op_token = self.peek()
                if op_token is None or op_token[1] not in ("=", "!=", "=~", "!~"):
                    raise self.error("unexpected character inside braces, expected =, !=, =~ or !~")
                self.i += 1
                raw = self.take(kind="string")
                value = raw[1:-1].encode().decode("unicode_escape")
                if op_token[1] in ("=~", "!~"):
                    try:
                        re.compile(value)
                    except re.error as exc:
                        raise self.error(f"error parsing regexp: {exc}") from None
                matchers.append((label, op_token[1], value))
                if self.peek() is not None and self.peek()[1] == ",":  # type: ignore[index]
                    self.i += 1
            self.take("}")
        if not matchers:
            raise self.error("unexpected input, expected a metric name or {")
        if all(label_matches("", op, v) for _, op, v in matchers):
            raise PromQLError("vector selector must contain at least one non-empty matcher")
        selector = Selector(matchers)
        token = self.peek()
        if token is not None and token[0] == "duration":
            self.i += 1
            selector.range_s = parse_duration(token[1].strip("[] "))
        return selector


def parse_promql(text: str) -> Expr:
    return _Parser(text).parse()


@dataclass
class PrometheusFaults:
    status: int | None = None  # answer every query with this HTTP status ("injected")
    timeout: bool = False  # 503 {"errorType": "timeout"} as Prometheus times out a query
    latency_s: float = 0.0
    body: str | None = None  # answer every query 200 with this as its JSON (garbage, say)


@dataclass
class PrometheusSimulator(SimulatorServer):
    series: list[SimSeries] = field(default_factory=list)
    tenant: str | None = None
    faults: PrometheusFaults = field(default_factory=PrometheusFaults)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # path, params

    def __post_init__(self) -> None:
        super().__init__()

    def add(self, labels: dict[str, str], samples: list[tuple[float, float]]) -> None:
        self.series.append(SimSeries(dict(labels), sorted(samples)))

    def routes(self, app: web.Application) -> None:
        app.middlewares.append(self._middleware)
        for method in ("GET", "POST"):
            app.router.add_route(method, "/api/v1/query", self._query)
            app.router.add_route(method, "/api/v1/query_range", self._query_range)
            app.router.add_route(method, "/api/v1/labels", self._labels)
            app.router.add_route(method, "/api/v1/series", self._series)
        app.router.add_get("/api/v1/label/{name}/values", self._label_values)
        app.router.add_get("/-/ready", self._ready)

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        multi = await _params(request)
        self.requests.append((request.path, {k: multi[k] for k in multi}))
        if self.tenant is not None and request.headers.get("X-Scope-OrgID") != self.tenant:
            return web.Response(status=401, text="no org id\n")
        if self.faults.latency_s:
            await asyncio.sleep(self.faults.latency_s)
        if self.faults.status is not None:
            return web.Response(status=self.faults.status, text="injected failure")
        if self.faults.timeout and request.path.startswith("/api/v1/query"):
            return _error(503, "timeout", "query timed out in expression evaluation")
        if self.faults.body is not None:
            return web.Response(text=self.faults.body, content_type="application/json")
        response: web.StreamResponse = await handler(request)
        return response

    async def _ready(self, request: web.Request) -> web.Response:
        return web.Response(text="Prometheus Server is Ready.\n")

    # --- evaluation --------------------------------------------------------------------
    def _select(
        self, selector: Selector, at: float
    ) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        window = selector.range_s if selector.range_s is not None else LOOKBACK_S
        found = []
        for series in self.series:
            if selector.matches(series.labels):
                points = [(t, v) for t, v in series.samples if at - window < t <= at]
                if points:
                    found.append((series.labels, points))
        return found

    def instant(self, expr: Expr, at: float) -> list[tuple[dict[str, str], float]]:
        if isinstance(expr, Selector):
            return [(labels, points[-1][1]) for labels, points in self._select(expr, at)]
        if isinstance(expr, Call):
            out = []
            for labels, points in self._select(expr.arg, at):
                value = _apply(expr.function, points, expr.arg.range_s or 0)
                if value is not None:
                    out.append(({k: v for k, v in labels.items() if k != "__name__"}, value))
            seen: set[tuple[tuple[str, str], ...]] = set()
            for labels, _ in out:
                key = tuple(sorted(labels.items()))
                if key in seen:
                    raise ExecutionError("vector cannot contain metrics with the same labelset")
                seen.add(key)
            return out
        groups: dict[tuple[tuple[str, str], ...], list[float]] = {}
        for labels, value in self.instant(expr.inner, at):
            if expr.by is not None:
                kept = {k: labels[k] for k in expr.by if k in labels}
            else:
                dropped = {"__name__", *(expr.without or [])}
                kept = {k: v for k, v in labels.items() if k not in dropped}
            groups.setdefault(tuple(sorted(kept.items())), []).append(value)
        return [(dict(key), _reduce(expr.op, values)) for key, values in groups.items()]

    # --- handlers ----------------------------------------------------------------------
    def _parsed(self, params: MultiDict[str]) -> Expr | web.Response:
        try:
            return parse_promql(params.get("query", ""))
        except (PromQLError, ValueError) as exc:
            return _error(400, "bad_data", f'invalid parameter "query": {exc}')

    async def _query(self, request: web.Request) -> web.Response:
        params = await _params(request)
        expr = self._parsed(params)
        if isinstance(expr, web.Response):
            return expr
        try:
            at = parse_time(params["time"]) if "time" in params else time.time()
        except ValueError as exc:
            return _error(400, "bad_data", f'invalid parameter "time": {exc}')
        if isinstance(expr, Selector) and expr.range_s is not None:
            matrix = [
                {"metric": labels, "values": [[t, format_value(v)] for t, v in points]}
                for labels, points in self._select(expr, at)
            ]
            return _success("matrix", matrix)
        try:
            vector = self.instant(expr, at)
        except ExecutionError as exc:
            return _error(422, "execution", str(exc))
        result = [{"metric": labels, "value": [at, format_value(v)]} for labels, v in vector]
        return _success("vector", result)

    async def _query_range(self, request: web.Request) -> web.Response:
        params = await _params(request)
        expr = self._parsed(params)
        if isinstance(expr, web.Response):
            return expr
        bounds: dict[str, float] = {}
        for name, parse in (("start", parse_time), ("end", parse_time), ("step", parse_duration)):
            try:
                bounds[name] = parse(params.get(name, ""))
            except ValueError as exc:
                return _error(400, "bad_data", f'invalid parameter "{name}": {exc}')
        start, end, step = bounds["start"], bounds["end"], bounds["step"]
        if end < start:
            return _error(400, "bad_data", "end timestamp must not be before start time")
        if step <= 0:
            return _error(
                400,
                "bad_data",
                "zero or negative query resolution step widths are not accepted. "
                "Try a positive integer",
            )
        if (end - start) / step > MAX_POINTS:
            return _error(
                400,
                "bad_data",
                "exceeded maximum resolution of 11,000 points per timeseries. "
                "Try decreasing the query resolution (?step=XX)",
            )
        if isinstance(expr, Selector) and expr.range_s is not None:
            return _error(
                400,
                "bad_data",
                'invalid parameter "query": invalid expression type "range vector" for range '
                "query, must be Scalar or instant Vector",
            )
        series: dict[tuple[tuple[str, str], ...], list[list[Any]]] = {}
        at = start
        try:
            while at <= end:
                for labels, value in self.instant(expr, at):
                    series.setdefault(tuple(sorted(labels.items())), []).append(
                        [at, format_value(value)]
                    )
                at += step
        except ExecutionError as exc:
            return _error(422, "execution", str(exc))
        return _success(
            "matrix", [{"metric": dict(key), "values": values} for key, values in series.items()]
        )

    def _matched(self, params: MultiDict[str]) -> list[SimSeries] | web.Response:
        matches = params.getall("match[]", [])
        if not matches:
            return self.series
        chosen = []
        for raw in matches:
            try:
                expr = parse_promql(raw)
            except (PromQLError, ValueError) as exc:
                return _error(400, "bad_data", f'invalid parameter "match[]": {exc}')
            if not isinstance(expr, Selector):
                return _error(400, "bad_data", 'invalid parameter "match[]": not a selector')
            chosen += [s for s in self.series if expr.matches(s.labels) and s not in chosen]
        return chosen

    async def _labels(self, request: web.Request) -> web.Response:
        chosen = self._matched(await _params(request))
        if isinstance(chosen, web.Response):
            return chosen
        return _success_data(sorted({k for s in chosen for k in s.labels}))

    async def _label_values(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", name):
            return _error(400, "bad_data", f'invalid label name: "{name}"')
        chosen = self._matched(await _params(request))
        if isinstance(chosen, web.Response):
            return chosen
        return _success_data(sorted({s.labels[name] for s in chosen if name in s.labels}))

    async def _series(self, request: web.Request) -> web.Response:
        if not (await _params(request)).getall("match[]", []):
            return _error(400, "bad_data", "no match[] parameter provided")
        chosen = self._matched(await _params(request))
        if isinstance(chosen, web.Response):
            return chosen
        return _success_data([s.labels for s in chosen])


async def _params(request: web.Request) -> MultiDict[str]:
    """The query string's parameters and, for a POST, the form's (the API takes both)."""
    multi: MultiDict[str] = MultiDict(request.query)
    if request.method == "POST":
        for key, value in (await request.post()).items():
            multi.add(key, str(value))
    return multi


def _reduce(op: str, values: list[float]) -> float:
    if op == "sum":
        return sum(values)
    if op == "min":
        return min(values)
    if op == "max":
        return max(values)
    if op == "avg":
        return sum(values) / len(values)
    return float(len(values))  # count


def _apply(function: str, points: list[tuple[float, float]], range_s: float) -> float | None:
    if function.endswith("_over_time"):
        return _reduce(function.removesuffix("_over_time"), [v for _, v in points])
    if len(points) < 2:
        return None
    grown = 0.0
    for (_, before), (_, after) in itertools.pairwise(points):
        grown += after - before if after >= before else after  # a counter reset
    per_second = grown / (points[-1][0] - points[0][0])
    return per_second if function == "rate" else per_second * range_s


def _success(result_type: str, result: list[dict[str, Any]]) -> web.Response:
    return web.json_response(
        {"status": "success", "data": {"resultType": result_type, "result": result}}
    )


def _success_data(data: Any) -> web.Response:
    return web.json_response({"status": "success", "data": data})


def _error(status: int, error_type: str, message: str) -> web.Response:
    return web.json_response(
        {"status": "error", "errorType": error_type, "error": message}, status=status
    )
