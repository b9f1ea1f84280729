"""Scripted Gemini replies that replay the demo's incidents, turn by turn.

They stand in for the model when no GOOGLE_API_KEY is set: the same requests reach the
same simulator, the replies are this script's. Three models are scripted apart: the agent,
the rubric grader and the action judge.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from sandbox.gemini import GeminiRequest, Reply
from sandbox.scenarios import OomLoop, Scenario

AGENT = "replay-agent"
GRADER = "replay-grader"
JUDGE = "replay-judge"

DEFAULT_CRITERIA = (
    "The likely root cause is stated, with a confidence level",
    "Every claim is backed by a tool result (a trace, a search or the rollout history)",
    "Every trace ID cited comes from a tool result",
    "Any proposed action has a reason and a way to roll it back",
    "The answer says what was not checked",
)
INVENTED_TRACE = "7f3a9c0d2b1e4f5a6b7c8d9e0f1a2b3c"
INVENTED_VERSION = "1.43.1"  # no scenario's service runs it


def satisfied(why: str = "Every criterion is met.") -> Reply:
    return Reply.call(
        "SubmitVerdict",
        result="satisfied",
        explanation=why,
        criteria=[{"name": c, "passed": True} for c in DEFAULT_CRITERIA],
    )


def needs(gap_criterion: str, gap: str, why: str) -> Reply:
    return Reply.call(
        "SubmitVerdict",
        result="needs_revision",
        explanation=why,
        criteria=[
            {
                "name": c,
                "passed": c != gap_criterion,
                **({"gap": gap} if c == gap_criterion else {}),
            }
            for c in DEFAULT_CRITERIA
        ],
    )


def verdict(safe: bool, reason: str) -> Reply:
    """The action judge's structured verdict."""
    return Reply.json({"safe_to_proceed": safe, "reason": reason})


def look_into(service: str, trace_id: str) -> list[Reply]:
    """The agent's usual first moves: search the service's errors, open one trace, read the
    Deployment's rollout history."""
    return [
        Reply.call(
            "query_tempo_traces",
            traceql=f'{{ resource.service.name = "{service}" && status = error }}',
            since_minutes_ago=30,
        ),
        Reply.call("get_trace", trace_id=trace_id),
        Reply.call("get_rollout_history", namespace="shop", deployment=service),
    ]


def propose_rollback(deployment: str, reason: str) -> Reply:
    """The agent proposes rolling a `shop` Deployment back to its previous revision."""
    return Reply.call(
        "propose_action",
        action="rollout_undo",
        namespace="shop",
        deployment=deployment,
        reason=reason,
    )


@dataclass
class Play:
    """One scripted incident: what each model says, in order."""

    agent: list[Reply] = field(default_factory=list)
    grader: list[Reply] = field(default_factory=list)
    judge: list[Reply] = field(default_factory=list)


def bad_deploy_play(scenario: Scenario) -> Play:
    failing = scenario.error_trace_ids[2]
    first_answer = (
        "*Likely cause (high confidence):* `payment-api` revision 42 (image 1.42.0) throws "
        "`NullPointerException in ChargeHandler.applyDiscount`; `checkout` turns its 503s "
        f"into 502s. Example trace: {failing}.\n"
        "• Two of every three checkouts in the last 10 minutes fail, "
        "all inside `POST /v1/charge`.\n"
        "• Revision 42 rolled out about an hour ago; revision 41 (1.41.3) ran cleanly before."
    )
    return Play(
        agent=[
            *look_into("payment-api", failing),
            Reply.text(first_answer),
            Reply.text(
                first_answer
                + "\n*Not checked:* database health and the card gateway's own status page."
            ),
            propose_rollback(
                "payment-api",
                f"Errors began with revision 42 (1.42.0); see {failing}. "
                "Revision 41 (1.41.3) was healthy.",
            ),
            Reply.text(
                "I proposed rolling `shop/payment-api` back to revision 41 (1.41.3); it needs "
                "an approver. *Roll-back path:* re-deploy 1.42.0 once the fix lands. "
                "*Not checked:* whether 1.41.3 lacks a feature checkout now depends on."
            ),
        ],
        grader=[
            needs(
                "The answer says what was not checked",
                "say which components were not examined (e.g. the database, the card gateway)",
                "Cause and evidence are solid; the limits of the investigation are not stated.",
            ),
            satisfied(),
            satisfied("The proposal has a reason, evidence and a way back."),
        ],
        judge=[
            verdict(
                True,
                "Errors start exactly with revision 42 and the traces show a code defect in "
                "payment-api; rolling back to 41 is proportionate.",
            )
        ],
    )


def alert_fires_play(scenario: Scenario) -> Play:
    """The bad deploy again, found because its alert fired: no one asked."""
    failing = scenario.error_trace_ids[2]
    return Play(
        agent=[
            *look_into("payment-api", failing),
            Reply.call(
                "query_prometheus_range",
                promql='sum by (pod) (rate(http_server_errors_total{namespace="shop", '
                'deployment="payment-api"}[5m]))',
            ),
            Reply.text(
                "*Likely cause (high confidence):* `payment-api` revision 42 (image 1.42.0) "
                "throws `NullPointerException in ChargeHandler.applyDiscount`; `checkout` "
                f"turns its 503s into 502s. Example trace: {failing}.\n"
                "• Revision 42 rolled out about an hour ago; revision 41 (1.41.3) ran cleanly "
                "before.\n*Not checked:* the card gateway's own status page."
            ),
        ],
        grader=[satisfied("Cause, evidence and what was not checked are all there.")],
    )


def db_overload_play(scenario: Scenario) -> Play:
    failing = scenario.error_trace_ids[0]
    return Play(
        agent=[
            *look_into("orders-api", failing),
            propose_rollback(
                "orders-api", "orders-api returns 503s; roll back its latest revision to be safe."
            ),
            Reply.text(
                "*Likely cause (high confidence):* Postgres is out of connections — pgbouncer "
                f"refuses new clients (`max_client_conn 400`), e.g. {failing}, where "
                "`INSERT orders` waits 2–5 s and fails.\n"
                "• `orders-api` last deployed two days ago, long before the errors.\n"
                "• The rollback I proposed was refused by the reviewer: the evidence points at "
                "the database, not the deploy.\n"
                "*Not checked:* which client holds the connections (look at pg_stat_activity)."
            ),
        ],
        grader=[satisfied()],
        judge=[
            verdict(
                False,
                "The traces show Postgres connection-pool exhaustion and the last orders-api "
                "deploy is two days old: a rollback would not help.",
            )
        ],
    )


def hallucination_play(scenario: Scenario) -> Play:
    """The agent cites a trace it never saw (the trace guard sends it back), then a version
    no tool showed (the grounding check sends it back), then reads the trace and answers."""
    real = scenario.error_trace_ids[3]

    def answer(version: str) -> Reply:
        return Reply.text(
            f"*Likely cause (medium confidence):* `payment-api` {version} fails in "
            f"`ChargeHandler.applyDiscount`; see {real}.\n*Not checked:* the rollout history."
        )

    return Play(
        agent=[
            Reply.text(
                f"payment-api is failing; see trace {INVENTED_TRACE} for the NullPointerException."
            ),
            Reply.call(
                "query_tempo_traces",
                traceql='{ resource.service.name = "payment-api" && status = error }',
                since_minutes_ago=30,
            ),
            answer(INVENTED_VERSION),
            Reply.call("get_trace", trace_id=real),
            answer("1.42.0"),
        ],
        grader=[satisfied()],
    )


def oom_loop_play(incident: OomLoop) -> Play:
    """Nothing in Tempo; the pods, their events, their memory and the previous container's
    log show revision 18 killed for memory in a loop."""
    ns, name = incident.namespace, incident.deployment
    pod = incident.pods[0]
    return Play(
        agent=[
            Reply.call(
                "query_tempo_traces",
                traceql=f'{{ resource.service.name = "{name}" && '
                f'resource.k8s.namespace.name = "{ns}" && status = error }}',
                since_minutes_ago=30,
            ),
            Reply.call("get_workload_pods", namespace=ns, deployment=name),
            Reply.call("get_kubernetes_events", namespace=ns, deployment=name),
            Reply.call(
                "query_prometheus_range",
                promql=f'max by (pod) (container_memory_working_set_bytes{{namespace="{ns}", '
                f'container="{name}"}})',
                since_minutes_ago=60,
            ),
            Reply.call("get_rollout_history", namespace=ns, deployment=name),
            Reply.call("get_pod_logs", namespace=ns, pod=pod, previous=True),
            Reply.text(
                f"*Likely cause (high confidence):* revision 18 of `{ns}/{name}` (image "
                "registry/payment-api:1.9.0) runs out of memory and is OOM-killed in a loop.\n"
                f"• All {len(incident.pods)} pods are in `CrashLoopBackOff`; each last "
                f"terminated `OOMKilled` (exit code 137), e.g. pod {pod} after "
                f"{incident.restarts[0]} restarts.\n"
                "• Their memory climbs from about 150M to the 512Mi limit within 40 seconds "
                "of each start; revision 17 (1.8.2) held steady near 210M.\n"
                "• The previous container's log ends while it loads its price cache into "
                "memory.\n"
                "• Tempo holds no error traces from payment-api: its pods die before they "
                "serve.\n"
                "*Suggested:* roll back to revision 17 (1.8.2), or raise the memory limit. "
                "*Not checked:* the heap settings of 1.9.0."
            ),
        ],
        grader=[satisfied()],
    )


# --- a generic replay for questions nobody scripted (`tracegate demo --interactive`) ------
_HEX_ID = re.compile(r"\b[0-9a-f]{16,32}\b")


def _turn(request: GeminiRequest) -> tuple[str, list[str], str]:
    """The latest question, the tools called since, and the text of their results."""
    question = ""
    called: list[str] = []
    results: list[str] = []
    for content in request.contents:
        for part in content.get("parts", []):
            if content.get("role") == "user" and "text" in part:
                question, called, results = part["text"], [], []
            elif "functionCall" in part:
                called.append(part["functionCall"]["name"])
            elif "functionResponse" in part:
                results.append(json.dumps(part["functionResponse"]))
    return question, called, "\n".join(results)


def replay_agent(request: GeminiRequest) -> Reply:
    """A rule-following stand-in for the agent: search, look, check deploys, answer."""
    question, called, results = _turn(request)
    ids = _HEX_ID.findall(results)
    service = "orders-api" if "order" in question.lower() else "payment-api"
    forced = request.body.get("toolConfig", {}).get("functionCallingConfig", {}).get("mode")
    if forced != "NONE" and not question.startswith(("[trace guard]", "[rubric grader]")):
        if "query_tempo_traces" not in called:
            return Reply.call(
                "query_tempo_traces",
                traceql=f'{{ resource.service.name = "{service}" && status = error }}',
                since_minutes_ago=30,
            )
        if "get_trace" not in called and ids:
            return Reply.call("get_trace", trace_id=ids[0])
        if "get_rollout_history" not in called:
            return Reply.call("get_rollout_history", namespace="shop", deployment=service)
        wants_action = any(w in question.lower() for w in ("roll back", "rollback", "fix"))
        if wants_action and "propose_action" not in called:
            return propose_rollback(service, "errors started with the latest revision")
    cited = f" See {ids[0]}." if ids else ""
    return Reply.text(
        f"*Likely cause (replayed, medium confidence):* the newest `{service}` revision; "
        f"errors in the traces start with it.{cited}\n"
        "*Not checked:* anything outside Tempo and the rollout history."
    )


def replay_grader(request: GeminiRequest) -> Reply:
    return satisfied("Replay grader: every criterion accepted.")


def replay_judge(request: GeminiRequest) -> Reply:
    if "connection pool exhausted" in request.text():
        return verdict(False, "the database, not the deploy, is failing")
    return verdict(True, "the errors start with the latest revision")


def follow_up_turn(scenario: Scenario, turn: int) -> list[Reply]:
    """One turn of a long incident thread: a search, a look at one trace, an answer citing
    it. Turn 1 cites the first error trace; later turns walk the others, and every tenth
    cites turn 1's again (so a long thread keeps citing an early ID)."""
    errors = scenario.error_trace_ids
    cited = errors[0] if turn == 1 or turn % 10 == 0 else errors[turn % len(errors)]
    return [
        Reply.call("query_tempo_traces", traceql="{ status = error }", since_minutes_ago=60),
        Reply.call("get_trace", trace_id=cited),
        Reply.text(
            f"Turn {turn}: payment-api 1.42.0 still throws NullPointerException in "
            f"checkout; trace {cited} shows the failing span. Confidence: high."
        ),
    ]
