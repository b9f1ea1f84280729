"""`check_draft`: the trace guard, then the action-claim guard, over the latest draft.

One node, so one step: every step writes a checkpoint to Redis, and the two guards are
deterministic and quick. The claim guard reads the draft as the trace guard left it, and
runs only when the trace guard did not send the draft back. What they made of the draft
(both verdicts and the answer) is one state field, `draft_check`: one write a draft.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from graph.nodes.agent import ConfigNode
from graph.nodes.check_action_claims import ClaimGuard
from graph.nodes.verify_traces import TraceGuard
from graph.state import ClaimVerdict, DraftCheck, InvestigationState


def make_check_draft(trace_guard: TraceGuard, claim_guard: ClaimGuard) -> ConfigNode:
    async def check_draft(state: InvestigationState, config: RunnableConfig) -> dict[str, Any]:
        traces, update, draft = await trace_guard(state)
        claims: ClaimVerdict | None = None
        if draft is not None:  # sent back: the next draft is checked from the start
            claims, claimed, draft = await claim_guard(draft, state, config)
            update = {**update, **claimed}
        check: DraftCheck = {"traces": traces, "claims": claims, "answer": draft}
        return {**update, "draft_check": check}

    return check_draft
