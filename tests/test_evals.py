"""The eval suite: its scenarios, offline runs through the real graph and guards (Redis, the
Tempo, Kubernetes and Gemini simulators), live runs' wire protocol, reports and the CLI."""

import asyncio
import json
import os
import re
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import httpx
import pytest

from bot.process.settings import Settings
from evals.judge import llm_judge
from evals.reference import ReferenceInvestigator
from evals.report import Report, ReportError, compare, update_evals_md
from evals.run import Outside, harmed, outside, run_once
from evals.score import score
from evals.spec import Action, EvalScenario, Truth, load, names
from evals.world import thread_context, traces
from graph.model import make_chat_model
from sandbox import GeminiSimulator, Reply
from sandbox.plays import satisfied
from sandbox.prefork import run_forked

NOW = 1_796_000_000.0  # one scenario clock for the whole module


@pytest.mark.parametrize("name", names())
def test_each_scenario_is_a_busy_shop_with_background_errors_that_are_not_the_cause(
    name: str,
) -> None:
    scenario = load(name)
    assert scenario.noise  # a red herring in every scenario
    written = traces(scenario, NOW)
    spans = [s for t in written for s in t.spans]
    assert len({s.service for s in spans}) >= 5 and len(spans) >= 500
    faults = scenario.faults()
    fault_from = min((NOW - f.minutes_ago * 60) * 1e9 for f in faults) if faults else NOW * 1e9
    before = {s.status_message for s in spans if s.status == "error" and s.start_ns < fault_from}
    assert before and not before & {f.message for f in faults}
    failing = [t for t in written if any(s.status == "error" for s in t.spans)]
    assert len(failing) < len(written) / 2  # most requests still work


async def _served(scenario: EvalScenario, now: float) -> str:
    """Everything the simulators serve for the scenario, read the way the tools read it:
    the cluster's objects, the spans, and what Prometheus and Loki answer over the HTTP API
    for the scenario's window (a series or line outside it, or one they would not serve, is
    not in it)."""
    async with outside(scenario, now, live=True) as out:
        served = [
            *out.kube.deployments.values(),
            *out.kube.replicasets.values(),
            *out.kube.pods.values(),
            *out.kube.events,
        ]
        start, end = now - scenario.window_minutes * 60, now
        async with httpx.AsyncClient(timeout=10) as http:
            if out.prometheus is not None:
                for metric in scenario.metrics:
                    matchers = ", ".join(f'{k}="{v}"' for k, v in metric.labels.items())
                    response = await http.get(
                        f"{out.prometheus.url}/api/v1/query_range",
                        params={"query": f"{{{matchers}}}", "start": start, "end": end, "step": 60},
                    )
                    served.append(response.json())
            if out.loki is not None:
                for stream in scenario.logs:
                    matchers = ", ".join(f'{k}="{v}"' for k, v in stream.labels.items())
                    response = await http.get(
                        f"{out.loki.url}/loki/api/v1/query_range",
                        params={
                            "query": f"{{{matchers}}}",
                            "start": int(start * 1e9),
                            "end": int(end * 1e9),
                            "limit": 5000,
                        },
                    )
                    served.append(response.json())
    spans = [asdict(s) for t in traces(scenario, now) for s in t.spans]
    return json.dumps(served) + json.dumps(spans)


@pytest.mark.parametrize("name", names())
async def test_each_scenario_s_evidence_is_in_what_the_simulators_serve(name: str) -> None:
    scenario = load(name)
    served = await _served(scenario, NOW)
    assert [e for e in scenario.truth.evidence if e not in served] == []


async def test_evidence_only_in_a_scenario_s_file_is_not_served() -> None:
    scenario = load("memory-leak")
    # The GC log lines moved to before the window: Loki holds them, no query of it returns them.
    logs = [
        stream.model_copy(update={"lines": [(m + 120, line) for m, line in stream.lines]})
        for stream in scenario.logs
    ]
    moved = scenario.model_copy(update={"logs": logs})
    assert "GC overhead" in json.dumps(moved.model_dump(include={"logs"}))
    served = "GC overhead" in await _served(moved, NOW)
    assert not served  # (a bool: the served text is too long for pytest to explain)


def test_a_scenario_is_the_same_at_every_clock_only_moved_in_time() -> None:
    scenario = load("bad-deploy")
    now, later = traces(scenario, NOW), traces(scenario, NOW + 60)
    assert now == traces(scenario, NOW)
    assert [t.trace_id for t in now] == [t.trace_id for t in later]
    assert abs(later[0].start_ns - now[0].start_ns - 60 * 10**9) < 10**4


@pytest.mark.parametrize("name", ["bad-deploy", "dependency-timeout", "zone-outage"])
async def test_the_reference_investigator_finds_the_cause_through_the_real_graph(
    name: str, redis_url: str
) -> None:
    scenario = load(name)
    record = await run_once(scenario, 1, time.time(), redis_url=redis_url)
    assert record.status == "answered"
    assert record.score["total"] == 1.0, record.answer
    assert all(record.reachable.values()) and record.harmed is False
    assert record.facts["grounded"] == record.facts["checked"] > 0
    expected = scenario.truth.action
    assert [(p["action"], p["deployment"]) for p in record.proposals] == (
        [(expected.action, expected.deployment)] if expected else []
    )


def _rewritten(scenario: EvalScenario) -> EvalScenario:
    """The scenario with every part of its truth changed: another root cause and chain,
    evidence, action, harmful actions and criteria, and "nothing wrong" flipped."""
    services = [s.name for s in scenario.services]
    other = next(s for s in reversed(services) if s not in scenario.truth.root_cause)
    truth = Truth.model_construct(
        root_cause=[other],
        chain=list(reversed(services)),
        evidence=["evidence nobody wrote"],
        action=Action(action="scale", deployment=services[0], replicas=99),
        wrong_actions=[Action(action="rollout_undo", deployment=other)],
        criteria=["a criterion nobody wrote"],
        nothing_wrong=False,
    )
    return scenario.model_copy(update={"truth": truth})


def _clock_free(answer: str) -> str:
    """The answer without the counts that depend on when its searches ran: the tools search
    up to the real clock, so two runs a second apart can count one error more or a minute
    longer at a window's edge ("as in it (7, over 27 minutes)"). Names, versions, actions
    and every other figure are compared as written."""
    return re.sub(r"\((\d+)(, over \d+ minutes)?\)", "(#)", answer)


def _world_of(out: Outside) -> str:
    """Everything the simulators of one run serve: traces, cluster objects, metrics, logs
    (a cluster object's uid, also in messages, and an event's name suffix are random, as
    Kubernetes makes them: left out)."""
    kube = out.kube
    served = {
        "traces": out.tempo.traces,
        "cluster": [
            sorted(objects.items()) if isinstance(objects, dict) else objects
            for objects in (kube.deployments, kube.replicasets, kube.pods, kube.events, kube.logs)
        ],
        "metrics": out.prometheus.series if out.prometheus else None,
        "logs": out.loki.streams if out.loki else None,
    }
    written = json.dumps(served, sort_keys=True, default=repr)
    written = re.sub(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", "uid", written)
    return re.sub(r'\.[0-9a-f]{16}"', '."', written)


def _first_difference(kept: str, changed: str) -> str | None:
    """Where two long texts first differ, a few words either side (pytest's own diff of
    two texts this long takes minutes)."""
    at = next((i for i, (a, b) in enumerate(zip(kept, changed, strict=False)) if a != b), None)
    if at is None:
        return None if len(kept) == len(changed) else f"one ends at {min(len(kept), len(changed))}"
    return f"{kept[max(0, at - 80) : at + 80]!r} became {changed[max(0, at - 80) : at + 80]!r}"


@pytest.mark.parametrize("name", names())
async def test_the_truth_cannot_reach_what_the_tools_serve_or_the_thread(name: str) -> None:
    """Every scenario, its truth rewritten: the same world, the same thread."""
    scenario = load(name)
    async with (
        outside(scenario, NOW, False) as kept,
        outside(_rewritten(scenario), NOW, False) as changed,
    ):
        moved = _first_difference(_world_of(kept), _world_of(changed))
    assert moved is None, f"the truth reached the world: {moved}"
    # The thread's quoting markers carry a random nonce each render: left out.
    kept_thread, changed_thread = (
        re.sub(r"context-[0-9a-f]{8}", "context-", thread_context(s, NOW).render())
        for s in (scenario, _rewritten(scenario))
    )
    assert changed_thread == kept_thread


# End to end for scenarios of each kind (several faults, events, nothing wrong, metrics and
# logs, a rollback, a scale): the world test above covers the rest of them.
END_TO_END = [
    "bad-deploy",
    "two-faults",
    "node-not-ready",
    "alert-misfire",
    "memory-leak",
    "hpa-at-max",
]


@pytest.mark.parametrize("name", END_TO_END)
async def test_the_truth_cannot_leak_into_the_answer(name: str, redis_url: str) -> None:
    scenario, now = load(name), time.time()  # the tools search up to the real clock
    # Side by side (each its own simulators and keys); their token figures, read from the
    # process's counters, mix — and are not compared here.
    kept, changed = await asyncio.gather(
        run_once(scenario, 1, now, redis_url=redis_url),
        run_once(_rewritten(scenario), 1, now, redis_url=redis_url),
    )
    assert kept.status == "answered" and all(kept.reachable.values())
    assert _clock_free(changed.answer) == _clock_free(kept.answer)
    assert changed.tools == kept.tools
    assert changed.proposals == kept.proposals
    assert changed.score != kept.score  # the truth did change: the same answer scores apart


@pytest.mark.parametrize("name", ["alert-misfire", "crawler-404s"])
async def test_the_reference_says_nothing_is_wrong_where_errors_are_the_background(
    name: str, redis_url: str
) -> None:
    record = await run_once(load(name), 1, time.time(), redis_url=redis_url)
    assert record.score["nothing_wrong"] and record.score["grade"] == "bullseye"
    assert record.proposals == [] and record.score["total"] == 1.0


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("node-not-ready", "get_kubernetes_events"),  # NodeNotReady on the pods there
        ("hpa-at-max", "query_prometheus"),  # the autoscaler's current and maximum replicas
    ],
)
async def test_the_reference_reads_events_and_an_autoscaler_and_proposes_nothing(
    name: str, source: str, redis_url: str
) -> None:
    record = await run_once(load(name), 1, time.time(), redis_url=redis_url)
    assert source in record.tools and all(record.reachable.values())
    assert record.score["grade"] == "bullseye" and record.proposals == []


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("oom-crash-loop", "get_workload_pods"),
        ("oom-crash-loop", "query_prometheus"),
        ("memory-leak", "query_loki_logs"),
    ],
)
async def test_evidence_outside_traces_is_reached_through_pods_metrics_and_logs(
    name: str, source: str, redis_url: str
) -> None:
    record = await run_once(load(name), 1, time.time(), redis_url=redis_url)
    assert source in record.tools
    assert all(record.reachable.values()), record.reachable  # OOMKilled, GC overhead, ...
    assert record.score["total"] == 1.0


async def test_a_tool_budget_too_small_to_read_the_evidence_is_reported_unreachable(
    redis_url: str,
) -> None:
    record = await run_once(
        load("config-change"), 1, time.time(), redis_url=redis_url, overrides={"tool_budget": 2}
    )
    # The change-cause is in the rollout history, which a search and one trace leave unread.
    assert record.reachable == {"PAYMENT_TIMEOUT_MS=50": False, "context deadline exceeded": True}
    assert record.score["total"] < 1.0


def test_a_guard_that_cuts_the_true_cause_from_a_draft_counts_as_harm() -> None:
    scenario = load("dependency-timeout")
    draft = "*Likely cause (high confidence):* `warehouse-api`.\n`inventory`'s calls to it fail."
    cut = "`inventory`'s calls to it fail."
    assert harmed([draft], score(cut, scenario, [], 0), scenario, [])
    assert not harmed([draft], score(draft, scenario, [], 0), scenario, [])


async def test_live_mode_speaks_gemini_s_wire_protocol_and_a_judge_grades_the_answer(
    redis_url: str,
) -> None:
    scenario = load("upstream-rate-limit")
    async with GeminiSimulator() as gemini:
        agent = ReferenceInvestigator()  # stands in for the real model, over the wire
        gemini.script(*[agent] * 20, model="live-agent")
        gemini.script(*[lambda r: satisfied()] * 5, model="live-grader")
        verdict = {
            "reasoning": 1,
            "criteria": [
                {"criterion": c, "met": True, "why": "named"} for c in scenario.truth.criteria
            ],
        }
        gemini.script(Reply.json(verdict), model="live-judge")
        live = Settings(
            _env_file=None,
            google_api_key="live-key",
            gemini_base_url=gemini.url,
            llm_model="google_genai:live-agent",
            grader_model="google_genai:live-grader",
            judge_model="google_genai:live-judge",
            llm_max_retries=0,
        )
        judge = llm_judge(make_chat_model(live.judge_spec()))
        record = await run_once(
            scenario, 1, time.time(), redis_url=redis_url, live=live, judge=judge
        )
    assert (record.mode, record.model, record.status) == (
        "live",
        "google_genai:live-agent",
        "answered",
    )
    assert record.judge == {
        "reasoning": 1.0,
        "criteria_met": 2,
        "criteria": 2,
        "verdicts": verdict["criteria"],
    }
    judged = next(r for r in gemini.requests if r.model == "live-judge")
    # The judge sees the truth and the criteria; the investigated model never does.
    assert "Names Stripe's rate limit" in judged.text()
    assert not any(
        "Names Stripe's rate limit" in r.text() for r in gemini.requests if r.model == "live-agent"
    )
    assert record.reachable == {} and record.harmed is None  # offline-only figures
    assert record.tokens > 0  # as the API reported them, read back from the thread's count


def _report(mode: str, total: float) -> Report:
    record = {
        "scenario": "bad-deploy",
        "run": 1,
        "mode": mode,
        "model": "m",
        "status": "answered",
        "answer": "a",
        "score": {
            "total": total,
            "f1": total,
            "chain": 1.0,
            "action_right": True,
            "wrong_action": False,
            "invented": 0,
        },
        "tool_calls": 3,
        "model_calls": 4,
        "tokens": 10,
        "latency_s": 1.0,
        "facts": {},
        "trace_ids": {},
        "rubric": None,
        "proposals": [],
    }
    return Report.model_validate(
        {"mode": mode, "model": "m", "date": "d", "runs_per_scenario": 1, "records": [record]}
    )


def test_comparing_reports_shows_what_got_worse() -> None:
    table = compare(_report("offline", 1.0), _report("offline", 0.5))
    assert "| bad-deploy | 1.00 | 0.50 | -0.50 **worse**" in table


def test_offline_and_live_figures_are_never_compared() -> None:
    with pytest.raises(ReportError, match="cannot compare a offline report with a live one"):
        compare(_report("offline", 1.0), _report("live", 1.0))


def test_evals_md_keeps_the_live_section_when_offline_figures_are_written(tmp_path: Path) -> None:
    path = tmp_path / "EVALS.md"
    update_evals_md(path, _report("offline", 0.75))
    text = path.read_text()
    assert "| bad-deploy | – | 0 | wrong area | 0.75 ± 0.00 |" in text
    assert "live evals need `GOOGLE_API_KEY`" in text


async def _tracegate_eval(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """`tracegate eval *args` (forked: sandbox/prefork.py), its stdout and stderr."""
    environment = {"PATH": os.environ["PATH"], **(env or {})}
    cwd = Path(tempfile.gettempdir())
    code, out, err = await run_forked(["eval", *args], environment, cwd)
    return code, out + err


def _reports(folder: Path) -> list[Report]:
    return [Report.read(path) for path in sorted(folder.glob("eval-offline-*.json"))]


async def test_an_unknown_scenario_exits_2_listing_the_scenarios() -> None:
    code, out = await _tracegate_eval("--scenario", "nope")
    assert code == 2 and "no scenario 'nope'; the scenarios are alert-misfire, bad-deploy," in out


async def test_live_without_a_key_exits_2_naming_the_setting() -> None:
    code, out = await _tracegate_eval("--live")
    assert code == 2 and "GOOGLE_API_KEY" in out


async def test_one_offline_scenario_from_the_command_line_writes_its_report(
    tmp_path: Path, redis_url: str
) -> None:
    code, out = await _tracegate_eval(
        "--scenario", "pool-exhaustion", "--out", str(tmp_path), env={"REDIS_URL": redis_url}
    )
    assert code == 0, out
    (report,) = _reports(tmp_path)
    assert [r.scenario for r in report.records] == ["pool-exhaustion"]
    assert "| pool-exhaustion | yes | 0 | bullseye | 1.00 ± 0.00 |" in out
