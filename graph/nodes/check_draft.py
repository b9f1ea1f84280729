"""`check_draft`: the trace guard, the grounding check, then the action-claim guard, over
the latest draft.

One node, so one step: every step writes a checkpoint to Redis, and the guards are
deterministic and quick. Each guard reads the draft as the one before left it, and runs
only when none before it sent the draft back. What they made of the draft (the verdicts
and the answer) is one state field, `draft_check`: one write a draft.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.nodes.agent import ConfigNode
from graph.nodes.check_action_claims import ClaimGuard
from graph.nodes.check_grounding import GroundingGuard
from graph.nodes.verify_traces import TraceGuard
from graph.state import ClaimVerdict, DraftCheck, GroundingVerdict, InvestigationState


def make_check_draft(
    trace_guard: TraceGuard, grounding_guard: GroundingGuard, claim_guard: ClaimGuard
) -> ConfigNode:
    async def check_draft(state: InvestigationState, config: RunnableConfig) -> dict[str, Any]:
        traces, update, draft = await trace_guard(state)
        grounding: GroundingVerdict | None = None
        claims: ClaimVerdict | None = None
        # A guard that sends the draft back ends the check: the next draft starts afresh.
        if draft is not None:
            read = update.get("evidence", [])  # what the cited traces show
            grounding, grounded, draft = await grounding_guard(draft, state, read)
            update = {**update, **grounded}
        if draft is not None:
            claims, claimed, draft = await claim_guard(draft, state, config)
            update = {**update, **claimed}
        check = DraftCheck(traces=traces, grounding=grounding, claims=claims, answer=draft)
        return {**update, "draft_check": check}

    return check_draft
