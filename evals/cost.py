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
from typing import Any

from pydantic import BaseModel

from graph.metrics import MODEL_CALLS, MODEL_TOKENS

PRICES_AS_OF = "late 2025 list prices (ai.google.dev/gemini-api/docs/pricing); estimates"


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

    def usd(self) -> float | None:
        """The estimated price of these tokens; None: a model with no price."""
        price, _ = price_of(self.model)
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


def total(usages: list[Usage]) -> dict[str, Any]:
    """Calls and tokens summed; the price summed over the models with one (None: none)."""
    prices = [u.usd() for u in usages]
    known = [p for p in prices if p is not None]
    return {
        "calls": sum(u.calls for u in usages),
        "input": sum(u.input for u in usages),
        "output": sum(u.output for u in usages),
        "cached": sum(u.cached for u in usages),
        "usd": round(sum(known), 6) if known else None,
    }


def estimate(models: list[str], investigations: int, per_investigation: Usage) -> float | None:
    """The estimated price of `investigations` answered by each of `models`, each as large as
    `per_investigation` (the offline figures' median); None when a model has no price."""
    dollars = 0.0
    for model in models:
        one = per_investigation.model_copy(update={"model": model}).usd()
        if one is None:
            return None
        dollars += one * investigations
    return dollars
