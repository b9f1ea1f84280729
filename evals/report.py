"""Eval reports: JSON for machines, Markdown for people, and the comparison of two.

A report holds one mode's figures only (offline: the reference investigator; live: one
real model). Comparing reports of different modes is refused: their numbers measure
different things.
"""

from __future__ import annotations

import re
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from evals.run import RunRecord, summarise


class ReportError(ValueError):
    """A report that cannot be read, or two that cannot be compared."""


class Report(BaseModel):
    mode: str  # offline | live
    model: str
    date: str
    runs_per_scenario: int
    records: list[RunRecord]

    @classmethod
    def of(cls, mode: str, model: str, runs: int, records: list[RunRecord]) -> Report:
        date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        return cls(mode=mode, model=model, date=date, runs_per_scenario=runs, records=records)

    @classmethod
    def read(cls, path: Path) -> Report:
        try:
            return cls.model_validate_json(path.read_text())
        except (OSError, ValueError) as exc:
            raise ReportError(f"{path}: not an eval report ({exc})") from exc

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=1) + "\n")

    @property
    def rows(self) -> dict[str, dict[str, Any]]:
        return summarise(self.records)

    def totals(self) -> dict[str, Any]:
        rows = self.rows.values()
        records = self.records
        return {
            "scenarios": len(self.rows),
            "score": round(statistics.fmean(r["score"] for r in rows), 3) if rows else 0.0,
            "root_cause_f1": round(statistics.fmean(r["f1"] for r in rows), 3) if rows else 0.0,
            "right_action": sum(r.score["action_right"] for r in records),
            "wrong_action": sum(r.score["wrong_action"] for r in records),
            "reachable": sum(bool(r["reachable"]) for r in rows),
            "harmed": sum(r["harmed"] for r in rows),
            "runs": len(records),
            "failed": sum(r.status != "answered" for r in records),
        }


def _yes(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "**no**")


def markdown(report: Report) -> str:
    t = report.totals()
    lines = [
        f"- when: {report.date}; mode: **{report.mode}**; model: `{report.model}`; "
        f"{report.runs_per_scenario} run(s) per scenario",
        f"- mean score {t['score']:.3f}, root-cause F1 {t['root_cause_f1']:.3f}; "
        f"right action {t['right_action']}/{t['runs']}, harmful proposals {t['wrong_action']}; "
        f"runs not answered {t['failed']}",
    ]
    if report.mode == "offline":
        lines.append(
            f"- evidence reachable through the tools: {t['reachable']}/{t['scenarios']} "
            f"scenarios; correct answers harmed by a guard: {t['harmed']}"
        )
    lines += [
        "",
        "| scenario | score (± sd) | root-cause F1 | chain | right action | harmful | "
        "invented | tool calls | tokens | latency | reachable | harmed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in sorted(report.rows.items()):
        lines.append(
            f"| {name} | {r['score']:.2f} ± {r['stdev']:.2f} | {r['f1']:.2f} | {r['chain']:.2f} "
            f"| {r['action_right']}/{r['runs']} | {r['wrong_action']} | {r['invented']} "
            f"| {r['tool_calls']:g} | {r['tokens']} | {r['latency_s']:.2f} s "
            f"| {_yes(r['reachable'])} | {r['harmed'] or 0} |"
        )
    return "\n".join(lines)


def compare(before: Report, after: Report) -> str:
    """Per scenario, the score before and after, and what moved."""
    if before.mode != after.mode:
        raise ReportError(
            f"cannot compare a {before.mode} report with a {after.mode} one: offline figures "
            "measure the tools and guards with the reference investigator, live ones a model"
        )
    a, b = before.rows, after.rows
    lines = [
        f"before: {before.date} `{before.model}` · after: {after.date} `{after.model}` "
        f"({before.mode})",
        "",
        "| scenario | before | after | change | F1 before → after | actions right |",
        "|---|---|---|---|---|---|",
    ]
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x is None or y is None:
            lines.append(
                f"| {name} | {'–' if x is None else x['score']} | "
                f"{'–' if y is None else y['score']} | only in one | | |"
            )
            continue
        delta = y["score"] - x["score"]
        mark = "**worse**" if delta < -0.01 else ("better" if delta > 0.01 else "same")
        lines.append(
            f"| {name} | {x['score']:.2f} | {y['score']:.2f} | {delta:+.2f} {mark} "
            f"| {x['f1']:.2f} → {y['f1']:.2f} | {x['action_right']} → {y['action_right']} |"
        )
    tb, ta = before.totals(), after.totals()
    lines.append(
        f"| **mean** | {tb['score']:.3f} | {ta['score']:.3f} | "
        f"{ta['score'] - tb['score']:+.3f} | | |"
    )
    return "\n".join(lines)


LIVE_EMPTY = (
    "No live run on record: live evals need `GOOGLE_API_KEY` (a real Gemini model "
    "investigates and an LLM judge grades). Run `tracegate eval --live --write-evals`."
)


def update_evals_md(path: Path, report: Report) -> None:
    """Put the report's table into its mode's section of EVALS.md, leaving the other's."""
    text = path.read_text() if path.exists() else _skeleton()
    begin, end = f"<!-- evals:{report.mode}:begin -->", f"<!-- evals:{report.mode}:end -->"
    if begin not in text or end not in text:
        text = _skeleton()
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    text = pattern.sub(lambda _: f"{begin}\n{markdown(report)}\n{end}", text)
    path.write_text(text)


def _skeleton() -> str:
    return (
        "# Evals\n\n"
        "How often tracegate's answers find the real cause, scenario by scenario "
        "(docs/evals.md says what each figure means and how to run them).\n\n"
        "## Offline: the reference investigator (`make eval`, in CI)\n\n"
        "<!-- evals:offline:begin -->\n<!-- evals:offline:end -->\n\n"
        "## Live: a real model, graded by the deterministic checks and an LLM judge\n\n"
        f"<!-- evals:live:begin -->\n{LIVE_EMPTY}\n<!-- evals:live:end -->\n"
    )
