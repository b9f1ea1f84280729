"""Rubric grading semantics (those of deepagents' RubricMiddleware), as plain functions.

A rubric is a newline-separated checklist. The grader answers with a verdict
`{result, explanation, criteria: [{name, passed, gap?}]}`; this module checks it, decides
the run's verdict and writes the feedback that sends the agent back.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator
from typing_extensions import TypedDict  # pydantic needs it on Python 3.11

DEFAULT_RUBRIC = """\
- The likely root cause is stated, with a confidence level
- Every claim is backed by a tool result (a trace, a search or the rollout history)
- Every trace ID cited comes from a tool result
- Any proposed action has a reason and a way to roll it back
- The answer says what was not checked"""

GraderResult = Literal["satisfied", "needs_revision", "failed"]
Verdict = Literal["satisfied", "needs_revision", "max_iterations_reached", "failed", "grader_error"]


class Criterion(BaseModel):
    name: str = Field(description="the checklist item, as written in the rubric")
    passed: bool
    gap: str | None = Field(
        default=None, description="when not passed: what is missing, and the evidence needed"
    )

    @model_validator(mode="after")
    def _gap_when_failing(self) -> Criterion:
        if not self.passed and not (self.gap and self.gap.strip()):
            raise ValueError(f"criterion {self.name!r} failed without a gap")
        return self


class GraderVerdict(BaseModel):
    """What the grader submits."""

    result: GraderResult = Field(
        description="satisfied: every criterion passes; needs_revision: at least one fails; "
        "failed: the rubric cannot be assessed against this transcript"
    )
    explanation: str
    criteria: list[Criterion] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> GraderVerdict:
        failing = [c for c in self.criteria if not c.passed]
        if self.result == "satisfied" and failing:
            raise ValueError(f"result is satisfied but {', '.join(c.name for c in failing)} failed")
        if self.result == "needs_revision" and self.criteria and not failing:
            raise ValueError("result is needs_revision but every criterion passed")
        return self


class Evaluation(TypedDict):
    """One grader pass, as stored in the checkpoint and sent to `on_evaluation`."""

    grading_run_id: str
    iteration: int  # 0-based
    result: Verdict
    explanation: str
    criteria: list[dict[str, object]]
    unverified: bool


def criteria_of(rubric: str) -> list[str]:
    """The checklist items of a rubric, without bullets."""
    items = (line.strip().lstrip("-*•").strip() for line in rubric.splitlines())
    return [item for item in items if item]


def missing_criteria(verdict: GraderVerdict, expected: list[str]) -> list[str]:
    """Criteria named by an earlier usable pass that this verdict dropped."""
    named = {c.name.strip().lower() for c in verdict.criteria}
    return [name for name in expected if name.strip().lower() not in named]


def decide(result: GraderResult, iteration: int, max_iterations: int) -> Verdict:
    """The run's verdict after pass `iteration` (0-based) of at most `max_iterations`."""
    if result == "needs_revision" and iteration + 1 >= max_iterations:
        return "max_iterations_reached"
    return result


def revision_feedback(verdict: GraderVerdict) -> str:
    """The user-role message that sends the agent back with specific work."""
    failing = [c for c in verdict.criteria if not c.passed]
    passing = [c for c in verdict.criteria if c.passed]
    lines = ["[rubric grader] Your answer needs revision.", "", verdict.explanation.strip()]
    if failing:
        lines += ["", "Criteria that still need work:"]
        lines += [f"- {c.name}: {c.gap}" for c in failing]
    if passing:
        lines += ["", "Criteria already satisfied (do not regress these):"]
        lines += [f"- {c.name}" for c in passing]
    lines += ["", "Address every failing criterion, then answer again."]
    return "\n".join(lines)
