"""Running scenarios through tracegate's own investigation: the Investigator the worker
calls for a Slack turn, built by `open_runtime` from settings as `tracegate serve` builds
it (graph, tools, trace guard, grounding check, action-claim guard, rubric grading, gates
and judge), with the thread context the thread reader gives it.

Only the outside world is simulated: Tempo and Kubernetes serve the scenario's world;
offline, the Gemini simulator answers as the reference investigator; live, the real model
answers and an LLM judge grades the answer against criteria the investigator never sees.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fakeredis
import redis.asyncio as aioredis
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, Field

from bot.process.runtime import Runtime, open_runtime
from bot.process.settings import Settings
from evals import cost, world
from evals.judge import Judge
from evals.reference import ReferenceInvestigator, reference_grader, reference_judge, texts
from evals.score import Proposal, Score, score
from evals.spec import EvalScenario
from graph.result import InvestigationResult
from sandbox import GeminiSimulator, TempoSimulator
from sandbox.kubernetes import KubernetesSimulator, write_kubeconfig
from sandbox.loki import LokiSimulator
from sandbox.prometheus import PrometheusSimulator

AGENT, GRADER, JUDGE = "eval-reference", "eval-grader", "eval-judge"
ASKER = "U_ONCALL"
MAX_REFERENCE_REQUESTS = 64  # a runaway loop ends with an error, not a hang


class RunRecord(BaseModel):
    """One run of one scenario: what was asked of whom, what came back, how it scored."""

    scenario: str
    run: int
    mode: str  # offline | live
    model: str
    status: str
    answer: str
    score: dict[str, Any]
    tool_calls: int
    tools: list[str] = Field(default_factory=list)  # the tools called, in order
    model_calls: int  # every model call of the run (agent, grader, judge)
    tokens: int  # every model call of the run (agent, grader), as the API reported them
    # Per model and role: calls, input, output and cached tokens (the usage metadata).
    usage: list[cost.Usage] = Field(default_factory=list)
    latency_s: float
    facts: dict[str, int]
    trace_ids: dict[str, int]
    rubric: str | None
    proposals: list[dict[str, Any]]
    removed: list[str] = Field(default_factory=list)  # sentences a guard cut from the answer
    reachable: dict[str, bool] = Field(default_factory=dict)  # offline: evidence seen
    harmed: bool | None = None  # offline: a guard made the reference's answer worse
    reasoning: str | None = None  # offline: what the reference's conclusion went by
    judge: dict[str, Any] | None = None  # live: the LLM judge's verdict


@dataclass
class Outside:
    """The simulated world one run talks to."""

    tempo: TempoSimulator
    kube: KubernetesSimulator
    gemini: GeminiSimulator | None
    kubeconfig: Path
    reference: ReferenceInvestigator | None = None
    prometheus: PrometheusSimulator | None = None  # when the scenario has metrics
    loki: LokiSimulator | None = None  # when the scenario has logs
    seen: list[str] = field(default_factory=list)


@asynccontextmanager
async def outside(scenario: EvalScenario, now: float, live: bool) -> AsyncIterator[Outside]:
    async with AsyncExitStack() as stack:
        tempo = await stack.enter_async_context(
            TempoSimulator(traces=tuple(world.traces(scenario, now)))
        )
        kube = await stack.enter_async_context(KubernetesSimulator())
        world.deploy(scenario, kube, now)
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        kubeconfig = write_kubeconfig(scratch / "kubeconfig.json", kube.url)
        prometheus = loki = None
        if scenario.metrics:
            prometheus = await stack.enter_async_context(PrometheusSimulator())
            for metric in scenario.metrics:
                prometheus.add(metric.labels, [(now - m * 60, v) for m, v in metric.points])
        if scenario.logs:
            loki = await stack.enter_async_context(LokiSimulator())
            for stream in scenario.logs:
                loki.add(stream.labels, [(now - m * 60, line) for m, line in stream.lines])
        if live:
            yield Outside(tempo, kube, None, kubeconfig, None, prometheus, loki)
            return
        gemini = await stack.enter_async_context(GeminiSimulator())
        reference = ReferenceInvestigator()
        gemini.script(*[reference] * MAX_REFERENCE_REQUESTS, model=AGENT)
        gemini.script(*[reference_grader] * MAX_REFERENCE_REQUESTS, model=GRADER)
        gemini.script(*[reference_judge] * MAX_REFERENCE_REQUESTS, model=JUDGE)
        yield Outside(tempo, kube, gemini, kubeconfig, reference, prometheus, loki)


def eval_settings(
    scenario: EvalScenario, out: Outside, redis_url: str | None, base: Settings | None
) -> Settings:
    """The bot's settings for one run: the operator's (`base`: model, limits, rubric) with
    the outside world pointed at the simulators, actions on for the scenario's namespace."""
    values: dict[str, Any] = base.model_dump() if base is not None else {}
    values |= {
        "tempo_url": out.tempo.url,
        "tempo_tenant": None,
        "prometheus_url": out.prometheus.url if out.prometheus else None,
        "loki_url": out.loki.url if out.loki else None,
        "kubeconfig": str(out.kubeconfig),
        "actions_enabled": True,
        "allowed_namespaces": scenario.namespace,
        "action_approvers": "U_LEAD",
        "redis_url": redis_url or "redis://embedded.invalid/0",
        "redis_prefix": f"eval-{uuid.uuid4().hex[:12]}",  # runs never share keys
        "progress_interval": 0,
        # Counted per thread as the API reports them (the eval reads the count back).
        "thread_token_budget": (base.capacity.thread_token_budget if base else 0) or 10**12,
    }
    if out.gemini is not None:
        values |= {
            "google_api_key": "offline",
            "gemini_base_url": out.gemini.url,
            "llm_model": f"google_genai:{AGENT}",
            "grader_model": f"google_genai:{GRADER}",
            "judge_model": f"google_genai:{JUDGE}",
            "llm_fallback_model": None,
            "llm_max_retries": 0,
        }
    return Settings(_env_file=None, **values)


async def _proposals(runtime: Runtime, result: InvestigationResult) -> list[Proposal]:
    if runtime.actions is None:
        return []
    found = []
    for request_id in result.action_request_ids:
        request = await runtime.actions.store.get(request_id)
        if request is not None:
            found.append(
                Proposal(request.action, request.deployment, request.replicas, request.status)
            )
    return found


def invented(result: InvestigationResult) -> int:
    """What the guards caught the model inventing: trace IDs Tempo does not hold and facts
    no evidence grounds, removed or marked in the answer — or, when the model corrected
    them after being sent back, the drafts sent back (whichever is larger). Facts whose
    source could not be reached ((unchecked)) are not counted."""
    in_answer = (
        len(result.removed_trace_ids)
        + result.facts_removed
        + max(result.facts_marked - result.facts_unchecked, 0)
    )
    return max(in_answer, result.trace_revisions + result.grounding_revisions)


async def run_once(
    scenario: EvalScenario,
    run: int,
    now: float,
    *,
    redis_url: str | None = None,
    live: Settings | None = None,
    judge: Judge | None = None,
    overrides: dict[str, Any] | None = None,
) -> RunRecord:
    """One investigation of `scenario`: offline (the reference investigator), or `live`
    with the model those settings name, graded by `judge` as well. `overrides` change
    settings of the run (a smaller TOOL_BUDGET, another GROUNDING_MODE)."""
    async with outside(scenario, now, live is not None) as out:
        settings = eval_settings(scenario, out, redis_url, live)
        if overrides:
            settings = Settings(_env_file=None, **{**settings.model_dump(), **overrides})
        redis: aioredis.Redis | None = None
        saver: InMemorySaver | None = None
        if redis_url is None:
            redis, saver = fakeredis.FakeAsyncRedis(), InMemorySaver()
        async with open_runtime(settings, redis=redis, saver=saver) as runtime:
            started = time.monotonic()
            counted = cost.snapshot()
            thread = f"eval:{scenario.name}:{run}:{uuid.uuid4().hex[:8]}"
            result = await runtime.investigator.investigate(
                thread,
                scenario.question,
                ASKER,
                context=world.thread_context(scenario, now),
            )
            latency = time.monotonic() - started
            used = cost.spent(counted, cost.snapshot())
            proposals = await _proposals(runtime, result)
            spent = await runtime.redis.get(f"{settings.redis.prefix}:tokens:thread:{thread}")
        graded = score(result.answer, scenario, proposals, invented(result))
        record = RunRecord(
            scenario=scenario.name,
            run=run,
            mode="offline" if live is None else "live",
            model=result.model or settings.model.model,
            status=result.status,
            answer=result.answer,
            score=graded.as_dict(),
            tool_calls=result.tool_calls,
            tools=[str(e.get("tool")) for e in result.events if e.get("type") == "tool_started"],
            model_calls=sum(u.calls for u in used),
            tokens=int(spent or 0),
            usage=used,
            latency_s=round(latency, 3),
            facts={
                "checked": result.facts_checked,
                "grounded": result.facts_grounded,
                "removed": result.facts_removed,
                "marked": result.facts_marked,
                "unchecked": result.facts_unchecked,
            },
            trace_ids={
                "verified": len(result.verified_trace_ids),
                "unverified": len(result.unverified_trace_ids),
                "removed": len(result.removed_trace_ids),
            },
            rubric=result.rubric_status,
            proposals=[p.__dict__ for p in proposals],
            removed=result.removed_claims,
        )
        if out.gemini is not None and out.reference is not None:
            _offline_checks(record, scenario, out, proposals, graded)
        elif judge is not None:
            record.judge = await judge(scenario, result.answer)
        return record


def _offline_checks(
    record: RunRecord,
    scenario: EvalScenario,
    out: Outside,
    proposals: list[Proposal],
    posted: Score,
) -> None:
    """What offline runs prove: the truth's evidence came out of the tools the reference
    called, and the guards left its answer at least as good as it was drafted."""
    assert out.gemini is not None and out.reference is not None
    agent = [r for r in out.gemini.requests if r.model == AGENT]
    seen = "\n".join(
        text
        for r in agent
        for c in r.contents
        for part in c.get("parts", [])
        if "functionResponse" in part
        for text in texts(part["functionResponse"].get("response"))
    )
    record.reachable = {e: e in seen for e in scenario.truth.evidence}
    record.harmed = harmed(out.reference.drafts, posted, scenario, proposals)
    record.reasoning = out.reference.why or None


def harmed(
    drafts: list[str], posted: Score, scenario: EvalScenario, proposals: list[Proposal]
) -> bool:
    """A guard harmed the answer: the posted one scores below the last draft, scored with
    the same proposals and nothing invented (the reference invents nothing)."""
    if not drafts:
        return False
    return posted.total + 1e-9 < score(drafts[-1], scenario, proposals, 0).total


def summarise(records: list[RunRecord]) -> dict[str, Any]:
    """Per scenario: mean and spread of the score over its runs, and the other figures."""
    by: dict[str, list[RunRecord]] = {}
    for r in records:
        by.setdefault(r.scenario, []).append(r)
    rows = {}
    for name, runs in by.items():
        totals = [r.score["total"] for r in runs]
        rows[name] = {
            "runs": len(runs),
            "score": round(statistics.fmean(totals), 3),
            "stdev": round(statistics.pstdev(totals), 3),
            "f1": round(statistics.fmean(r.score["f1"] for r in runs), 3),
            "chain": round(statistics.fmean(r.score["chain"] for r in runs), 3),
            "grade": Counter(r.score.get("grade", "wrong area") for r in runs).most_common(1)[0][0],
            "grades": dict(Counter(r.score.get("grade", "wrong area") for r in runs)),
            "refused": sum(r.score.get("refused", 0) for r in runs),
            "nothing_wrong": sum(bool(r.score.get("nothing_wrong")) for r in runs),
            "action_right": sum(r.score["action_right"] for r in runs),
            "wrong_action": sum(r.score["wrong_action"] for r in runs),
            "invented": sum(r.score["invented"] for r in runs),
            "tool_calls": round(statistics.fmean(r.tool_calls for r in runs), 1),
            "tokens": round(statistics.fmean(r.tokens for r in runs)),
            "latency_s": round(statistics.fmean(r.latency_s for r in runs), 2),
            **_usage_row(runs),
            "reachable": all(all(r.reachable.values()) for r in runs)
            if runs[0].reachable
            else None,
            "harmed": sum(bool(r.harmed) for r in runs),
        }
    return rows


def _usage_row(runs: list[RunRecord]) -> dict[str, Any]:
    """Per investigation (mean over the runs): model calls, input, output and cached tokens
    and the estimated price; the spread of input tokens over the runs."""
    priced = cost.OFFLINE_PRICED_AS if runs[0].mode == "offline" else None
    sums = [cost.total(r.usage, priced) for r in runs]
    row: dict[str, Any] = {
        k: round(statistics.fmean(s[k] for s in sums)) for k in ("calls", "input", "output")
    }
    row["cached"] = round(statistics.fmean(s["cached"] for s in sums))
    row["input_sd"] = round(statistics.pstdev(s["input"] for s in sums))
    prices = [s["usd"] for s in sums]
    row["usd"] = None if None in prices else round(statistics.fmean(prices), 6)
    row["models"] = sorted({u.model for r in runs for u in r.usage})
    return row
