"""The investigation state: what one Slack thread's LangGraph thread carries between steps.

Per-turn fields (`tool_calls_used`, `trace_revision_count`, `draft_check`, `stop_reason`, ...)
are reset by the runner's input at the start of every turn; `messages` and
`known_traces` accumulate for the life of the thread.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, NotRequired, TypedDict, TypeVar

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps

from graph.charts import ChartData, keep_charts
from graph.grounding.check import ClaimCheck
from graph.grounding.evidence import Fact, merge_evidence
from graph.rubric import Evaluation, Verdict

TraceStatus = Literal["found", "missing", "unverified"]
StopReason = Literal["tool_budget", "step_limit"]


class TraceCheck(TypedDict):
    status: TraceStatus
    detail: str


class TraceVerdict(TypedDict):
    """The trace guard's judgement of the latest draft."""

    outcome: Literal["verified", "revise", "removed"]
    checks: dict[str, TraceCheck]  # normalised id -> result, for every id in the draft
    removed: int  # occurrences removed from the posted answer


class ClaimVerdict(TypedDict):
    """The action-claim guard's judgement of the latest (trace-verified) draft."""

    outcome: Literal["clear", "revise", "removed"]
    false_claims: list[str]  # sentences claiming an approval or execution the records lack
    removed: int  # sentences removed from the posted answer


class GroundingVerdict(TypedDict):
    """The grounding check's judgement of the latest (trace-verified) draft."""

    outcome: Literal["grounded", "revise", "removed", "marked"]
    checks: list[ClaimCheck]  # every claim of the draft, in order
    removed: int  # ungrounded claims whose sentences were cut from the posted answer
    marked: int  # claims marked (unverified) or (unchecked) in place


class DraftCheck(TypedDict):
    """What `check_draft` made of the latest draft: one field, so one write a draft."""

    traces: TraceVerdict
    grounding: NotRequired[GroundingVerdict | None]  # None: an earlier guard sent it back
    claims: ClaimVerdict | None  # None: not checked, an earlier guard sent the draft back
    answer: str | None  # the draft as both guards left it; None: sent back to the agent


V = TypeVar("V")
# What each of `check_draft`'s guards returns: its verdict, the rest of the state update, and
# the draft as the guard leaves it (None: sent back for revision).
Checked = tuple[V, dict[str, Any], str | None]


def merge_known(left: dict[str, str] | None, right: dict[str, str] | None) -> dict[str, str]:
    return {**(left or {}), **(right or {})}


class InvestigationState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    tool_calls_used: int
    stop_reason: StopReason | None
    # Trace IDs Tempo confirmed in this thread (normalised id -> "found"): not re-checked.
    known_traces: Annotated[dict[str, str], merge_known]
    draft_check: DraftCheck | None
    trace_revision_count: int
    grounding_revision_count: int
    claim_revision_count: int
    # What tool results, the thread and live look-ups showed (graph/grounding/evidence.py):
    # values by kind with their sources, for the life of the thread.
    evidence: Annotated[list[Fact], merge_evidence]
    # This turn's range-query series and fetched traces, bounded (graph/charts.py): what
    # the charts under the answer are drawn from. Reset at the start of every turn.
    charts: Annotated[list[ChartData], keep_charts]
    # Rubric grading. `rubric` is sticky: it stays active for later turns of the thread.
    rubric: str | None
    rubric_run_id: str | None  # one grading run per turn graded
    rubric_iteration: int  # grader passes in the current run
    rubric_status: Verdict | None  # the current run's verdict
    rubric_evaluations: Annotated[list[Evaluation], operator.add]  # every pass, every run
    rubric_revision_count: int
    # Earlier turns folded out of the model's context (graph/history.py): one line each,
    # newest last, bounded; and how many turns were folded in all.
    history_summary: list[str] | None
    summarised_turns: int
    # When the thread's alert started (epoch seconds): anchors the default search window.
    incident_start: float | None
    remaining_steps: RemainingSteps
