"""B9: input tokens per investigation. Every scenario of evals/scenarios run offline (the
reference investigator through the real graph, tools and guards, as `tracegate eval` runs
them), once as configured and once with every tool result of the turn sent whole
(FULL_TOOL_RESULTS=0), the baseline, in the same run.

Tokens are the Gemini simulator's `promptTokenCount`: the whole request's JSON (system
instruction, tool declarations, contents, config) at 4 characters a token, the same count
before and after. Per run: every model call's input tokens, from its usage metadata
(agent, grader and the action judge); the breakdown says where the agent's and the
grader's went, from the requests themselves.

`scripts/with-redis --optional .venv/bin/python -m bench.tokens` writes its section of
BENCHMARKS.md; `make bench` runs it with the rest.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench.harness import write_section
from bot.process.settings import VARIABLES
from evals import run
from evals.spec import load, names
from evals.world import scenario_clock
from sandbox.gemini import GeminiRequest

OUT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
BEGIN, END = "<!-- tokens: begin -->", "<!-- tokens: end -->"
GOAL = 20_000  # issue #37: median input tokens per investigation
# Measured once with this module on main before the cuts (commit 4fc3f35, which has no
# FULL_TOOL_RESULTS): what the figures below are compared with. Kept as text, since that
# code is no longer here to run.
BEFORE_MEDIAN = 30_468
BEFORE_ROW = (
    "| before the cuts (main at 4fc3f35, 2026-12-02) | 30,468 | 31,931 | 21,733–45,022 | 7.2 "
    "| 16/16 | 0 | 1.000 | — |"
)
BEFORE_PARTS = (
    "| before the cuts | agent | 2,465 | 10,005 | 12,316 | 1,101 | 1,504 | 687 |",
    "| before the cuts | grader | 135 | 788 | 0 | 0 | 2,139 | 40 |",
    "| before the cuts | judge | 73 | 0 | 0 | 0 | 612 | 57 |",
)
CUTS = """\
The cuts: tool descriptions rewritten short and sent without the docstrings' line breaks
and indentation (`graph/tools/__init__.py`: `as_declared`); a shorter system prompt and
thread-context preamble; trace summaries without the attributes every workload repeats
(environment, ReplicaSet, a Deployment named as its service) and 3 slowest spans, not 5;
the grader's transcript with tool results cut at 400 characters; in the current turn, a
long tool result sent shortened once FULL_TOOL_RESULTS (2) newer ones follow it (its
headline, failure lines and trace-ID lines; the state keeps it whole). Only the last can
be switched off in the same run; the first row was measured with this module on main."""
ROLES = {run.AGENT: "agent", run.GRADER: "grader", run.JUDGE: "judge"}
PARTS = ("system", "tools", "tool results", "tool calls", "user text", "other")


def _tokens(obj: Any) -> int:
    return -(-len(json.dumps(obj, ensure_ascii=False)) // 4)


def parts(request: GeminiRequest) -> dict[str, int]:
    """One request's tokens by what they carry (as the simulator counts the whole)."""
    body = request.body
    counted: defaultdict[str, int] = defaultdict(int)
    counted["system"] = _tokens(body.get("systemInstruction") or "")
    counted["tools"] = _tokens(body.get("tools") or [])
    for content in request.contents:
        for part in content.get("parts", []):
            kind = (
                "tool results"
                if "functionResponse" in part
                else "tool calls"
                if "functionCall" in part
                else "user text"
                if content.get("role") == "user"
                else "other"
            )
            counted[kind] += _tokens(part)
    counted["other"] += max(0, request.prompt_tokens - sum(counted.values()))
    return dict(counted)


class Requests:
    """The Gemini requests of each run, taken from the simulated world as it closes."""

    def __init__(self) -> None:
        self.runs: list[list[GeminiRequest]] = []
        self._outside = run.outside

    @asynccontextmanager
    async def outside(self, *args: Any, **kwargs: Any) -> AsyncIterator[run.Outside]:
        async with self._outside(*args, **kwargs) as out:
            yield out
            self.runs.append(list(out.gemini.requests) if out.gemini else [])


async def variant(overrides: dict[str, Any] | None, seen: Requests) -> dict[str, Any]:
    now = scenario_clock()
    records: list[run.RunRecord] = []
    breakdown: defaultdict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
    for name in names():
        records.append(await run.run_once(load(name), 1, now, overrides=overrides))
        for request in seen.runs.pop():
            for part, count in parts(request).items():
                breakdown[ROLES.get(request.model, request.model)][part] += count
    n = len(records)
    return {
        # Input only (the goal's figure): each call's promptTokenCount, cached included.
        "tokens": [sum(u.input for u in r.usage) for r in records],
        "calls": [r.model_calls for r in records],
        "reachable": sum(all(r.reachable.values()) for r in records),
        "harmed": sum(bool(r.harmed) for r in records),
        "score": statistics.fmean(r.score["total"] for r in records),
        "scenarios": n,
        "breakdown": {
            role: {p: round(by.get(p, 0) / n) for p in PARTS} for role, by in breakdown.items()
        },
    }


async def measure() -> str:
    seen = Requests()
    run.outside = seen.outside  # observe the requests; the run itself is unchanged
    try:
        variants = {}
        if "FULL_TOOL_RESULTS" in VARIABLES:
            variants["every result whole (FULL_TOOL_RESULTS=0)"] = await variant(
                {"full_tool_results": 0}, seen
            )
        variants["as configured"] = await variant(None, seen)
    finally:
        run.outside = seen._outside
    baseline = statistics.median(next(iter(variants.values()))["tokens"])
    lines = [
        BEGIN,
        "## Input tokens per investigation (`python -m bench.tokens`)",
        "",
        CUTS,
        "",
        f"Every scenario of `evals/scenarios`, offline, one run each; goal (issue #37): median "
        f"≤ {GOAL:,}. Tokens: the simulator's count of the whole request (4 characters a "
        "token), every model call of the run (agent, grader, action judge).",
        "",
        "| variant | median tokens | mean | min–max | agent calls (mean) | reachable | harmed "
        "| mean score | median vs baseline |",
        "|---|---|---|---|---|---|---|---|---|",
        BEFORE_ROW,
    ]
    for label, v in variants.items():
        t = v["tokens"]
        lines.append(
            f"| {label} | {statistics.median(t):,.0f} | {statistics.fmean(t):,.0f} | "
            f"{min(t):,}–{max(t):,} | {statistics.fmean(v['calls']):.1f} | "
            f"{v['reachable']}/{v['scenarios']} | {v['harmed']} | {v['score']:.3f} | "
            f"{statistics.median(t) / baseline:.2f}× "
            f"({statistics.median(t) / BEFORE_MEDIAN:.2f}× of before) |"
        )
    lines += [
        "",
        "Where they go, per investigation (mean tokens):",
        "",
        "| variant | call | " + " | ".join(PARTS) + " |",
        "|---|---|" + "---|" * len(PARTS),
        *BEFORE_PARTS,
    ]
    for label, v in variants.items():
        for role, by in sorted(v["breakdown"].items()):
            lines.append(f"| {label} | {role} | " + " | ".join(f"{by[p]:,}" for p in PARTS) + " |")
    lines.append(END)
    return "\n".join(lines)


async def main() -> None:
    section = await measure()
    if "--print" not in sys.argv:
        write_section(OUT, BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    asyncio.run(main())
