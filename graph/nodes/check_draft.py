"""`check_draft`: the trace guard, then the action-claim guard, over the latest draft.

One node, so one step: every step writes a checkpoint to Redis, and the two guards are
deterministic and quick. The claim guard reads the draft as the trace guard left it, and
runs only when the trace guard did not send the draft back.
"""

from __future__ import annotations

from typing import Any, cast

from langchain_core.runnables import RunnableConfig

from graph.nodes.agent import ConfigNode, Node
from graph.state import InvestigationState


def make_check_draft(trace_guard: Node, claim_guard: ConfigNode) -> ConfigNode:
    async def check_draft(state: InvestigationState, config: RunnableConfig) -> dict[str, Any]:
        traced = await trace_guard(state)
        if traced["trace_verdict"]["outcome"] == "revise":
            return traced
        claimed = await claim_guard(cast(InvestigationState, {**state, **traced}), config)
        return {**traced, **claimed}

    return check_draft
