"""The cost of an answer: tokens as the responses' usage metadata reports them (the Gemini
simulator over the wire, the real client library), priced from the dated table; and the
command line's token limit and live-run gate."""

import os
import tempfile
import time
from pathlib import Path

from langchain_core.messages import HumanMessage

from evals import cost
from evals.report import Report, markdown, update_evals_md
from evals.run import RunRecord, run_once
from evals.spec import load
from graph.config import ModelSpec
from graph.model import make_chat_model
from sandbox import GeminiSimulator, Reply
from sandbox.prefork import run_forked


def test_a_price_comes_from_the_table_or_the_model_s_family_marked_an_estimate() -> None:
    assert cost.price_of("google_genai:gemini-2.5-pro") == (
        cost.PRICES["gemini-2.5-pro"],
        "gemini-2.5-pro",
    )
    assert cost.price_of("google_genai:gemini-9-flash-lite") == (
        cost.PRICES["gemini-2.5-flash-lite"],
        "gemini-2.5-flash-lite (family estimate)",
    )
    assert cost.price_of("google_genai:eval-reference") == (None, "")


def test_cached_input_is_priced_at_the_cached_rate_not_twice() -> None:
    usage = cost.Usage(
        model="gemini-2.5-flash", role="agent", input=1_000_000, output=100_000, cached=600_000
    )
    # 400k fresh at $0.30, 600k cached at $0.03, 100k out at $2.50 (per million)
    assert usage.usd() == 0.4 * 0.30 + 0.6 * 0.03 + 0.1 * 2.50
    assert usage.usd("gemini-2.5-pro") == 0.4 * 1.25 + 0.6 * 0.125 + 0.1 * 10.0


async def test_tokens_and_cached_tokens_are_what_the_usage_metadata_reported() -> None:
    async with GeminiSimulator() as gemini:
        gemini.script(Reply.text("first"), Reply(parts=({"text": "second"},), output_tokens=7))
        model = make_chat_model(
            ModelSpec(model="google_genai:cost-model", api_key="k", base_url=gemini.url)
        )
        history = [HumanMessage("incident context " * 1500)]  # ~25k characters, one prefix
        before = cost.snapshot()
        await model.ainvoke(history)
        await model.ainvoke([*history, HumanMessage("and now?")])
        (used,) = cost.spent(before, cost.snapshot())
    first, second = gemini.requests
    assert (first.cached_tokens, second.cached_tokens > 1024) == (0, True)
    assert (used.calls, used.output) == (2, 1 + 7)
    assert used.input == first.prompt_tokens + second.prompt_tokens
    assert used.cached == second.cached_tokens  # the repeated prefix, not the new turn


async def test_a_run_records_each_role_s_calls_and_tokens(redis_url: str) -> None:
    record = await run_once(load("pool-exhaustion"), 1, time.time(), redis_url=redis_url)
    roles = {u.role: u for u in record.usage}
    assert roles["agent"].calls == record.tool_calls + 1  # a call per tool, then the answer
    assert roles["agent"].cached > 0 and roles["agent"].output > roles["agent"].calls
    # The thread's token budget counted the same calls' input and output.
    assert record.tokens == sum(u.input + u.output for u in record.usage if u.role != "judge")


def _record(scenario: str, inputs: int) -> RunRecord:
    return RunRecord.model_validate(
        {
            "scenario": scenario,
            "run": 1,
            "mode": "offline",
            "model": "m",
            "status": "answered",
            "answer": "a",
            "score": {
                "total": 1.0,
                "f1": 1.0,
                "chain": 1.0,
                "action_right": True,
                "wrong_action": False,
                "invented": 0,
                "grade": "bullseye",
            },
            "tool_calls": 3,
            "model_calls": 4,
            "tokens": inputs,
            "latency_s": 1.0,
            "facts": {},
            "trace_ids": {},
            "rubric": None,
            "proposals": [],
            "usage": [
                {
                    "model": "eval-reference",
                    "role": "agent",
                    "calls": 4,
                    "input": inputs,
                    "output": 100,
                    "cached": inputs // 2,
                }
            ],
        }
    )


def test_the_report_shows_each_scenario_s_tokens_calls_and_price_and_the_median() -> None:
    report = Report.of(
        "offline", "m", 1, [_record("a", 10_000), _record("b", 30_000), _record("c", 50_000)]
    )
    text = markdown(report)
    assert "| b | – | 0 | bullseye | 1.00 ± 0.00 | 1.00 | 1.00 | 1/1 | 0 | 0 | 0 | 3 | 4 " in text
    assert "| 30000 ± 0 | 100 | 15000 | $" in text
    assert "median input per investigation 30000, largest 50000" in text
    assert "| gemini-2.5-pro | $1.25 / $0.125 / $10 | $0.0216 | $0.0649 |" in text
    assert [r.scenario for r in report.over(30_100)] == ["c"]


def test_live_runs_are_kept_in_evals_md_per_model_and_date(tmp_path: Path) -> None:
    path = tmp_path / "EVALS.md"

    def live(model: str, date: str) -> Report:
        record = _record("bad-deploy", 1000).model_copy(update={"mode": "live"})
        return Report(mode="live", model=model, date=date, runs_per_scenario=1, records=[record])

    update_evals_md(path, live("gemini-a", "2026-12-01 10:00 UTC"))
    update_evals_md(path, live("gemini-b", "2026-12-01 11:00 UTC"))
    update_evals_md(path, live("gemini-a", "2026-12-02 09:00 UTC"))
    update_evals_md(path, live("gemini-a", "2026-12-02 12:00 UTC"))  # replaces that day's
    text = path.read_text()
    headings = [line for line in text.splitlines() if line.startswith("### ")]
    assert headings == [
        "### `gemini-a` — 2026-12-01",
        "### `gemini-a` — 2026-12-02",
        "### `gemini-b` — 2026-12-01",
    ]
    assert "2026-12-02 12:00 UTC" in text and "2026-12-02 09:00 UTC" not in text
    assert "<!-- evals:offline:begin -->" in text


def _files(folder: Path) -> list[Path]:
    return sorted(folder.iterdir())


async def _tracegate_eval(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    environment = {"PATH": os.environ["PATH"], **env}
    return await run_forked(["eval", *args], environment, Path(tempfile.gettempdir()))


async def test_live_prints_the_estimated_cost_and_without_yes_calls_no_model(
    tmp_path: Path,
) -> None:
    async with GeminiSimulator() as gemini:
        env = {"GOOGLE_API_KEY": "live-key", "GEMINI_BASE_URL": gemini.url}
        code, out, err = await _tracegate_eval(
            "--live", "--runs", "2", "--scenario", "bad-deploy", "--out", str(tmp_path), env=env
        )
        assert gemini.requests == []
    assert code == 2 and "add --yes to start it" in err
    assert "live run: 2 investigation(s)" in out
    assert "estimated cost: $" in out and "estimates" in out
    assert _files(tmp_path) == []  # nothing ran, no report


async def test_a_run_over_max_tokens_fails_naming_it(tmp_path: Path, redis_url: str) -> None:
    env = {"REDIS_URL": redis_url}
    args = ("--scenario", "feature-flag", "--out", str(tmp_path))
    code, _, err = await _tracegate_eval(*args, "--max-tokens", "1000", env=env)
    assert code == 1 and "over --max-tokens 1000: feature-flag run 1" in err
    code, _, err = await _tracegate_eval(*args, "--max-tokens", "1000000", env=env)
    assert code == 0, err
    (report, *_) = [Report.read(p) for p in _files(tmp_path)]
    assert report.records[0].answer.startswith("*Likely cause")  # the posted answer is kept
