"""The grounding check over the trace-verified draft (the second of `check_draft`'s guards)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import HumanMessage

from graph.config import GraphLimits
from graph.grounding.check import revision_feedback
from graph.grounding.evidence import TEXT, Fact
from graph.grounding.guard import finalise, ground_draft
from graph.grounding.sources import LiveSources
from graph.metrics import GROUNDING, GROUNDING_REMOVED
from graph.progress import reporter
from graph.state import Checked, GroundingVerdict, InvestigationState
from graph.steps import StepBudget

MAX_LISTED = 40  # claims listed in one Steps event

# (the trace-verified draft, the state, facts the trace guard just read) -> `Checked`
GroundingGuard = Callable[
    [str, InvestigationState, list[Fact]], Awaitable[Checked[GroundingVerdict]]
]


def _finished(verdict: GroundingVerdict) -> dict[str, Any]:
    """The check as a Steps event: the counts, and each claim with its source or why not."""
    counts = Counter(c["status"] for c in verdict["checks"])
    seen = sum(c["status"] == "grounded" and c.get("basis") == TEXT for c in verdict["checks"])
    return {
        "type": "grounding_finished",
        "checked": len(verdict["checks"]),
        "grounded": counts["grounded"] - seen,
        "seen_in_text": seen,
        "ungrounded": counts["ungrounded"],
        "unchecked": counts["unchecked"],
        "outcome": verdict["outcome"],
        "claims": verdict["checks"][:MAX_LISTED],
    }


def make_grounding_guard(
    sources: LiveSources | None, limits: GraphLimits, steps: StepBudget
) -> GroundingGuard:
    async def check_grounding(
        draft: str, state: InvestigationState, fresh: list[Fact]
    ) -> Checked[GroundingVerdict]:
        report = reporter()
        report({"type": "grounding_started"})
        evidence = [*(state.get("evidence") or []), *fresh]
        claims, checks = await ground_draft(
            draft, evidence, sources, limits.grounding_time_tolerance_s
        )
        for check in checks:
            GROUNDING.labels(check["kind"], check["status"]).inc()
        ungrounded = [c for c in checks if c["status"] == "ungrounded"]
        revisions = state.get("grounding_revision_count", 0)
        update: dict[str, Any] = {}
        answer: str | None = None  # None: sent back for revision
        removed = marked = 0
        if ungrounded and steps.room_for_revision(state, revisions, limits.grounding_max_revisions):
            feedback = HumanMessage(revision_feedback(claims, checks), name="grounding_check")
            update = {"grounding_revision_count": revisions + 1, "messages": [feedback]}
        else:
            answer, removed, marked = finalise(draft, claims, checks, limits.grounding_mode)
            GROUNDING_REMOVED.inc(removed)
        verdict = GroundingVerdict(outcome="revise", checks=checks, removed=removed, marked=marked)
        if answer is not None:
            verdict["outcome"] = "removed" if removed else "marked" if marked else "grounded"
        report(_finished(verdict))
        return verdict, update, answer

    return check_grounding
