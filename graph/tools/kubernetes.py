"""Kubernetes: read a Deployment's rollout history, and propose (never run) an action."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from typing import Any, TypeVar, cast

from kubernetes_asyncio.client.exceptions import ApiException
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import ToolRuntime

from gates.cluster import ClusterError, NotFound, name_refusal
from gates.model import ActionRequest, ClusterSnapshot
from gates.pipeline import ActionPipeline
from graph.action_claims import true_state
from graph.grounding.evidence import CITE, ROLLOUT, Fact, citation, fact, image_facts
from graph.links import kubectl
from graph.progress import TurnContext, reporter
from graph.state import InvestigationState
from graph.tools import Shown, ToolFailed, ToolSet, declared
from graph.trace_ids import find_trace_ids

MAX_CONTEXT_CHARS = 6_000
MAX_EVIDENCE = 20

# The state as a plain dict: a TypedDict in a tool's signature cannot become its schema.
Run = ToolRuntime[TurnContext, dict[str, Any]]
T = TypeVar("T")


def investigation(runtime: Run) -> dict[str, Any]:
    """What a proposal records of the run that made it: the LangGraph thread id it is filed
    under, the requester, the trace IDs that came out of tool results (oldest first), and
    the question and the latest tool results as plain text."""
    state = cast(InvestigationState, runtime.state)
    messages = state["messages"]
    tool_texts = [m.text for m in messages if isinstance(m, ToolMessage)]
    evidence = list(dict.fromkeys(t for text in tool_texts for t in find_trace_ids(text)))
    question = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
    context = f"Question: {question}\n\nLatest tool results:\n" + "\n---\n".join(tool_texts[-3:])
    return {
        "thread_key": str((runtime.config.get("configurable") or {}).get("thread_id", "unknown")),
        "requester": str((runtime.config.get("metadata") or {}).get("user", "unknown")),
        "evidence": evidence[:MAX_EVIDENCE],
        "context": context[:MAX_CONTEXT_CHARS],
    }


async def read(what: str, call: Callable[[], Awaitable[T]]) -> T:
    """A read of the Kubernetes API for a tool: NotFound as it is (the tool says what is
    missing), any other failure the tool's, written for the model."""
    try:
        return await call()
    except NotFound:
        raise
    except ClusterError as exc:
        # A timeout, a dropped connection, throttling or a server error may pass; a refusal
        # (forbidden, invalid) will not.
        cause = exc.__cause__
        status = cause.status if isinstance(cause, ApiException) else None
        raise ToolFailed(
            f"The Kubernetes API could not be read for {what} ({exc}).",
            retryable=status is None or status == 429 or status >= 500,
        ) from exc


def rollout_facts(
    namespace: str, deployment: str, snap: ClusterSnapshot, source: str
) -> list[Fact]:
    """A Deployment's names, revisions (the current one marked), their images, versions,
    ReplicaSets and creation times, as evidence."""
    subject = {"subject": deployment}
    facts = [
        fact("namespace", namespace, source),
        fact("deployment", deployment, source),
        fact("revision", str(snap.current_revision), source, role="current", **subject),
    ]
    for image in snap.images:
        facts += image_facts(image, source, deployment, role="current")
    for r in snap.revisions:
        where = f"{source}: revision {r.revision}"
        facts.append(fact("revision", str(r.revision), where, **subject))
        for image in r.images:
            facts += image_facts(image, where, deployment, revision=str(r.revision))
        if r.replicaset:
            facts.append(fact("replicaset", r.replicaset, where, **subject))
        if r.created:
            created = f"{where}: created"
            facts.append(
                fact("time", r.created, created, pool=ROLLOUT, revision=str(r.revision), **subject)
            )
    shown = kubectl("rollout", "history", f"deployment/{deployment}", "-n", namespace)
    return [*facts, citation(source, shown)]


def proposal_facts(request: ActionRequest) -> list[Fact]:
    """What the gates read of the Deployment when it was proposed, and the rollback target
    pinned then (a rollback renumbers that revision, so later reads no longer show it)."""
    source = f"propose_action {request.id}"
    facts = [fact("namespace", request.namespace, source)]
    facts.append(fact("deployment", request.deployment, source))
    if request.snapshot is not None:
        facts += rollout_facts(request.namespace, request.deployment, request.snapshot, source)
    target = request.target_revision
    if target is not None:
        where = f"{source}: rollback target"
        facts.append(fact("revision", str(target.revision), where, subject=request.deployment))
        for image in target.images:
            facts += image_facts(image, where, request.deployment, revision=str(target.revision))
    return facts


ROLLOUT_FACTS = (
    "namespace",
    "deployment",
    "revision",
    "replicaset",
    "image",
    "version",
    "time",
    CITE,
)
SHOWN = {
    "get_rollout_history": Shown(
        "Reading the rollout history of {deployment}", budget=3_000, facts=ROLLOUT_FACTS
    ),
    # Its result line is written for the model; the proposal's own task follows.
    "propose_action": Shown(
        "Proposing {action} of {deployment}",
        budget=2_000,
        facts=ROLLOUT_FACTS,
        headline=False,
        titles_by=(
            "action",
            {
                "rollout_undo": "Proposing a rollback of {deployment}",
                "scale": "Proposing to scale {deployment} to {replicas}",
            },
        ),
    ),
}


def kubernetes_tools(pipeline: ActionPipeline) -> list[BaseTool]:
    """The rollout-history reader and the action proposer, bound to one pipeline."""
    cluster = pipeline.cluster

    @tool(response_format="content_and_artifact")
    async def get_rollout_history(namespace: str, deployment: str) -> tuple[str, list[Fact]]:
        """A Deployment's replicas and revisions (image, change-cause, time)."""
        if refusal := name_refusal(namespace, deployment=deployment):
            return f"Not read: {refusal}.", []
        target = f"{namespace}/{deployment}"
        try:
            snap = await read(target, lambda: cluster.snapshot(namespace, deployment))
        except NotFound:
            return f"Deployment {target} does not exist.", []
        lines = [
            f"{namespace}/{deployment}: {snap.ready_replicas}/{snap.replicas} replicas ready"
            + (", PAUSED" if snap.paused else "")
            + f", current revision {snap.current_revision} ({', '.join(snap.images)})",
            "revisions (oldest first):",
        ]
        lines += [
            f"- {r.revision}: {', '.join(r.images)}"
            + (f" — {r.change_cause}" if r.change_cause else "")
            + (f" — created {r.created}" if r.created else "")
            + (" (current)" if r.revision == snap.current_revision else "")
            for r in snap.revisions
        ]
        where = f"get_rollout_history {namespace}/{deployment}"
        return "\n".join(lines), rollout_facts(namespace, deployment, snap, where)

    @tool(response_format="content_and_artifact")
    async def propose_action(
        action: str,
        namespace: str,
        deployment: str,
        reason: str,
        runtime: Run,
        replicas: int | None = None,
    ) -> tuple[str, list[Fact]]:
        """Propose `rollout_undo` (previous revision) or `scale` (to `replicas`) for an
        engineer to approve, when the evidence supports it; `reason` cites it.
        """
        request = await pipeline.propose(
            action=action,
            namespace=namespace,
            deployment=deployment,
            replicas=replicas,
            reason=reason,
            **investigation(runtime),
        )
        reporter(runtime.context)(
            {"type": "action_proposed", "request_id": request.id, "status": request.status}
        )
        seen = proposal_facts(request)
        if request.status == "pending_approval":
            return (
                f"Proposed as {request.id}, awaiting human approval: {request.describe()}. "
                "Tell the engineer it needs their approval; do not claim it has run."
            ), seen
        state = true_state(request)  # refused by a gate or by the reviewer, and why
        return f"{state[:1].upper()}{state[1:]}. Do not propose it again as is.", seen

    return declared(SHOWN, [get_rollout_history, propose_action])


TOOLSET = ToolSet(
    name="kubernetes",
    label="Kubernetes (rollouts, actions)",
    open=lambda bound: nullcontext(kubernetes_tools(bound.pipeline)),
    shown=SHOWN,
    cluster=True,
    needs="a Kubernetes API (`KUBECONFIG`, or in the cluster)",
)
