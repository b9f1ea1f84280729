"""The reference investigator: a fixed policy that uses the tools the way an SRE would.

It stands in for the model in offline evals, answering through the Gemini simulator, so its
requests run the same graph, tools and guards a Slack turn runs. It reads only what the
tools returned (never the scenario's truth), so when it finds a cause, the tools' summaries
show the evidence within the tool budget; and its own answer is a correct one the guards
must leave intact.

The policy, in the order an on-call engineer works:
1. Search the alerted service's errors over the alert's window; read up to three traces.
2. Find where the failures start (the span with no failing child), who called it, and what
   it called (`peer`), or which callee a caller saw reset.
3. What changed? The rollout history of the suspect, the failing service and, when it is
   hammered by repeats, its caller: a revision created within an hour before the alert.
4. Otherwise what the error says: DNS, a feature flag, one node's pods only (checked with a
   search for errors elsewhere), a dependency, saturation, memory.
5. Answer with the cause, the chain, an example trace and what was not checked; propose a
   rollback for a change that lines up, a scale-out for saturation.
"""

from __future__ import annotations

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
_RESET = re.compile(r"upstream (?P<callee>[\w.-]+):? (?:connect error|.*reset)")
_DNS = re.compile(r"lookup \S+ on [\d.]+:53")
_FLAG = re.compile(r"flag (?P<flag>[\w.-]+)=on")
_SATURATED = re.compile(r"in flight|concurrency limit|overloaded|too many requests", re.IGNORECASE)
_MEMORY = re.compile(r"OutOfMemory|heap space|OOMKilled", re.IGNORECASE)


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
            service = _quoted_service(str(args.get("traceql", "")))
            seen.node_checks[service] = bool(found)
        else:
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
    elif name == "query_prometheus":
        seen.read_memory[_quoted_container(str(args.get("promql", "")))] = text
    elif name == "query_loki_logs":
        seen.read_logs[_quoted_app(str(args.get("logql", "")))] = text


def _quoted_container(promql: str) -> str:
    found = re.search(r'container="([^"]+)"', promql)
    return found[1] if found else ""


def _quoted_app(logql: str) -> str:
    found = re.search(r'app="([^"]+)"', logql)
    return found[1] if found else ""


def _quoted_service(traceql: str) -> str:
    found = re.search(r'resource\.service\.name = "([^"]+)"', traceql)
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
class Finding:
    """The policy's conclusion."""

    cause: str  # the cause, as the answer's first sentence names it: nothing else
    detail: str  # a sentence on what shows it
    chain: list[str]
    evidence: str  # the error text that shows it
    trace_id: str | None
    action: dict[str, Any] | None = None
    confidence: str = "high"


class ReferenceInvestigator:
    """The agent's replies, one per request; the drafts it wrote are kept."""

    def __init__(self) -> None:
        self.drafts: list[str] = []

    def __call__(self, request: GeminiRequest) -> Reply:
        seen = read_request(request)
        forced = request.body.get("toolConfig", {}).get("functionCallingConfig", {}).get("mode")
        if forced != "NONE" and not seen.drafted:
            step = next_step(seen)
            if step is not None:
                name, args = step
                return Reply.call(name, **args)
        answer = compose(seen, conclude(seen))
        self.drafts.append(answer)
        return Reply.text(answer)


def _origins(seen: Seen) -> list[ErrorSpan]:
    return [e for e in seen.errors if e.origin]


def _suspects(seen: Seen) -> list[str]:
    """Deployments worth a look at their rollout history, most suspect first."""
    origins = _origins(seen)
    ranked: list[str] = []
    for e in origins:
        if reset := _RESET.search(e.status):
            ranked.append(reset["callee"])
    ranked += [s for s, _ in Counter(e.service for e in origins).most_common()]
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
    finding = conclude(seen)
    if finding.action is not None and seen.proposed is None and seen.budget_left > 0:
        return "propose_action", finding.action
    return None


def _dying(seen: Seen) -> str | None:
    """The Deployment whose processes look like they die or run out of memory: one a caller
    saw reset, or one whose own spans fail for memory."""
    for e in _origins(seen):
        if reset := _RESET.search(e.status):
            return reset["callee"]
        if _MEMORY.search(e.status):
            return e.service
    return None


def _health_step(seen: Seen) -> tuple[str, dict[str, Any]] | None:
    """For a dying service, once its rollout is read: its pods, then (when offered) its
    memory in Prometheus and its logs in Loki — one call each, within the budget."""
    dying = _dying(seen)
    if dying is None or dying not in seen.rollouts or seen.budget_left <= 1:
        return None
    namespace = seen.namespaces.get(dying, seen.namespace)
    if "get_workload_pods" in seen.tools and dying not in seen.read_pods:
        return "get_workload_pods", {"namespace": namespace, "deployment": dying}
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


def conclude(seen: Seen) -> Finding:
    origins = _origins(seen)
    if not origins:
        return Finding(
            "not found: nothing in the traces I read shows where the errors start",
            "",
            [],
            "",
            seen.read[0] if seen.read else None,
            confidence="low",
        )
    top = Counter((e.service, e.peer) for e in origins).most_common(1)[0][0]
    origin = next(e for e in origins if (e.service, e.peer) == top)
    chain = _chain(seen, origin.service)
    reset = _RESET.search(origin.status)
    if reset:
        chain = [reset["callee"], *chain]
    elif origin.peer:
        chain = [origin.peer, *chain]

    def found(cause: str, detail: str, **more: Any) -> Finding:
        return Finding(cause, detail, chain, origin.status, origin.trace_id, **more)

    if (rollout := _changed(seen)) is not None:
        change = rollout.cause or f"deploy {rollout.version}"
        named = f" ({rollout.version})" if rollout.version in change else ""
        if rollout.deployment not in chain:
            chain = [rollout.deployment, *chain]
        return found(
            f"`{rollout.deployment}` revision {rollout.revision}{named}",
            f"It was created {rollout.created:%Y-%m-%dT%H:%M:%SZ}, just before the errors "
            f"began, by `{change}`.",
            action={
                "action": "rollout_undo",
                "namespace": rollout.namespace,
                "deployment": rollout.deployment,
                "reason": f"Errors began with revision {rollout.revision} ({change}); "
                f"see {origin.trace_id}.",
            },
        )
    if _DNS.search(origin.status):
        return found("cluster DNS (CoreDNS)", "Name lookups time out before any call is made.")
    if flag := _FLAG.search(origin.status):
        return found(f"the feature flag `{flag['flag']}`", "The failing code runs behind it.")
    narrow = _failing_nodes(seen)
    if narrow is not None and seen.node_checks.get(narrow[0]) is False:
        nodes = " and ".join(f"`{n}`" for n in narrow[1])
        plural = "s" * (len(narrow[1]) > 1)
        return found(
            f"the node{plural} {nodes}",
            f"Only `{narrow[0]}` pods there fail; a search finds no failures elsewhere.",
        )
    if origin.peer:
        return found(f"`{origin.peer}`", f"`{origin.service}`'s calls to it fail.")
    if reset:
        return found(f"`{reset['callee']}`", "Its pods drop connections mid-request.")
    current = seen.rollouts.get(origin.service)
    if _SATURATED.search(origin.status) and current is not None:
        return found(
            f"`{origin.service}` is saturated",
            f"It runs {current.replicas} replicas and refuses requests over its limit.",
            action={
                "action": "scale",
                "namespace": current.namespace,
                "deployment": current.deployment,
                "replicas": current.replicas * 2,
                "reason": f"{origin.service} is at its in-flight limit; see {origin.trace_id}.",
            },
        )
    if _MEMORY.search(origin.status) and current is not None:
        return found(
            f"`{origin.service}` {current.version} running out of memory",
            f"Revision {current.revision} is older than the alert: a leak, not a fresh deploy.",
            confidence="medium",
        )
    return found(f"`{origin.service}`", "Nothing it calls fails.", confidence="medium")


def compose(seen: Seen, finding: Finding) -> str:
    lines = [f"*Likely cause ({finding.confidence} confidence):* {finding.cause}."]
    if finding.detail:
        lines.append(finding.detail)
    if finding.evidence:
        lines.append(f"• Where it starts: `{finding.evidence[:200]}`.")
    if len(finding.chain) > 1:
        lines.append("• How it spreads: " + " → ".join(f"`{s}`" for s in finding.chain) + ".")
    if finding.trace_id:
        lines.append(f"• Example trace: {finding.trace_id}.")
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
            ("metrics", seen.read_memory),
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
