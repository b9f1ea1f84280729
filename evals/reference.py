"""The reference investigator: a fixed policy that uses the tools the way an SRE would.

It stands in for the model in offline evals, answering through the Gemini simulator, so its
requests run the same graph, tools and guards a Slack turn runs. It reads only what the
tools returned (never the scenario's truth, never a scenario's own strings): its rules are
about where failures start, what changed before them and what kind of error they report, so
it can be wrong, and where it is, its reasoning (`Conclusion.why`) says what it went by.

The policy, in the order an on-call engineer works:
1. Search the alerted service's errors over the alert's window; read up to three traces.
   No errors at all, only client errors (4xx), or errors as frequent before the alert as
   after it: nothing is wrong in the cluster — say so and propose nothing.
2. Find where the failures start (the span marked [failure starts here]), who called it,
   and what it called (`peer`), or which callee a caller could not reach.
3. What changed? The rollout history of the suspect, the failing service and, when it is
   hammered by repeats, its caller: a revision created within an hour before the alert.
4. Otherwise what kind of error it is (ERROR_KINDS: DNS, certificate, credentials, rate
   limit, saturation, memory, disk, connection, timeout, a feature flag); for a workload that
   cannot be reached or runs out of memory: its pods, their memory, its logs, and the events
   of pods that are not ready; for a saturated one, its autoscaler (when Prometheus has it);
   for failures on one or two nodes' pods, whether other nodes' pods fail too.
5. Answer with the cause, the chain, an example trace and what was not checked; propose a
   rollback for a change that lines up, a scale-out for saturation with room to grow.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sandbox.gemini import GeminiRequest, Reply
from sandbox.plays import satisfied, verdict

TRACES_READ = 3
CHANGE_WINDOW = timedelta(minutes=60)  # a deploy this long before the alert lines up

_ALERT = re.compile(
    r"FIRING \S+ \([^)]*\): (?P<labels>[^;\n]*)(?:; started (?P<at>[\d\- :]+) UTC)?"
)
_LABEL = re.compile(r"(\w+)=([\w.\-]+)")
_HIT = re.compile(r"^- ([0-9a-f]{1,32})  ", re.MULTILINE)
_ERROR = re.compile(
    r"^- (?P<service>\S+) (?P<name>.+?) \d+ ms(?: peer=\"(?P<peer>[^\"]*)\")?"
    r"(?: http=\"(?P<http>[^\"]*)\")?"
    r"(?: status=\"(?P<status>(?:[^\"\\]|\\.)*)\")?(?: on (?P<on>[^\n]*?))?"
    r"(?: called by (?P<caller>\S+))?(?P<origin> \[failure starts here\])?$",
    re.MULTILINE,
)
_ATTR = re.compile(r"([\w.]+)=\"([^\"]*)\"")
_WORKLOAD = re.compile(
    r"^- (?P<service>\S+) (?P<attrs>.*?): \d+ spans?, (?P<errors>\d+) errors?$", re.MULTILINE
)
_HISTORY_HEAD = re.compile(
    r"^(?P<ns>[\w-]+)/(?P<dep>[\w.-]+): (?P<ready>\d+)/(?P<replicas>\d+) replicas ready.*?"
    r"current revision (?P<revision>\d+) \((?P<images>[^)]*)\)",
    re.MULTILINE,
)
_REVISION = re.compile(
    r"^- (?P<revision>\d+): (?P<images>\S+)(?: — (?P<cause>.*?))?(?: — created (?P<created>\S+))?"
    r"(?P<current> \(current\))?$",
    re.MULTILINE,
)
_STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)"
_SEARCHED = re.compile(rf"between (?P<start>{_STAMP}) to (?P<end>{_STAMP})")
_HIT_AT = re.compile(rf"^- (?P<id>[0-9a-f]{{1,32}})  .*?  started (?P<at>{_STAMP})  ", re.MULTILINE)
# A caller that could not reach what it called: "upstream <name>: <how>" (proxies, clients).
_UNREACHED = re.compile(r"upstream (?P<callee>[\w.-]+):? (?P<how>[^\n]*)")
_FLAG = re.compile(
    r"\bflag[s]? [`'\"]?(?P<flag>[\w.-]+)[`'\"]?\s*(?:=|is |turned )\s*(?:on|true|enabled)",
    re.IGNORECASE,
)
# What kind of error a status message reports, most specific first; the first that matches.
ERROR_KINDS: list[tuple[str, re.Pattern[str]]] = [
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in [
        ("dns", r"\blookup \S+ on \S+:53\b|no such host|NXDOMAIN|name resolution|SERVFAIL"),
        ("certificate", r"x509|certificate|\btls: |handshake fail"),
        (
            "credentials",
            r"\b(?:401|403)\b|unauthori[sz]ed|forbidden|authentication failed|access denied|"
            r"invalid (?:api[ -]?)?key|invalid token|token (?:expired|revoked)|permission denied",
        ),
        ("flag", _FLAG.pattern),
        (
            "saturation",
            r"in flight|concurrency limit|overloaded|no more connections|too many connections|"
            r"pool (?:exhausted|timeout)|queue (?:is )?full|capacity",
        ),
        ("rate limit", r"\b429\b|rate[ -]?limit|too many requests|quota"),
        ("memory", r"OutOfMemory|OOMKilled|heap space|out of memory|GC overhead"),
        ("disk", r"no space left|disk (?:is )?full|ENOSPC|read-only file system"),
        (
            "connection",
            r"connection (?:refused|reset|termination|timed out|closed)|connect error|"
            r"no route to host|broken pipe|unreachable|\breset\b",
        ),
        ("timeout", r"timed? ?out|deadline exceeded|timeout"),
    ]
]
# What the pods' events or states say about where they run.
_NODE_TROUBLE = re.compile(
    r"NodeNotReady|Node is not ready|Evicted|node was low on|NodeHasDiskPressure|"
    r"NodeHasMemoryPressure|node\.kubernetes\.io/(?:not-ready|unreachable)",
    re.IGNORECASE,
)
_POD_LINE = re.compile(
    r"^- (?P<pod>\S+): (?P<phase>\w+), (?P<ready>\d+)/(?P<of>\d+) ready, \d+ restarts, "
    r"node (?P<node>[^\s,]+)",
    re.MULTILINE,
)
_EVENT_POD = re.compile(r"^- Warning (?P<reason>\S+) pod/(?P<pod>\S+) ", re.MULTILINE)
_SERIES = re.compile(r"^- (?P<labels>[\w:]*\{[^}]*\}): (?P<value>[\d.]+)", re.MULTILINE)
CLIENT_ERROR = re.compile(r"^4(?!29)\d\d$")  # a client's mistake, not a failure (429 aside)


def error_kind(status: str) -> str | None:
    return next((kind for kind, pattern in ERROR_KINDS if pattern.search(status)), None)


@dataclass
class ErrorSpan:
    service: str
    name: str
    peer: str | None
    http: str | None
    status: str
    pod: str | None
    caller: str | None
    origin: bool
    trace_id: str


@dataclass
class Rollout:
    namespace: str
    deployment: str
    replicas: int
    revision: int
    version: str
    created: datetime | None
    cause: str


@dataclass
class Seen:
    """What the tools have returned so far in this turn."""

    alert_service: str | None = None
    namespace: str = "default"
    alert_start: datetime | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    hits: list[str] = field(default_factory=list)
    hit_times: dict[str, datetime] = field(default_factory=dict)  # the first search's hits
    searched: tuple[datetime, datetime] | None = None  # the first search's window
    search_limit: int = 0
    baseline: int | None = None  # errors found in the BASELINE before the first window
    read: list[str] = field(default_factory=list)
    errors: list[ErrorSpan] = field(default_factory=list)
    nodes: dict[str, str] = field(default_factory=dict)  # pod -> node
    namespaces: dict[str, str] = field(default_factory=dict)  # service -> its namespace
    rollouts: dict[str, Rollout | None] = field(default_factory=dict)  # None: no Deployment
    node_checks: dict[str, bool] = field(default_factory=dict)  # service -> errors elsewhere
    proposed: str | None = None  # the tool's answer to our proposal
    drafted: bool = False
    tools: set[str] = field(default_factory=set)  # the tools this turn offers
    read_pods: dict[str, str] = field(default_factory=dict)  # deployment -> pods summary
    read_memory: dict[str, str] = field(default_factory=dict)  # deployment -> query result
    read_logs: dict[str, str] = field(default_factory=dict)  # deployment -> logs summary
    read_events: dict[str, str] = field(default_factory=dict)  # deployment -> events summary
    read_scaling: dict[str, str] = field(default_factory=dict)  # deployment -> HPA series

    @property
    def budget_left(self) -> int:
        return REFERENCE_BUDGET - len(self.calls)


REFERENCE_BUDGET = 8  # the default TOOL_BUDGET; the graph stops us there in any case


def texts(value: Any) -> list[str]:
    """Every string in a function response, however it nests them."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts(v)]
    return []


def read_request(request: GeminiRequest) -> Seen:
    seen = Seen()
    seen.tools = {
        d.get("name", "")
        for tool in request.body.get("tools") or []
        for d in tool.get("functionDeclarations") or tool.get("function_declarations") or []
    }
    pending: list[tuple[str, dict[str, Any]]] = []
    for content in request.contents:
        for part in content.get("parts", []):
            if "text" in part and content.get("role") == "user":
                _read_context(seen, part["text"])
            elif "text" in part and part["text"].strip():
                seen.drafted = True
            elif "functionCall" in part:
                call = part["functionCall"]
                seen.calls.append((call["name"], call.get("args", {})))
                pending.append(seen.calls[-1])
            elif "functionResponse" in part:
                name = part["functionResponse"].get("name", "")
                text = "\n".join(texts(part["functionResponse"].get("response", {})))
                args = next((a for n, a in pending if n == name), {})
                pending = [p for p in pending if p[1] is not args]
                _read_result(seen, name, args, text)
    return seen


def _read_context(seen: Seen, text: str) -> None:
    alert = _ALERT.search(text)
    if alert is None or seen.alert_service:
        return
    labels = dict(_LABEL.findall(alert["labels"]))
    seen.alert_service = labels.get("service")
    seen.namespace = labels.get("namespace", seen.namespace)
    if alert["at"]:
        seen.alert_start = datetime.strptime(alert["at"].strip(), "%Y-%m-%d %H:%M:%S").replace(
            tzinfo=UTC
        )


def _read_result(seen: Seen, name: str, args: dict[str, Any], text: str) -> None:
    if name == "query_tempo_traces":
        found = _HIT.findall(text)
        if "k8s.node.name" in str(args.get("traceql", "")):
            service = _value_of(str(args.get("traceql", "")), "resource.service.name", " = ")
            seen.node_checks[service] = bool(found)
            return
        if int(args.get("until_minutes_ago") or 0) > 0:  # the baseline search
            seen.baseline = len(found)
            return
        if seen.searched is None and (window := _SEARCHED.search(text)):
            seen.searched = (_utc(window["start"]), _utc(window["end"]))
            seen.search_limit = int(args.get("limit", 20))
            seen.hit_times = {m["id"]: _utc(m["at"]) for m in _HIT_AT.finditer(text)}
        seen.hits += [h for h in found if h not in seen.hits]
    elif name == "get_trace":
        trace_id = str(args.get("trace_id", ""))
        seen.read.append(trace_id)
        failed = text.partition("\nerror spans")[2].partition("\nworkloads")[0]
        for m in _ERROR.finditer(failed):
            attrs = dict(_ATTR.findall(m["on"] or ""))
            seen.errors.append(
                ErrorSpan(
                    m["service"],
                    m["name"],
                    m["peer"],
                    m["http"],
                    json.loads(f'"{m["status"]}"') if m["status"] else "",
                    attrs.get("k8s.pod.name"),
                    m["caller"],
                    bool(m["origin"]),
                    trace_id,
                )
            )
        for w in _WORKLOAD.finditer(text):
            attrs = dict(_ATTR.findall(w["attrs"]))
            if "k8s.pod.name" in attrs and "k8s.node.name" in attrs:
                seen.nodes[attrs["k8s.pod.name"]] = attrs["k8s.node.name"]
            if "k8s.namespace.name" in attrs:
                seen.namespaces[w["service"]] = attrs["k8s.namespace.name"]
    elif name == "get_rollout_history":
        seen.rollouts[str(args.get("deployment", ""))] = _rollout(text)
    elif name == "propose_action":
        seen.proposed = text
    elif name == "get_workload_pods":
        seen.read_pods[str(args.get("deployment", ""))] = text
    elif name == "get_kubernetes_events":
        seen.read_events[str(args.get("deployment", ""))] = text
    elif name == "query_prometheus":
        promql = str(args.get("promql", ""))
        if "horizontalpodautoscaler" in promql:
            seen.read_scaling[_value_of(promql, "horizontalpodautoscaler")] = text
        else:
            seen.read_memory[_value_of(promql, "container")] = text
    elif name == "query_loki_logs":
        seen.read_logs[_value_of(str(args.get("logql", "")), "app")] = text


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _value_of(query: str, name: str, equals: str = "=") -> str:
    """The quoted value `name` is matched to in a query this policy wrote ("" without one)."""
    found = re.search(rf'{re.escape(name)}{re.escape(equals)}"([^"]+)"', query)
    return found[1] if found else ""


def _rollout(text: str) -> Rollout | None:
    head = _HISTORY_HEAD.search(text)
    if head is None:
        return None
    current = next((r for r in _REVISION.finditer(text) if r["current"]), None)
    created = None
    if current is not None and current["created"]:
        created = datetime.fromisoformat(current["created"].replace("Z", "+00:00"))
    return Rollout(
        head["ns"],
        head["dep"],
        int(head["replicas"]),
        int(head["revision"]),
        head["images"].split(",")[0].rsplit(":", 1)[-1],
        created,
        (current["cause"] or "") if current is not None else "",
    )


@dataclass(frozen=True)
class Conclusion:
    """The policy's conclusion."""

    cause: str  # the cause, as the answer's first sentence names it: nothing else
    detail: str  # a sentence on what shows it
    chain: list[str]
    evidence: str  # the error text that shows it
    trace_id: str | None
    action: dict[str, Any] | None = None
    confidence: str = "high"
    why: str = ""  # what the conclusion went by (for the report, not the answer)
    nothing_wrong: bool = False


class ReferenceInvestigator:
    """The agent's replies, one per request; the drafts it wrote are kept, and the
    reasoning of the last conclusion."""

    def __init__(self) -> None:
        self.drafts: list[str] = []
        self.why = ""

    def __call__(self, request: GeminiRequest) -> Reply:
        seen = read_request(request)
        forced = request.body.get("toolConfig", {}).get("functionCallingConfig", {}).get("mode")
        if forced != "NONE" and not seen.drafted:
            step = next_step(seen)
            if step is not None:
                name, args = step
                return _sized(Reply.call(name, **args))
        conclusion = conclude(seen)
        answer = compose(seen, conclusion)
        self.drafts.append(answer)
        self.why = conclusion.why
        return _sized(Reply.text(answer))


def _sized(reply: Reply) -> Reply:
    """The reply reporting its own size as output tokens (about 4 characters a token, as
    the simulator counts the prompt)."""
    return dataclasses.replace(reply, output_tokens=-(-len(json.dumps(reply.parts)) // 4))


def _origins(seen: Seen) -> list[ErrorSpan]:
    """Where failures start, client errors (4xx but 429) left out: a client's mistake."""
    return [e for e in seen.errors if e.origin and not CLIENT_ERROR.match(e.http or "")]


def _unreached(e: ErrorSpan) -> str | None:
    """The callee a caller could not reach (its connection failed, or timed out)."""
    found = _UNREACHED.search(e.status)
    if found and error_kind(found["how"]) in ("connection", "timeout"):
        return found["callee"]
    return None


def _suspects(seen: Seen) -> list[str]:
    """Deployments worth a look at their rollout history, most suspect first."""
    origins = _origins(seen)
    ranked: list[str] = [c for e in origins if (c := _unreached(e))]
    # A caller that could not reach its callee is its victim, not a suspect.
    ranked += [s for s, _ in Counter(e.service for e in origins if not _unreached(e)).most_common()]
    if _hammered(seen):
        ranked += [e.caller for e in origins if e.caller]
    return list(dict.fromkeys(ranked))[:3]


def _hammered(seen: Seen) -> bool:
    """The failing service is called over and over within one request (retries)."""
    per_trace = Counter((e.trace_id, e.service) for e in _origins(seen))
    return any(n >= 3 for n in per_trace.values())


def _failing_nodes(seen: Seen) -> tuple[str, list[str]] | None:
    """(service, nodes) when the failures start on two or more pods of one service, all on
    at most two nodes: worth checking whether other nodes' pods fail too."""
    origins = _origins(seen)
    if not origins:
        return None
    service = Counter(e.service for e in origins).most_common(1)[0][0]
    pods = {e.pod for e in origins if e.service == service and e.pod}
    nodes = sorted({seen.nodes[p] for p in pods if p in seen.nodes})
    if len(pods) >= 2 and 1 <= len(nodes) <= 2:
        return service, nodes
    return None


def _background(seen: Seen) -> str | None:
    """Why the errors the search found are the background, not an incident: none at all,
    only client errors, or as frequent in the BASELINE before the window as in it. None:
    they are not (or not known yet)."""
    if not seen.hits:
        return "no error traces of the alerted service in the window"
    if seen.read and not _origins(seen) and any(e.origin for e in seen.errors):
        return "the only failures are client errors (4xx)"
    if seen.baseline is None or seen.searched is None:
        return None
    start, end = seen.searched
    window_rate = len(seen.hit_times) / max((end - start).total_seconds(), 60)
    base_rate = seen.baseline / BASELINE.total_seconds()
    if seen.baseline >= 2 and base_rate >= 0.5 * window_rate:
        minutes = int(BASELINE.total_seconds() // 60)
        return (
            f"as many errors in the {minutes} minutes before the window ({seen.baseline}) "
            f"as in it ({len(seen.hit_times)}, over {int((end - start).total_seconds() // 60)} "
            "minutes): the background rate"
        )
    return None


def _baseline_step(seen: Seen) -> tuple[str, dict[str, Any]] | None:
    """Were these errors there before? The same search over the BASELINE before the first
    window, when that search found errors without reaching its limit (a rate to compare)."""
    if seen.baseline is not None or seen.searched is None or not seen.hits:
        return None
    if len(seen.hit_times) >= seen.search_limit or seen.budget_left <= 1:
        return None
    if seen.alert_start is not None and all(
        at >= seen.alert_start - ONSET for at in seen.hit_times.values()
    ):
        return None  # every error began with the alert: nothing to compare
    start, end = seen.searched
    until = -(-int((end - start).total_seconds()) // 60)
    since = until + int(BASELINE.total_seconds() // 60)
    traceql = next(str(a.get("traceql")) for n, a in seen.calls if n == "query_tempo_traces")
    return "query_tempo_traces", {
        "traceql": traceql,
        "limit": seen.search_limit,
        "since_minutes_ago": since,
        "until_minutes_ago": until,
    }


BASELINE = timedelta(minutes=20)  # how far before the first window the baseline reaches
ONSET = timedelta(minutes=5)  # a fault starts up to this long before its alert fires


def next_step(seen: Seen) -> tuple[str, dict[str, Any]] | None:
    if seen.budget_left <= 0:
        return None
    if not any(n == "query_tempo_traces" for n, _ in seen.calls):
        service = seen.alert_service
        traceql = (
            f'{{ resource.service.name = "{service}" && status = error }}'
            if service
            else "{ status = error }"
        )
        return "query_tempo_traces", {"traceql": traceql, "limit": 20}
    unread = [h for h in seen.hits if h not in seen.read]
    if len(seen.read) < TRACES_READ and unread:
        return "get_trace", {"trace_id": unread[0]}
    if _background(seen) is not None:
        return None
    if (baseline := _baseline_step(seen)) is not None:
        return baseline
    if _background(seen) is not None:
        return None
    for suspect in _suspects(seen):
        if suspect not in seen.rollouts and seen.budget_left > 1:
            namespace = seen.namespaces.get(suspect, seen.namespace)
            return "get_rollout_history", {"namespace": namespace, "deployment": suspect}
        if _lines_up(seen, seen.rollouts.get(suspect)):
            break
    if (health := _health_step(seen)) is not None:
        return health
    changed = _changed(seen)
    if changed is None and (narrow := _failing_nodes(seen)) and narrow[0] not in seen.node_checks:
        service, nodes = narrow
        # The same failure (status code) on the service's pods on any other node?
        elsewhere = " && ".join(f'resource.k8s.node.name != "{n}"' for n in nodes)
        origin = next(e for e in _origins(seen) if e.service == service)
        same = f" && span.http.status_code = {origin.http}" if origin.http else ""
        traceql = (
            f'{{ resource.service.name = "{service}" && status = error{same} && {elsewhere} }}'
        )
        return "query_tempo_traces", {"traceql": traceql, "limit": 5}
    conclusion = conclude(seen)
    if conclusion.action is not None and seen.proposed is None and seen.budget_left > 0:
        return "propose_action", conclusion.action
    return None


def _dying(seen: Seen) -> str | None:
    """The Deployment whose processes look like they die, cannot be reached or run out of
    memory: one a caller could not reach, or one whose own spans fail for memory."""
    for e in _origins(seen):
        if callee := _unreached(e):
            return callee
        if error_kind(e.status) == "memory":
            return e.service
    return None


def _saturated(seen: Seen) -> str | None:
    origins = _origins(seen)
    top = Counter(e.service for e in origins).most_common(1)
    if top and any(
        error_kind(e.status) == "saturation" and e.service == top[0][0] for e in origins
    ):
        return top[0][0]
    return None


def _health_step(seen: Seen) -> tuple[str, dict[str, Any]] | None:
    """For a dying service, once its rollout is read: its pods, then (when offered) its
    memory in Prometheus and its logs in Loki, and the events of pods not ready for no
    reason the pods show; for a saturated one, its autoscaler's replicas in Prometheus —
    one call each, within the budget."""
    if seen.budget_left <= 1:
        return None
    saturated = _saturated(seen)
    if saturated is not None and saturated in seen.rollouts and "query_prometheus" in seen.tools:
        namespace = seen.namespaces.get(saturated, seen.namespace)
        if saturated not in seen.read_scaling:
            promql = (
                f'{{__name__=~"kube_horizontalpodautoscaler_(spec_max|status_current)_replicas",'
                f' namespace="{namespace}", horizontalpodautoscaler="{saturated}"}}'
            )
            return "query_prometheus", {"promql": promql}
    dying = _dying(seen)
    if dying is None or dying not in seen.rollouts:
        return None
    namespace = seen.namespaces.get(dying, seen.namespace)
    if "get_workload_pods" in seen.tools and dying not in seen.read_pods:
        return "get_workload_pods", {"namespace": namespace, "deployment": dying}
    if (
        _unexplained(seen.read_pods.get(dying, ""))
        and dying not in seen.read_events
        and "get_kubernetes_events" in seen.tools
    ):
        return "get_kubernetes_events", {"namespace": namespace, "deployment": dying}
    if "query_prometheus" in seen.tools and dying not in seen.read_memory:
        promql = (
            f'max by (pod) (container_memory_working_set_bytes{{namespace="{namespace}", '
            f'container="{dying}"}})'
        )
        return "query_prometheus", {"promql": promql}
    if "query_loki_logs" in seen.tools and dying not in seen.read_logs:
        logql = f'{{namespace="{namespace}", app="{dying}"}} |~ "(?i)error|memory|killed|gc "'
        return "query_loki_logs", {"logql": logql, "limit": 50}
    return None


def _unexplained(pods: str) -> bool:
    """Some pods are not ready and no container of theirs died: the events may say why."""
    not_ready = [m for m in _POD_LINE.finditer(pods) if m["ready"] != m["of"]]
    return bool(not_ready) and "last terminated" not in pods


def _troubled_nodes(seen: Seen, deployment: str) -> tuple[list[str], str]:
    """The nodes whose pods of `deployment` the events say are in trouble (not ready,
    evicted), and the events' reason."""
    events = seen.read_events.get(deployment, "")
    pods = {m["pod"]: m["node"] for m in _POD_LINE.finditer(seen.read_pods.get(deployment, ""))}
    nodes, reasons = [], []
    for m in _EVENT_POD.finditer(events):
        line = events[m.start() : events.find("\n", m.start()) % (len(events) + 1)]
        if _NODE_TROUBLE.search(line) and (node := pods.get(m["pod"]) or seen.nodes.get(m["pod"])):
            nodes.append(node)
            reasons.append(m["reason"])
    return sorted(set(nodes)), ", ".join(dict.fromkeys(reasons))


def _at_max(seen: Seen, deployment: str) -> tuple[int, int] | None:
    """(current, maximum) replicas of the deployment's autoscaler, when it is at its maximum."""
    text = seen.read_scaling.get(deployment, "")
    values: dict[str, float] = {}
    for m in _SERIES.finditer(text):
        kind = "max" if "spec_max" in m["labels"] else "current"
        values[kind] = float(m["value"])
    if "max" in values and "current" in values and values["current"] >= values["max"]:
        return int(values["current"]), int(values["max"])
    return None


def _lines_up(seen: Seen, rollout: Rollout | None) -> bool:
    if rollout is None or rollout.created is None:
        return False
    start = seen.alert_start or rollout.created
    return start - CHANGE_WINDOW <= rollout.created <= start + timedelta(minutes=10)


def _changed(seen: Seen) -> Rollout | None:
    return next(
        (
            r
            for s in _suspects(seen)
            if (r := seen.rollouts.get(s)) is not None and _lines_up(seen, r)
        ),
        None,
    )


def _chain(seen: Seen, start: str) -> list[str]:
    """From where the failure starts up through the callers, as the error spans say."""
    callers = {e.service: e.caller for e in seen.errors if e.caller}
    chain = [start]
    while (caller := callers.get(chain[-1])) and caller not in chain and len(chain) < 8:
        chain.append(caller)
    return chain


KIND_WORDS = {
    "certificate": "its certificate is rejected",
    "rate limit": "it rate-limits the calls",
    "saturation": "it refuses calls over its limit",
    "timeout": "calls to it time out",
    "connection": "connections to it fail",
    "disk": "it has run out of disk",
    "memory": "it runs out of memory",
}


def conclude(seen: Seen) -> Conclusion:
    if (quiet := _background(seen)) is not None:
        service = f"`{seen.alert_service}`" if seen.alert_service else "the alerted service"
        return Conclusion(
            "nothing wrong",
            f"The error search of {service} shows {quiet}; nothing started with the alert.",
            [],
            "",
            seen.read[0] if seen.read else None,
            confidence="medium",
            why=f"nothing wrong: {quiet}",
            nothing_wrong=True,
        )
    origins = _origins(seen)
    if not origins:
        return Conclusion(
            "not found: nothing in the traces I read shows where the errors start",
            "",
            [],
            "",
            seen.read[0] if seen.read else None,
            confidence="low",
            why="no failure start found in the traces read",
        )
    top = Counter((e.service, e.peer) for e in origins).most_common(1)[0][0]
    origin = next(e for e in origins if (e.service, e.peer) == top)
    kind = error_kind(origin.status)
    chain = _chain(seen, origin.service)
    callee = _unreached(origin)
    if callee:
        chain = [callee, *chain]
    elif origin.peer:
        chain = [origin.peer, *chain]
    where = f"failures start at {origin.service}" + (
        f" calling {origin.peer}" if origin.peer else ""
    )
    trail = f"{where}; error kind: {kind or 'unknown'}"

    def found(cause: str, detail: str, because: str, **more: Any) -> Conclusion:
        return Conclusion(
            cause, detail, chain, origin.status, origin.trace_id, why=f"{trail}; {because}", **more
        )

    if (rollout := _changed(seen)) is not None:
        change = rollout.cause or f"deploy {rollout.version}"
        named = f" ({rollout.version})" if rollout.version in change else ""
        if rollout.deployment not in chain:
            chain = [rollout.deployment, *chain]
        return found(
            f"`{rollout.deployment}` revision {rollout.revision}{named}",
            f"It was created {rollout.created:%Y-%m-%dT%H:%M:%SZ}, just before the errors "
            f"began, by `{change}`.",
            f"revision {rollout.revision} of {rollout.deployment} lines up with the alert",
            action={
                "action": "rollout_undo",
                "namespace": rollout.namespace,
                "deployment": rollout.deployment,
                "reason": f"Errors began with revision {rollout.revision} ({change}); "
                f"see {origin.trace_id}.",
            },
        )
    dying = _dying(seen)
    if dying is not None and (troubled := _troubled_nodes(seen, dying))[0]:
        nodes, reasons = troubled
        listed = " and ".join(f"`{n}`" for n in nodes)
        return found(
            f"the node{'s' * (len(nodes) > 1)} {listed}",
            f"The `{dying}` pods there are not ready; their events say {reasons}.",
            f"events of {dying}'s pods: {reasons} on {', '.join(nodes)}",
        )
    saturated = _saturated(seen)
    if saturated is not None and (limit := _at_max(seen, saturated)) is not None:
        return found(
            f"`{saturated}` at its autoscaler's maximum ({limit[1]} replicas)",
            f"The HorizontalPodAutoscaler runs {limit[0]} of at most {limit[1]} replicas and it "
            "still refuses calls over its limit: raising maxReplicas is a person's decision.",
            f"saturated and the autoscaler is at its maximum ({limit[0]}/{limit[1]})",
        )
    if kind == "dns":
        return found(
            "cluster DNS (CoreDNS)",
            "Name lookups time out before any call is made.",
            "name lookups fail",
        )
    if kind == "flag" and (flag := _FLAG.search(origin.status)):
        return found(
            f"the feature flag `{flag['flag']}`",
            "The failing code runs behind it.",
            "the error names a flag that is on",
        )
    narrow = _failing_nodes(seen)
    if narrow is not None and seen.node_checks.get(narrow[0]) is False:
        listed = " and ".join(f"`{n}`" for n in narrow[1])
        plural = "s" * (len(narrow[1]) > 1)
        return found(
            f"the node{plural} {listed}",
            f"Only `{narrow[0]}` pods there fail; a search finds no failures elsewhere.",
            "failures only on pods of these nodes",
        )
    if kind == "credentials":
        target = f"`{origin.peer}`" if origin.peer else "what it calls"
        return found(
            "rejected credentials (a secret or key changed under a running service?)",
            f"`{origin.service}`'s calls to {target} fail authentication.",
            "the error says authentication failed",
            confidence="medium",
        )
    if origin.peer:
        what = KIND_WORDS.get(kind or "", "")
        return found(
            f"`{origin.peer}`",
            f"`{origin.service}`'s calls to it fail" + (f": {what}." if what else "."),
            f"the failing call is to {origin.peer}",
        )
    if callee:
        return found(
            f"`{callee}`",
            "Its pods cannot be reached or drop connections mid-request.",
            f"callers cannot reach {callee}",
        )
    current = seen.rollouts.get(origin.service)
    if kind == "saturation" and current is not None:
        return found(
            f"`{origin.service}` is saturated",
            f"It runs {current.replicas} replicas and refuses requests over its limit.",
            "saturated with room to scale",
            action={
                "action": "scale",
                "namespace": current.namespace,
                "deployment": current.deployment,
                "replicas": current.replicas * 2,
                "reason": f"{origin.service} is at its in-flight limit; see {origin.trace_id}.",
            },
        )
    if kind == "memory" and current is not None:
        return found(
            f"`{origin.service}` {current.version} running out of memory",
            f"Revision {current.revision} is older than the alert: a leak, not a fresh deploy.",
            "out of memory with no recent change",
            confidence="medium",
        )
    return found(
        f"`{origin.service}`",
        "Nothing it calls fails.",
        "the failure starts in its own spans",
        confidence="medium",
    )


def compose(seen: Seen, conclusion: Conclusion) -> str:
    if conclusion.nothing_wrong:
        lines = [
            f"*Nothing looks wrong in the cluster ({conclusion.confidence} confidence).*",
            conclusion.detail,
            "• No action is needed from the cluster side; I proposed nothing.",
        ]
        if conclusion.trace_id:
            lines.append(f"• Example trace of the background errors: {conclusion.trace_id}.")
        lines.append("*Not checked:* pods, metrics, logs, anything the tools did not show.")
        return "\n".join(lines)
    lines = [f"*Likely cause ({conclusion.confidence} confidence):* {conclusion.cause}."]
    if conclusion.detail:
        lines.append(conclusion.detail)
    if conclusion.evidence:
        lines.append(f"• Where it starts: `{conclusion.evidence[:200]}`.")
    if len(conclusion.chain) > 1:
        lines.append("• How it spreads: " + " → ".join(f"`{s}`" for s in conclusion.chain) + ".")
    if conclusion.trace_id:
        lines.append(f"• Example trace: {conclusion.trace_id}.")
    for deployment, pods in seen.read_pods.items():
        if "OOMKilled" in pods:
            lines.append(f"• `{deployment}` pods are OOM-killed and restarting (CrashLoopBackOff).")
    if seen.proposed:
        lines.append(
            "• I proposed a remediation; it needs an engineer's approval before anything runs."
        )
    unread = [
        what
        for what, read in (
            ("pods", seen.read_pods),
            ("metrics", {**seen.read_memory, **seen.read_scaling}),
            ("logs", seen.read_logs),
        )
        if not read
    ]
    lines.append(f"*Not checked:* {', '.join([*unread, 'anything the tools did not show'])}.")
    return "\n".join(lines)


def reference_grader(request: GeminiRequest) -> Reply:
    """Offline grading: every criterion accepted (the figures measure the investigator)."""
    return satisfied("Reference grader: the offline run grades nothing.")


def reference_judge(request: GeminiRequest) -> Reply:
    """Offline judging: every proposal allowed, so what the agent proposes is what is scored."""
    return verdict(True, "Reference judge: offline runs score the agent's own proposals.")
