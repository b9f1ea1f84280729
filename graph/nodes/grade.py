"""`grade`: one rubric grader pass over the latest (trace-verified) answer."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.messages import HumanMessage

from graph.capacity import BudgetExceeded, ModelBusy
from graph.config import GraphLimits
from graph.grader import Grader
from graph.metrics import RUBRIC_VERDICTS
from graph.nodes.agent import Node
from graph.progress import reporter
from graph.rubric import Evaluation, Verdict, decide, revision_feedback
from graph.state import InvestigationState
from graph.steps import StepBudget

log = logging.getLogger(__name__)

OnEvaluation = Callable[[Evaluation], Awaitable[None] | None]


def _expected_criteria(state: InvestigationState, run_id: str) -> list[str]:
    """Criteria the latest usable pass of this run named (coverage for the next pass)."""
    for evaluation in reversed(state.get("rubric_evaluations") or []):
        if evaluation["grading_run_id"] != run_id:
            break
        if evaluation["criteria"] and not evaluation["unverified"]:
            return [str(c["name"]) for c in evaluation["criteria"]]
    return []


def make_grade(
    grader: Grader, limits: GraphLimits, steps: StepBudget, on_evaluation: OnEvaluation | None
) -> Node:
    async def grade(state: InvestigationState) -> dict[str, Any]:
        report = reporter()
        run_id = state.get("rubric_run_id") or "unknown"
        iteration = state.get("rubric_iteration", 0)
        report(
            {"type": "rubric_evaluation_start", "grading_run_id": run_id, "iteration": iteration}
        )
        feedback: str | None = None
        try:
            verdict, unverified = await grader.grade(
                state.get("rubric") or "", state["messages"], _expected_criteria(state, run_id)
            )
            result: Verdict = decide(verdict.result, iteration, limits.rubric_max_iterations)
            if result == "needs_revision" and not steps.room_for(state, "agent"):
                result = "max_iterations_reached"  # no steps left for another draft
            if result == "needs_revision":
                feedback = revision_feedback(verdict)
            explanation = verdict.explanation
            criteria = [c.model_dump(exclude_none=True) for c in verdict.criteria]
        except (ModelBusy, BudgetExceeded):
            raise  # not the grader's failure: the turn waits for capacity, or stops
        except Exception as exc:  # the grader's failure is a verdict, not a crash
            log.warning("rubric grader failed: %s: %s", type(exc).__name__, exc)
            result = "grader_error"
            explanation = f"{type(exc).__name__}: {exc}"
            criteria = []
            unverified = False
        evaluation: Evaluation = {
            "grading_run_id": run_id,
            "iteration": iteration,
            "result": result,
            "explanation": explanation,
            "criteria": criteria,
            "unverified": unverified,
        }
        report({"type": "rubric_evaluation_end", **evaluation})
        RUBRIC_VERDICTS.labels(evaluation["result"]).inc()
        if on_evaluation is not None:
            try:
                pending = on_evaluation(evaluation)
                if pending is not None:
                    await pending
            except Exception:  # an observer must not break the run
                log.exception("on_evaluation callback failed")
        update: dict[str, Any] = {
            "rubric_evaluations": [evaluation],
            "rubric_status": evaluation["result"],
            "rubric_iteration": iteration + 1,
        }
        if feedback is not None:
            update["messages"] = [HumanMessage(feedback, name="rubric_grader")]
            update["rubric_revision_count"] = state.get("rubric_revision_count", 0) + 1
        return update

    return grade
