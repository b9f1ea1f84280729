"""The rubric grader's verdicts, as the simulated model returns them."""

from __future__ import annotations

from sandbox import Reply


def verdict(result: str, *criteria: tuple[str, bool, str | None], why: str = "graded") -> Reply:
    """A SubmitVerdict call: `criteria` are (name, passed, gap or None)."""
    listed = [
        {"name": name, "passed": passed, **({"gap": gap} if gap else {})}
        for name, passed, gap in criteria
    ]
    return Reply.call("SubmitVerdict", result=result, explanation=why, criteria=listed)
