"""Kubernetes: read a Deployment's rollout history, and propose (never run) an action."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.config import get_stream_writer

from gates.cluster import ClusterError, DeploymentNotFound
from gates.pipeline import ActionPipeline
from graph.action_claims import true_state


def _investigation(config: RunnableConfig) -> dict[str, Any]:
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}
    return {
        "thread_key": str(configurable.get("thread_id", "unknown")),
        "requester": str(metadata.get("user", "unknown")),
        "evidence": list(configurable.get("evidence", [])),
        "context": str(configurable.get("context", "")),
    }


def kubernetes_tools(pipeline: ActionPipeline) -> list[BaseTool]:
    """The rollout-history reader and the action proposer, bound to one pipeline."""
    cluster = pipeline.cluster

    @tool
    async def get_rollout_history(namespace: str, deployment: str) -> str:
        """Show a Kubernetes Deployment's replicas and its rollout history.

        Returns desired and ready replicas, whether it is paused, the current revision
        with its images, and every earlier revision with images, change-cause and time.
        Use it to see whether a deploy lines up with when errors started.
        """
        try:
            snap = await cluster.snapshot(namespace, deployment)
        except DeploymentNotFound:
            return f"Deployment {namespace}/{deployment} does not exist."
        except ClusterError as exc:
            return f"Could not read {namespace}/{deployment}: {exc}"
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
        return "\n".join(lines)

    @tool
    async def propose_action(
        action: str,
        namespace: str,
        deployment: str,
        reason: str,
        config: RunnableConfig,
        replicas: int | None = None,
    ) -> str:
        """Propose a remediation for a human to approve. It is never run by you.

        `action` is `rollout_undo` (back to the previous revision) or `scale` (set
        `replicas`). `reason` says why, citing the evidence. Rule gates (allowlists,
        blast radius, circuit breaker) and a reviewer check the proposal first; then an
        engineer sees Approve/Reject buttons. Propose only when the evidence supports it.
        """
        facts = _investigation(config)
        request = await pipeline.propose(
            action=action,
            namespace=namespace,
            deployment=deployment,
            replicas=replicas,
            reason=reason,
            thread_key=facts["thread_key"],
            requester=facts["requester"],
            evidence=facts["evidence"],
            context=facts["context"],
        )
        get_stream_writer()(
            {"type": "action_proposed", "request_id": request.id, "status": request.status}
        )
        if request.status == "pending_approval":
            return (
                f"Proposed as {request.id}, awaiting human approval: {request.describe()}. "
                "Tell the engineer it needs their approval; do not claim it has run."
            )
        state = true_state(request)  # refused by a gate or by the reviewer, and why
        return f"{state[:1].upper()}{state[1:]}. Do not propose it again as is."

    return [get_rollout_history, propose_action]
