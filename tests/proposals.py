"""Proposals the action tests make: as the simulated model's `propose_action` call, or
straight to the action pipeline."""

from __future__ import annotations

from typing import Any

from gates.model import ActionRequest
from gates.pipeline import ActionPipeline
from sandbox import Reply
from tests.gates_fixtures import REQUESTER

ROLLBACK_REASON = "5xx started with revision 3 (1.42.0)"


def propose(
    action: str, namespace: str = "shop", deployment: str = "payment-api", **args: Any
) -> Reply:
    """The agent calls the propose_action tool (for shop/payment-api unless told otherwise)."""
    return Reply.call(
        "propose_action", action=action, namespace=namespace, deployment=deployment, **args
    )


# The rollback the approval tests click on: revision 3 (1.42.0) back to 2, then the answer.
ROLLBACK = propose("rollout_undo", reason=ROLLBACK_REASON)
ROLLBACK_PROPOSED = Reply.text("I proposed rolling payment-api back; it needs your approval.")
SCALE_UP = propose("scale", replicas=6, reason="saturation")


async def propose_rollback(pipeline: ActionPipeline, **overrides: Any) -> ActionRequest:
    """The on-call engineer's rollback of shop/payment-api through the gates (overrides
    change it); the judge says whatever the test scripted."""
    args: dict[str, Any] = {
        "action": "rollout_undo",
        "namespace": "shop",
        "deployment": "payment-api",
        "thread_key": "T1:C1:1700000000.000100",
        "requester": REQUESTER,
        "reason": ROLLBACK_REASON,
    }
    args.update(overrides)
    return await pipeline.propose(**args)
