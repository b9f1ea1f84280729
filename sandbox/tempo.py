"""A Grafana Tempo simulator: trace by ID (v1 and v2), TraceQL search (a subset), faults.

Behaviour copied from real Tempo:
- `GET /api/traces/<id>`: 404 with an empty body when missing, 400 when the id is not hex.
- `GET /api/v2/traces/<id>`: 200 with an empty trace when missing.
- `GET /api/search`: leading zeros are stripped from `traceID` in results; without
  `start`/`end` only recent data (the last hour) is searched; a trace whose root span
  (the one without a parent) is missing has `rootServiceName` "<root span not yet received>".
- With `tenant` set, every request must carry `X-Scope-OrgID: <tenant>` (401 otherwise).

TraceQL subset: `{ cond && cond ... }` where cond is `field op value`; fields `name`,
`status`, `duration`, `span.<attr>`, `resource.<attr>` (e.g. `resource.service.name`,
`resource.service.version`, `resource.k8s.pod.name`) and `.<attr>` (span, then resource);
ops `= != > >= < <= =~`; values are strings, numbers, durations (`500ms`, `1.5s`) or
`error|ok|unset`. Anything else is answered 400.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from sandbox.server import SimulatorServer
from sandbox.traces import SimSpan, SimTrace, otlp_attributes, resource_spans

_HEX = re.compile(r"^[0-9a-fA-F]{1,32}$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)$")
_UNITS_NS = {"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}
_COND = re.compile(
    r"^\s*(?P<field>[A-Za-z_.][\w.]*)\s*(?P<op>=~|!=|>=|<=|=|>|<)\s*"
    r'(?P<value>"(?:[^"\\]|\\.)*"|[\w.µ]+)\s*$'
)
RECENT_WINDOW_S = 3600
MAX_SEARCH_WINDOW_S = 168 * 3600  # Tempo's query_frontend.search.max_duration default
ROOT_NOT_RECEIVED = "<root span not yet received>"  # Tempo's rootServiceName, no rootTraceName


class TraceQLError(ValueError):
    pass


@dataclass
class TempoFaults:
    """Injectable misbehaviour; change fields while the simulator runs."""

    latency_s: float = 0.0
    # answer every request 200 with an HTML page, as a sign-in proxy in front of Tempo does
    html_page: bool = False
    status: int | None = None  # answer every request with this HTTP status (e.g. 503)
    hang: bool = False  # never answer (until the simulator stops)
    # answer every request 200 with this JSON, as a gateway or a Tempo of another shape might
    document: dict[str, Any] | None = None


@dataclass
class TempoRequest:
    method: str
    path: str
    query: dict[str, str]
    tenant: str | None


@dataclass
class TempoSimulator(SimulatorServer):
    traces: Iterable[SimTrace] = ()
    tenant: str | None = None
    api_v2: bool = True  # False: a Tempo older than 2.5, without /api/v2
    faults: TempoFaults = field(default_factory=TempoFaults)
    requests: list[TempoRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()
        self._traces: dict[str, SimTrace] = {t.trace_id: t for t in self.traces}
        self._arrived = asyncio.Condition()

    def add(self, trace: SimTrace) -> None:
        self._traces[trace.trace_id] = trace

    def routes(self, app: web.Application) -> None:
        app.middlewares.append(self._middleware)
        app.router.add_get("/ready", self._ready)
        app.router.add_get("/api/traces/{trace_id}", self._trace_v1)
        if self.api_v2:
            app.router.add_get("/api/v2/traces/{trace_id}", self._trace_v2)
        app.router.add_get("/api/search", self._search)
        app.router.add_get("/api/v2/search/tag/{tag}/values", self._tag_values)

    def requests_for(self, path_prefix: str) -> list[TempoRequest]:
        return [r for r in self.requests if r.path.startswith(path_prefix)]

    async def wait_for_request(
        self, path_prefix: str = "/", timeout_s: float = 5.0, count: int = 1
    ) -> None:
        """Return once `count` requests under `path_prefix` have arrived."""
        async with asyncio.timeout(timeout_s), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests_for(path_prefix)) >= count)

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        tenant = request.headers.get("X-Scope-OrgID")
        self.requests.append(
            TempoRequest(request.method, request.path, dict(request.query), tenant)
        )
        async with self._arrived:
            self._arrived.notify_all()
        if self.faults.hang:
            await self.stopping.wait()
            return web.Response(status=503, text="simulator stopping")
        if self.faults.latency_s:
            await asyncio.sleep(self.faults.latency_s)
        if self.faults.status is not None:
            return web.Response(status=self.faults.status, text="injected failure")
        if self.faults.document is not None:
            return web.json_response(self.faults.document)
        if self.faults.html_page:
            page = "<!DOCTYPE html><html><body><form>Sign in</form></body></html>"
            return web.Response(text=page, content_type="text/html")
        if self.tenant is not None and tenant != self.tenant:
            return web.Response(status=401, text="no org id")
        response: web.StreamResponse = await handler(request)
        return response

    async def _ready(self, request: web.Request) -> web.Response:
        return web.Response(text="ready")

    def _lookup(self, raw_id: str) -> SimTrace | None:
        if not _HEX.match(raw_id):
            raise web.HTTPBadRequest(text=f"invalid trace id {raw_id!r}")
        return self._traces.get(raw_id.lower().rjust(32, "0"))

    async def _trace_v1(self, request: web.Request) -> web.Response:
        trace = self._lookup(request.match_info["trace_id"])
        if trace is None:
            return web.Response(status=404)
        return web.json_response({"batches": resource_spans(trace)})

    async def _trace_v2(self, request: web.Request) -> web.Response:
        trace = self._lookup(request.match_info["trace_id"])
        if trace is None:
            return web.json_response({"trace": {}})
        return web.json_response({"trace": {"resourceSpans": resource_spans(trace)}})

    async def _tag_values(self, request: web.Request) -> web.Response:
        """Tempo's v2 tag values: a scoped tag (`resource.service.name`), values with types;
        an unscoped or unknown scope is a 400, as Tempo answers it."""
        scope, _, name = request.match_info["tag"].partition(".")
        if scope not in ("resource", "span", "intrinsic") or not name:
            return web.Response(status=400, text=f"invalid tag {request.match_info['tag']!r}")
        values: set[str] = set()
        for trace in self._traces.values():
            for span in trace.spans:
                attrs = span.resource.attributes if scope == "resource" else span.attributes
                if name in attrs:
                    values.add(str(attrs[name]))
        return web.json_response(
            {"tagValues": [{"type": "string", "value": v} for v in sorted(values)]}
        )

    async def _search(self, request: web.Request) -> web.Response:
        try:
            conditions = parse_traceql(request.query.get("q", "{}"))
            limit = int(request.query.get("limit", "20"))
        except (TraceQLError, ValueError) as exc:
            return web.Response(status=400, text=f"invalid TraceQL query: {exc}")
        now = int(time.time())
        bounds = {"start": str(now - RECENT_WINDOW_S), "end": str(now)}
        for name in bounds:
            raw = request.query.get(name, bounds[name])
            if not raw.isdigit():  # whole seconds, as Tempo parses them (strconv.ParseInt)
                return web.Response(
                    status=400, text=f'invalid {name}: strconv.ParseInt: parsing "{raw}"'
                )
            bounds[name] = raw
        start, end = int(bounds["start"]), int(bounds["end"])
        if end - start > MAX_SEARCH_WINDOW_S:
            return web.Response(
                status=400,
                text=f"range specified by start and end exceeds 168h0m0s. "
                f"received start={start} end={end}",
            )
        found = []
        for trace in sorted(self._traces.values(), key=lambda t: t.start_ns, reverse=True):
            if not start <= trace.start_ns / 1e9 <= end:
                continue
            matched = [s for s in trace.spans if all(c(s) for c in conditions)]
            if matched:
                found.append(_search_result(trace, matched))
            if len(found) >= limit:
                break
        return web.json_response(
            {"traces": found, "metrics": {"inspectedTraces": len(self._traces)}}
        )


def _search_result(trace: SimTrace, matched: list[SimSpan]) -> dict[str, Any]:
    spans = [
        {
            "spanID": s.span_id,
            "startTimeUnixNano": str(s.start_ns),
            "durationNanos": str(s.duration_ns),
            "attributes": otlp_attributes({"service.name": s.service}),
        }
        for s in matched[:3]
    ]
    spanset = {"spans": spans, "matched": len(matched)}
    result: dict[str, Any] = {
        "traceID": trace.trace_id.lstrip("0") or "0",  # real Tempo strips leading zeros
        "rootServiceName": ROOT_NOT_RECEIVED,
        "startTimeUnixNano": str(trace.start_ns),
        "durationMs": trace.duration_ms,
        "spanSet": spanset,
        "spanSets": [spanset],
    }
    if trace.root is not None:
        result.update(rootServiceName=trace.root.service, rootTraceName=trace.root.name)
    return result


SpanCondition = Callable[[SimSpan], bool]


def parse_traceql(query: str) -> list[SpanCondition]:
    """Parse the supported subset into span predicates that must all hold."""
    body = query.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise TraceQLError("expected a spanset filter in braces, e.g. { status = error }")
    body = body[1:-1].strip()
    if not body:
        return []
    if "||" in body or "|" in body.replace("||", ""):
        raise TraceQLError("only && between conditions is supported by the simulator")
    return [_condition(part) for part in body.split("&&")]


def _condition(text: str) -> SpanCondition:
    match = _COND.match(text)
    if not match:
        raise TraceQLError(f"cannot parse condition {text.strip()!r}")
    name, op, raw = match["field"], match["op"], match["value"]
    if name == "name":
        return _compare(lambda s: s.name, op, _string(raw))
    if name == "status":
        if raw not in ("error", "ok", "unset") or op not in ("=", "!="):
            raise TraceQLError("status takes = or != with error, ok or unset")
        return _compare(lambda s: s.status, op, raw)
    if name == "duration":
        return _compare(lambda s: s.duration_ns, op, _duration_ns(raw))
    scope, _, key = name.partition(".")
    if scope not in ("span", "resource", "") or not key:
        raise TraceQLError(f"unsupported field {name!r}")
    value: str | float = _string(raw) if raw.startswith('"') else float(raw)
    return _compare(lambda s: _attribute(s, scope, key), op, value)


def _attribute(span: SimSpan, scope: str, key: str) -> str | int | float | bool | None:
    """`span.x` reads the span, `resource.x` the resource, `.x` the span, then the resource."""
    if scope != "resource" and key in span.attributes:
        return span.attributes[key]
    return span.resource.attributes.get(key) if scope != "span" else None


def _string(raw: str) -> str:
    if not raw.startswith('"'):
        raise TraceQLError(f"expected a quoted string, got {raw}")
    return raw[1:-1].replace('\\"', '"')


def _duration_ns(raw: str) -> float:
    match = _DURATION.match(raw)
    if not match:
        raise TraceQLError(f"expected a duration like 500ms, got {raw}")
    return float(match[1]) * _UNITS_NS[match[2]]


def _compare(get: Callable[[SimSpan], Any], op: str, want: Any) -> SpanCondition:
    def check(span: SimSpan) -> bool:
        have = get(span)
        if have is None:
            return False
        if op == "=~":
            return re.fullmatch(str(want), str(have)) is not None
        if op in ("=", "!="):
            equal: bool = have == want or (isinstance(want, float) and _num(have) == want)
            return equal if op == "=" else not equal
        number = _num(have)
        if number is None:
            return False
        comparisons: dict[str, bool] = {
            ">": number > want,
            ">=": number >= want,
            "<": number < want,
            "<=": number <= want,
        }
        return comparisons[op]

    return check


def _num(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
