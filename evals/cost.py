"""What an answer costs: model calls and tokens per model and role, as the responses'
usage metadata reported them (`promptTokenCount`, `candidatesTokenCount`,
`cachedContentTokenCount`, counted by graph.metrics' ModelUsage), and an estimated price.

PRICES are ESTIMATES: the Gemini API's paid-tier list prices in USD per million tokens for
prompts up to 200k tokens, from https://ai.google.dev/gemini-api/docs/pricing as published in
late 2025 (read 2026-12-02 from the project's notes; not checked against the page since).
Cached input is billed at the cached rate instead of the input rate; storage of explicit
caches is not counted (implicit caching has none). A model missing from the table is priced
by its family (pro, flash-lite, flash) and marked so; update the table when prices change.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from graph.config import ModelSpec
from graph.metrics import MODEL_CALLS, MODEL_TOKENS

PRICES_AS_OF = "late 2025 list prices (ai.google.dev/gemini-api/docs/pricing); estimates"
# Offline runs priced as the model tracegate runs by default (LLM_MODEL's default).
OFFLINE_PRICED_AS = ModelSpec().model


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cached: float


PRICES: dict[str, Price] = {
    "gemini-3-pro-preview": Price(2.00, 12.00, 0.20),
    "gemini-2.5-pro": Price(1.25, 10.00, 0.125),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.03),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.01),
    "gemini-2.0-flash": Price(0.10, 0.40, 0.025),
}
# The newest known price of each family, for models the table does not name (checked in
# this order: "flash-lite" before "flash").
FAMILIES: list[tuple[str, str]] = [
    ("flash-lite", "gemini-2.5-flash-lite"),
    ("flash", "gemini-2.5-flash"),
    ("pro", "gemini-3-pro-preview"),
]


def price_of(model: str) -> tuple[Price | None, str]:
    """The price of `model` ("provider:name" or "name") and what it was taken from: the
    table's row, "<row> (family estimate)", or "" when nothing fits."""
    name = model.rpartition(":")[2].removeprefix("models/")
    if name in PRICES:
        return PRICES[name], name
    for family, row in FAMILIES:
        if family in name:
            return PRICES[row], f"{row} (family estimate)"
    return None, ""


class Usage(BaseModel):
    """One model in one role over a run (or a sum of runs)."""

    model: str
    role: str  # agent | grader | judge
    calls: int = 0
    input: int = 0  # promptTokenCount, cached tokens included (as Gemini counts them)
    output: int = 0
    cached: int = 0  # the part of the input served from the cache

    def usd(self, as_model: str | None = None) -> float | None:
        """The estimated price of these tokens (as if `as_model` had answered, when given);
        None: a model with no price."""
        price, _ = price_of(as_model or self.model)
        if price is None:
            return None
        fresh = max(self.input - self.cached, 0)
        return (fresh * price.input + self.cached * price.cached + self.output * price.output) / 1e6


Snapshot = dict[tuple[str, str], dict[str, float]]


def snapshot() -> Snapshot:
    """The process's model counters now: (model, role) -> calls, input, output, cached."""
    taken: Snapshot = {}
    for metric, kind in ((MODEL_CALLS, "calls"), (MODEL_TOKENS, None)):
        for family in metric.collect():
            for sample in family.samples:
                if not sample.name.endswith("_total"):
                    continue
                labels = sample.labels
                key = (labels["model"], labels["role"])
                taken.setdefault(key, {})[kind or labels["direction"]] = sample.value
    return taken


def spent(before: Snapshot, after: Snapshot) -> list[Usage]:
    """What moved between two snapshots (one run: runs are one after another)."""
    used = []
    for key in sorted(after):
        was = before.get(key, {})
        moved = {k: int(v - was.get(k, 0)) for k, v in after[key].items()}
        if any(moved.values()):
            used.append(
                Usage(
                    model=key[0],
                    role=key[1],
                    calls=moved.get("calls", 0),
                    input=moved.get("input", 0),
                    output=moved.get("output", 0),
                    cached=moved.get("cached", 0),
                )
            )
    return used


def total(usages: list[Usage], as_model: str | None = None) -> dict[str, Any]:
    """Calls and tokens summed; the price summed over the models with one (None: none),
    every call priced as `as_model` when given (offline runs: the simulator's models have
    no price, the model they stand in for has)."""
    prices = [u.usd(as_model) for u in usages]
    known = [p for p in prices if p is not None]
    return {
        "calls": sum(u.calls for u in usages),
        "input": sum(u.input for u in usages),
        "output": sum(u.output for u in usages),
        "cached": sum(u.cached for u in usages),
        "usd": round(sum(known), 6) if known else None,
    }


# One investigation by role, as `make eval` measured it offline on 2026-12-02 (the median
# scenario of 30, before the token reduction of issue #37): used when no report is at hand.
TYPICAL: dict[str, Usage] = {
    "agent": Usage(model="", role="agent", calls=7, input=25_000, output=350, cached=19_000),
    "grader": Usage(model="", role="grader", calls=1, input=3_100, output=1),
    "judge": Usage(model="", role="judge", calls=1, input=2_200, output=1),
}


def per_investigation(reports: Path) -> tuple[dict[str, Usage], str]:
    """One investigation's usage by role: the median run of the newest offline report in
    `reports`, or TYPICAL; and which it is."""
    import statistics

    from evals.report import Report, ReportError

    newest = sorted(reports.glob("eval-offline-*.json"))[-1:] if reports.is_dir() else []
    try:
        report = Report.read(newest[0]) if newest else None
    except ReportError:
        report = None
    if report is None or not report.records:
        return TYPICAL, "the offline figures of 2026-12-02 (cost.TYPICAL)"
    out: dict[str, Usage] = {}
    for role in ("agent", "grader", "judge"):
        runs = [[u for u in r.usage if u.role == role] for r in report.records]
        if not any(runs):
            continue
        out[role] = Usage(
            model="",
            role=role,
            **{
                kind: round(statistics.median(sum(getattr(u, kind) for u in used) for used in runs))
                for kind in ("calls", "input", "output", "cached")
            },
        )
    return out or TYPICAL, f"the median run of {newest[0].name}"
