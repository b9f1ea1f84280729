"""`check_draft`: the trace guard, then the action-claim guard, over the latest draft.

One node, so one step: every step writes a checkpoint to Redis, and the two guards are
deterministic and quick. The claim guard reads the draft as the trace guard left it, and
runs only when the trace guard did not send the draft back.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.nodes.agent import ConfigNode
from graph.nodes.check_action_claims import ClaimGuard
from graph.nodes.verify_traces import TraceGuard
from graph.state import InvestigationState


def make_check_draft(trace_guard: TraceGuard, claim_guard: ClaimGuard) -> ConfigNode:
    async def check_draft(state: InvestigationState, config: RunnableConfig) -> dict[str, Any]:
        traced, draft = await trace_guard(state)
        if draft is None:  # sent back: the next draft is checked from the start
            return traced
        return {**traced, **await claim_guard(draft, state, config)}

    return check_draft
