"""The trace guard over the latest draft (the first half of `check_draft`): deterministic."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

from graph.config import GraphLimits
from graph.metrics import TRACE_GUARD
from graph.progress import reporter
from graph.state import Checked, InvestigationState, TraceCheck, TraceVerdict
from graph.steps import StepBudget
from graph.trace_guard import TraceVerifier, finalise_answer, ids_with, revision_feedback
from graph.trace_ids import find_trace_ids


def _finished(verdict: TraceVerdict) -> dict[str, Any]:
    """The guard's judgement as a Steps event: the missing IDs by name, and what it did."""
    checks = verdict["checks"]
    return {
        "type": "verification_finished",
        "found": len(ids_with(checks, "found")),
        "missing": len(ids_with(checks, "missing")),
        "unverified": len(ids_with(checks, "unverified")),
        "missing_ids": ids_with(checks, "missing"),
        "outcome": verdict["outcome"],  # revise: sent back to the agent; removed: cut out
    }


TraceGuard = Callable[[InvestigationState], Awaitable[Checked[TraceVerdict]]]


def make_trace_guard(verifier: TraceVerifier, limits: GraphLimits, steps: StepBudget) -> TraceGuard:
    async def verify_traces(state: InvestigationState) -> Checked[TraceVerdict]:
        report = reporter()
        draft = next((m.text for m in reversed(state["messages"]) if isinstance(m, AIMessage)), "")
        cited = find_trace_ids(draft)
        known = state.get("known_traces") or {}
        report({"type": "verification_started", "trace_ids": len(cited)})
        checks: dict[str, TraceCheck] = {
            t: {"status": "found", "detail": "confirmed earlier in this thread"}
            for t in cited
            if t in known
        }
        fetched, facts = await verifier.check(t for t in cited if t not in known)
        checks.update(fetched)
        newly_found = {t: "found" for t in ids_with(checks, "found") if t not in known}
        # Written only when Tempo confirmed new IDs: every field written is a document stored.
        # What the cited traces show is evidence for the grounding check that follows.
        update: dict[str, Any] = {"known_traces": newly_found} if newly_found else {}
        if facts:
            update["evidence"] = facts
        missing = ids_with(checks, "missing")
        for check in checks.values():
            TRACE_GUARD.labels(check["status"]).inc()
        revisions = state.get("trace_revision_count", 0)
        answer: str | None = None  # None: sent back for revision
        removed = 0
        if missing and steps.room_for_revision(state, revisions, limits.trace_max_revisions):
            feedback = HumanMessage(revision_feedback(missing), name="trace_guard")
            update |= {"trace_revision_count": revisions + 1, "messages": [feedback]}
        else:
            answer, removed = finalise_answer(draft, checks)
            TRACE_GUARD.labels("removed").inc(removed)
        verdict: TraceVerdict = {
            "outcome": "revise" if answer is None else "removed" if missing else "verified",
            "checks": checks,
            "removed": removed,
        }
        report(_finished(verdict))
        return verdict, update, answer

    return verify_traces
