"""Rubric semantics as plain functions: verdict checks, the cap, the feedback."""

import pytest
from pydantic import ValidationError

from graph.config import GraphLimits
from graph.rubric import (
    DEFAULT_RUBRIC,
    GraderVerdict,
    criteria_of,
    decide,
    missing_criteria,
    revision_feedback,
)


def test_a_rubric_is_a_newline_separated_checklist() -> None:
    assert criteria_of("- cause stated\n\n* evidence cited\n  says what was not checked") == [
        "cause stated",
        "evidence cited",
        "says what was not checked",
    ]


def test_the_default_rubric_covers_cause_evidence_actions_and_gaps() -> None:
    items = " ".join(criteria_of(DEFAULT_RUBRIC)).lower()
    for topic in ("root cause", "confidence", "tool result", "roll it back", "not checked"):
        assert topic in items


def test_satisfied_with_a_failing_criterion_is_inconsistent() -> None:
    with pytest.raises(ValidationError, match="result is satisfied but cause failed"):
        GraderVerdict.model_validate(
            {
                "result": "satisfied",
                "explanation": "ok",
                "criteria": [{"name": "cause", "passed": False, "gap": "no cause"}],
            }
        )


def test_needs_revision_with_every_criterion_passing_is_inconsistent() -> None:
    with pytest.raises(ValidationError, match="every criterion passed"):
        GraderVerdict.model_validate(
            {
                "result": "needs_revision",
                "explanation": "x",
                "criteria": [{"name": "a", "passed": True}],
            }
        )


def test_a_failing_criterion_needs_a_gap() -> None:
    with pytest.raises(ValidationError, match="failed without a gap"):
        GraderVerdict.model_validate(
            {
                "result": "needs_revision",
                "explanation": "x",
                "criteria": [{"name": "a", "passed": False}],
            }
        )


def test_needs_revision_on_the_last_allowed_pass_is_max_iterations_reached() -> None:
    assert [decide("needs_revision", i, 3) for i in range(3)] == [
        "needs_revision",
        "needs_revision",
        "max_iterations_reached",
    ]
    assert decide("satisfied", 2, 3) == "satisfied"
    assert decide("failed", 0, 3) == "failed"


def test_dropped_criteria_are_found_case_insensitively() -> None:
    verdict = GraderVerdict.model_validate(
        {"result": "satisfied", "explanation": "x", "criteria": [{"name": "Cause", "passed": True}]}
    )
    assert missing_criteria(verdict, ["cause", "evidence"]) == ["evidence"]


def test_feedback_lists_gaps_then_what_not_to_regress_then_the_instruction() -> None:
    verdict = GraderVerdict.model_validate(
        {
            "result": "needs_revision",
            "explanation": "The cause is unsupported.",
            "criteria": [
                {"name": "cause stated", "passed": True},
                {"name": "evidence cited", "passed": False, "gap": "cite the failing trace"},
            ],
        }
    )
    assert revision_feedback(verdict) == (
        "[rubric grader] Your answer needs revision.\n\n"
        "The cause is unsupported.\n\n"
        "Criteria that still need work:\n"
        "- evidence cited: cite the failing trace\n\n"
        "Criteria already satisfied (do not regress these):\n"
        "- cause stated\n\n"
        "Address every failing criterion, then answer again."
    )


@pytest.mark.parametrize("bad", [0, -1, 1.5, "three", True])
def test_rubric_max_iterations_must_be_a_whole_number_of_at_least_1(bad: object) -> None:
    with pytest.raises(ValidationError, match="rubric_max_iterations"):
        GraphLimits(rubric_max_iterations=bad)  # type: ignore[arg-type]
