"""What one investigation turn returns, and a thread's rubric report: plain data for the bot."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from graph.rubric import Evaluation

Status = Literal["answered", "incomplete", "rejected", "failed"]


class InvestigationResult(BaseModel):
    thread_id: str
    status: Status
    answer: str
    notices: list[str] = Field(default_factory=list)
    stop_reason: str | None = None
    tool_calls: int = 0
    verified_trace_ids: list[str] = Field(default_factory=list)
    unverified_trace_ids: list[str] = Field(default_factory=list)
    removed_trace_ids: list[str] = Field(default_factory=list)
    trace_revisions: int = 0
    # The grounding check of the posted answer: its facts (versions, pods, revisions, ...)
    facts_checked: int = 0
    facts_grounded: int = 0  # by a record: a span's resource, the rollout history, a pod
    facts_seen_in_text: int = 0  # only in a message, a log line or an event's message
    facts_unchecked: int = 0  # their source could not be reached: marked (unchecked)
    facts_removed: int = 0  # ungrounded, cut with their sentence (GROUNDING_MODE=remove)
    facts_marked: int = 0  # marked (unverified) or (unchecked) in place
    grounding_revisions: int = 0  # drafts sent back for ungrounded facts
    # where the grounded facts can be seen again: Grafana Explore links, kubectl commands
    sources: list[dict[str, str]] = Field(default_factory=list)  # {where, label}
    claim_revisions: int = 0  # drafts sent back for claiming an action outcome
    removed_claims: list[str] = Field(default_factory=list)  # sentences cut from the answer
    rubric_status: str | None = None  # this turn's grading verdict; None: not graded
    rubric_passes: int = 0
    rubric_revisions: int = 0
    # Actions the agent proposed this turn (pending approval or refused), for the bot's cards.
    action_request_ids: list[str] = Field(default_factory=list)
    # What to draw under the answer (graph/charts.py ChartSpec): tool data and markers only.
    charts: list[dict[str, Any]] = Field(default_factory=list)
    duration_s: float = 0.0
    # The model that wrote the answer (provider:model): LLM_FALLBACK_MODEL's when it stood
    # in; None when no model call answered (or the model was not taken through a guard).
    model: str | None = None
    correlation_id: str
    events: list[dict[str, Any]] = Field(default_factory=list)


class RubricReport(BaseModel):
    """A thread's rubric grading, as `/rubric status` shows it."""

    thread_id: str
    rubric: str | None
    status: str | None
    grading_run_id: str | None
    iterations: int
    max_iterations: int
    evaluations: list[Evaluation] = Field(default_factory=list)  # every run, oldest first
