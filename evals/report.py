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

from evals import cost
from evals.run import RunRecord, summarise
from evals.score import GRADES


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
        spent = [cost.total(r.usage, self.priced_as) for r in records]
        prices = [t["usd"] for t in spent]
        return {
            "scenarios": len(self.rows),
            "score": round(statistics.fmean(r["score"] for r in rows), 3) if rows else 0.0,
            "root_cause_f1": round(statistics.fmean(r["f1"] for r in rows), 3) if rows else 0.0,
            "right_action": sum(r.score["action_right"] for r in records),
            "wrong_action": sum(r.score["wrong_action"] for r in records),
            "refused": sum(r.score.get("refused", 0) for r in records),
            "grades": {g: sum(r.score.get("grade") == g for r in records) for g in GRADES},
            "reachable": sum(bool(r["reachable"]) for r in rows),
            "harmed": sum(r["harmed"] for r in rows),
            "runs": len(records),
            "failed": sum(r.status != "answered" for r in records),
            "calls": sum(t["calls"] for t in spent),
            "input": sum(t["input"] for t in spent),
            "output": sum(t["output"] for t in spent),
            "cached": sum(t["cached"] for t in spent),
            "median_input": round(statistics.median(t["input"] for t in spent)) if spent else 0,
            "max_input": max((t["input"] for t in spent), default=0),
            "usd": None if None in prices or not prices else round(sum(prices), 4),
        }

    @property
    def priced_as(self) -> str | None:
        """Offline runs are priced as the default model; live ones as the models that ran."""
        return cost.OFFLINE_PRICED_AS if self.mode == "offline" else None

    def over(self, max_tokens: int) -> list[RunRecord]:
        """The runs whose input and output tokens (every model call) went past `max_tokens`."""
        return [r for r in self.records if _tokens(r) > max_tokens]


def _tokens(record: RunRecord) -> int:
    spent = cost.total(record.usage)
    return int(spent["input"] + spent["output"])


def _yes(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "**no**")


def _usd(value: float | None) -> str:
    return "–" if value is None else f"${value:.4f}"


def markdown(report: Report) -> str:
    t = report.totals()
    grades = ", ".join(f"{g} {n}" for g, n in t["grades"].items())
    lines = [
        f"- when: {report.date}; mode: **{report.mode}**; model: `{report.model}`; "
        f"{report.runs_per_scenario} run(s) per scenario",
    ]
    if report.mode == "offline":
        lines.append(
            f"- **reachability**: the truth's evidence came out of the tools in "
            f"{t['reachable']}/{t['scenarios']} scenarios; **harm**: correct answers a guard "
            f"made worse: {t['harmed']} (`make eval` fails on either, or a crash; a score "
            "below 1.0 is a result)"
        )
    lines += [
        f"- responder scale: {grades}",
        f"- mean score {t['score']:.3f}, root-cause F1 {t['root_cause_f1']:.3f}; "
        f"right action {t['right_action']}/{t['runs']}, refused by the gates {t['refused']}, "
        f"harmful proposals {t['wrong_action']}; runs not answered {t['failed']}",
        f"- cost: {t['calls']} model calls, {t['input']} input tokens ({t['cached']} of them "
        f"cached), {t['output']} output; median input per investigation "
        f"{t['median_input']}, largest {t['max_input']}; estimated {_usd(t['usd'])} in all "
        f"(prices: {cost.PRICES_AS_OF})",
        "",
        "| scenario | reachable | harmed | scale grade | score (± sd) | root-cause F1 | chain "
        "| right action | refused | harmful | invented | tool calls | model calls | input "
        "tokens (± sd) | output | cached | est. cost | latency |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in sorted(report.rows.items()):
        lines.append(
            f"| {name} | {_yes(r['reachable'])} | {r['harmed'] or 0} | {r['grade']} "
            f"| {r['score']:.2f} ± {r['stdev']:.2f} | {r['f1']:.2f} | {r['chain']:.2f} "
            f"| {r['action_right']}/{r['runs']} | {r['refused']} | {r['wrong_action']} "
            f"| {r['invented']} | {r['tool_calls']:g} | {r['calls']} "
            f"| {r['input']} ± {r['input_sd']} | {r['output']} | {r['cached']} "
            f"| {_usd(r['usd'])} | {r['latency_s']:.2f} s |"
        )
    short = [r for r in report.records if r.score["total"] < 1.0]
    if short:
        lines += ["", "Where the answer fell short, and what it went by:", ""]
        for record in sorted(short, key=lambda r: (r.scenario, r.run)):
            graded = record.score
            named = ", ".join(f"`{n}`" for n in graded.get("named", [])) or "no cause"
            said = "said nothing is wrong" if graded.get("nothing_wrong") else f"named {named}"
            why = f"; reasoning: {record.reasoning}" if record.reasoning else ""
            lines.append(
                f"- {record.scenario} (run {record.run}): {said} — {graded.get('grade', '?')}, "
                f"score {graded['total']:.2f}{why}"
            )
    lines += ["", *_price_table(report)]
    return "\n".join(lines)


def _price_table(report: Report) -> list[str]:
    """The estimated price of the median investigation and of the whole run, per model of
    the price table (offline: had that model answered every call; live: as run)."""
    spent = [r.usage for r in report.records]
    if not any(spent):
        return []
    if report.mode == "live":
        models = sorted({u.model for used in spent for u in used})
        priced = [f"`{m}`: {cost.price_of(m)[1] or 'no price'}" for m in models]
        return ["Prices used (estimates): " + "; ".join(priced) + "."]
    lines = [
        f"Estimated price per model (USD; {cost.PRICES_AS_OF}), had that model answered every "
        f"call; the table above is priced as `{cost.OFFLINE_PRICED_AS}` "
        f"({cost.price_of(cost.OFFLINE_PRICED_AS)[1] or 'no price'}):",
        "",
        "| model | input / cached / output per 1M | median investigation | all runs |",
        "|---|---|---|---|",
    ]
    for model, price in cost.PRICES.items():
        each = [cost.total(used, model)["usd"] or 0.0 for used in spent]
        lines.append(
            f"| {model} | ${price.input:g} / ${price.cached:g} / ${price.output:g} "
            f"| ${statistics.median(each):.4f} | ${sum(each):.4f} |"
        )
    return lines


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
    """Put the report's table into its mode's section of EVALS.md, leaving the other's.
    Offline figures replace the offline section; a live run is kept per model and date
    (a later run of the same model on the same day replaces it, others stay)."""
    text = path.read_text() if path.exists() else _skeleton()
    begin, end = f"<!-- evals:{report.mode}:begin -->", f"<!-- evals:{report.mode}:end -->"
    if begin not in text or end not in text:
        text = _skeleton()
    pattern = re.compile(re.escape(begin) + r"(.*?)" + re.escape(end), re.DOTALL)
    if report.mode == "live":
        found = pattern.search(text)
        body = _live_runs(found[1] if found else "", report)
    else:
        body = markdown(report)
    text = pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text)
    path.write_text(text)


_LIVE_RUN = re.compile(r"<!-- live:(?P<key>[^ ]+) -->\n.*?<!-- /live -->", re.DOTALL)


def _live_runs(section: str, report: Report) -> str:
    """The live section's runs, one block per model and day, this report's in its place."""
    key = f"{report.model}@{report.date[:10]}"
    block = (
        f"<!-- live:{key} -->\n### `{report.model}` — {report.date[:10]}\n\n"
        f"{markdown(report)}\n<!-- /live -->"
    )
    blocks = {m["key"]: m[0] for m in _LIVE_RUN.finditer(section)}
    blocks[key] = block
    return "\n\n".join(blocks[k] for k in sorted(blocks))


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
