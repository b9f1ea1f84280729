"""`tracegate eval`: run scenarios, compare reports (wired into bot/process/cli.py).

Only `add_arguments` is used when every command's parser is built: the simulators and the
scenarios are imported when an eval runs, never by `serve` or `worker`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bot.process.settings import Settings, SettingsError, load_settings

if TYPE_CHECKING:
    from evals.report import Report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        nargs="?",
        choices=("run", "capture"),
        default="run",
        help="run scenarios (default), or capture LINK: an answered Slack thread as a scenario",
    )
    parser.add_argument("link", nargs="?", help="capture: the thread's Slack link")
    parser.add_argument("--name", help="capture: the new scenario's folder name")
    parser.add_argument(
        "--negative",
        action="store_true",
        help="capture: every thread whose answer got a 👎 (instead of one LINK)",
    )
    parser.add_argument(
        "--scenario", action="append", help="run only this scenario (repeatable; default: all)"
    )
    parser.add_argument("--runs", type=int, default=1, help="runs per scenario (default 1)")
    parser.add_argument(
        "--live",
        action="store_true",
        help="a real model investigates (needs GOOGLE_API_KEY, or GOOGLE_GENAI_USE_VERTEXAI)",
    )
    parser.add_argument("--model", help="live: the model to evaluate, e.g. google_genai:gemini-…")
    parser.add_argument(
        "--yes",
        action="store_true",
        help="live: start the run (without it, --live prints the estimated cost and stops)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="fail (exit 1) when a run's input and output tokens, every model call, pass N",
    )
    parser.add_argument("--out", default="eval-reports", help="folder for the JSON report")
    parser.add_argument("--write-evals", action="store_true", help="put the figures into EVALS.md")
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("BEFORE", "AFTER"),
        help="compare two JSON reports instead of running",
    )


def main(args: argparse.Namespace) -> int:
    from evals.report import Report, ReportError, compare, markdown, update_evals_md
    from evals.spec import ScenarioError, names

    if args.action == "capture":
        return _capture(args)
    if args.compare:
        try:
            print(compare(Report.read(Path(args.compare[0])), Report.read(Path(args.compare[1]))))
        except ReportError as exc:
            print(f"tracegate eval: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.runs < 1:
        print("tracegate eval: --runs must be at least 1", file=sys.stderr)
        return 2
    known = names()
    if unknown := [s for s in args.scenario or [] if s not in known]:
        print(
            f"tracegate eval: no scenario {', '.join(map(repr, unknown))}; "
            f"the scenarios are {', '.join(known)}",
            file=sys.stderr,
        )
        return 2
    if args.max_tokens is not None and args.max_tokens < 1:
        print("tracegate eval: --max-tokens must be at least 1", file=sys.stderr)
        return 2
    live: Settings | None = None
    if args.live:
        try:
            live = _live_settings(args.model)
        except SettingsError as exc:
            print(f"tracegate eval: configuration error\n{exc}", file=sys.stderr)
            return 2
        investigations = len(args.scenario or known) * args.runs
        print(live_estimate(live, investigations, Path(args.out)))
        if not args.yes:
            print(
                "tracegate eval: a live run spends real tokens; add --yes to start it",
                file=sys.stderr,
            )
            return 2
    elif args.model:
        print(
            "tracegate eval: --model needs --live (offline runs use the reference investigator)",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    try:
        report = asyncio.run(_run(args.scenario or known, args.runs, live))
    except ScenarioError as exc:
        print(f"tracegate eval: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    path = out / f"eval-{report.mode}-{report.date[:16].replace(' ', 'T').replace(':', '')}.json"
    report.write(path)
    print(markdown(report))
    print(f"\nreport: {path}")
    if args.write_evals:
        update_evals_md(Path("EVALS.md"), report)
        print("EVALS.md updated")
    failing = report.mode == "offline" and (
        report.totals()["harmed"] or report.totals()["reachable"] < report.totals()["scenarios"]
    )
    if args.max_tokens is not None and (over := report.over(args.max_tokens)):
        listed = ", ".join(f"{r.scenario} run {r.run}" for r in over)
        print(f"tracegate eval: over --max-tokens {args.max_tokens}: {listed}", file=sys.stderr)
        failing = True
    return 1 if failing else 0


def live_estimate(live: Settings, investigations: int, reports: Path) -> str:
    """What a live run of `investigations` would cost: each as large as the newest offline
    report's median (in `reports`), or cost.TYPICAL's, priced per model (estimates)."""
    from evals.cost import PRICES_AS_OF, per_investigation, price_of

    typical, basis = per_investigation(reports)
    models = {
        "agent": live.model.model,
        "grader": live.rubric.grader_model or live.model.model,
        "judge": live.kubernetes.judge_model or live.model.model,
    }
    lines = [
        f"live run: {investigations} investigation(s) by `{live.model.model}`; each about "
        f"as large as {basis}:"
    ]
    dollars: float | None = 0.0
    for role, usage in typical.items():
        model = models.get(role, live.model.model)
        one = usage.model_copy(update={"model": model})
        price = one.usd()
        _, row = price_of(model)
        lines.append(
            f"- {role} `{model}`: {one.calls} calls, {one.input} input, {one.output} output "
            f"tokens each; "
            + (
                f"${price * investigations:.4f} ({row})"
                if price is not None
                else "no price known for this model"
            )
        )
        dollars = None if price is None or dollars is None else dollars + price * investigations
    lines.append(
        f"estimated cost: {'unknown' if dollars is None else f'${dollars:.4f}'} "
        f"({PRICES_AS_OF}; a real model's answers differ in size from the reference's)"
    )
    return "\n".join(lines)


def _capture(args: argparse.Namespace) -> int:
    from evals.capture import capture, capture_negative

    if not args.negative and (not args.link or not args.name):
        print(
            "tracegate eval capture: give the thread's link and --name, or --negative",
            file=sys.stderr,
        )
        return 2
    try:
        settings = load_settings()
        if args.negative:
            paths = asyncio.run(capture_negative(settings))
        else:
            paths = [asyncio.run(capture(settings, args.link, args.name))]
    except (SettingsError, ValueError, FileExistsError, LookupError) as exc:
        print(f"tracegate eval capture: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(f"captured: {path}")
    print(
        "write each one's truth (docs/evals.md), then: tracegate eval --scenario <name>"
        if paths
        else "nothing new to capture"
    )
    return 0


def _live_settings(model: str | None) -> Settings:
    """The settings of a real model: an API key, or Vertex AI's project and location."""
    settings = load_settings()
    if problems := settings.missing_model():
        raise SettingsError(
            "live evals need a real Gemini model (GOOGLE_API_KEY, or Vertex AI):\n"
            + "\n".join(problems)
        )
    return (
        settings.model_copy(update={"model": settings.model.model_copy(update={"model": model})})
        if model
        else settings
    )


async def _run(scenarios: list[str], runs: int, live: Settings | None) -> Report:
    from evals.judge import llm_judge
    from evals.report import Report
    from evals.run import AGENT, RunRecord, run_once
    from evals.spec import load
    from evals.world import scenario_clock
    from graph.model import make_chat_model

    now = scenario_clock()  # one scenario clock for the whole run
    redis_url = os.environ.get("REDIS_URL") or None
    judge = None
    if live is not None:
        judge = llm_judge(make_chat_model(live.judge_spec()))
    records: list[RunRecord] = []
    loaded = [load(name) for name in scenarios]  # a scenario that cannot be used stops it here
    for scenario in loaded:
        name = scenario.name
        for run in range(1, runs + 1):
            record = await run_once(scenario, run, now, redis_url=redis_url, live=live, judge=judge)
            records.append(record)
            print(
                f"{name} run {run}: {record.status}, score {record.score['total']:.2f}",
                file=sys.stderr,
            )
    model = live.model.model if live is not None else f"reference investigator ({AGENT})"
    return Report.of("offline" if live is None else "live", model, runs, records)
