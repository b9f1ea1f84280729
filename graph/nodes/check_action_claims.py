"""The action-claim guard over the trace-verified draft (the second half of `check_draft`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from gates.store import ActionStore
from graph.action_claims import remove_claims, revision_feedback, unsupported_claims
from graph.config import GraphLimits
from graph.progress import reporter
from graph.state import Checked, ClaimVerdict, InvestigationState
from graph.steps import StepBudget

# (the trace-verified draft, the state, the run's config) -> `Checked`
ClaimGuard = Callable[[str, InvestigationState, RunnableConfig], Awaitable[Checked[ClaimVerdict]]]


def make_claim_guard(
    records: ActionStore | None, limits: GraphLimits, steps: StepBudget
) -> ClaimGuard:
    """`records` is where proposals are stored; None: this bot cannot act, so no claim holds."""

    async def check_action_claims(
        draft: str, state: InvestigationState, config: RunnableConfig
    ) -> Checked[ClaimVerdict]:
        # Proposals are filed under the LangGraph thread id (see propose_action).
        thread_key = str((config.get("configurable") or {}).get("thread_id", ""))
        requests = await records.for_thread(thread_key) if records is not None else []
        false_claims = unsupported_claims(draft, requests)
        reporter()({"type": "claims_checked", "unsupported": len(false_claims)})
        sentences = [c.sentence for c in false_claims]
        revisions = state.get("claim_revision_count", 0)
        if false_claims and steps.room_for_revision(state, revisions, limits.claim_max_revisions):
            verdict: ClaimVerdict = {"outcome": "revise", "false_claims": sentences, "removed": 0}
            feedback = revision_feedback(false_claims, requests)
            message = HumanMessage(feedback, name="action_claim_guard")
            return verdict, {"claim_revision_count": revisions + 1, "messages": [message]}, None
        answer, removed = remove_claims(draft, false_claims)
        verdict = {
            "outcome": "removed" if removed else "clear",
            "false_claims": sentences,
            "removed": removed,
        }
        return verdict, {}, answer

    return check_action_claims
