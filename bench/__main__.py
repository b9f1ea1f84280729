"""Run every benchmark, each against a baseline measured in the same run; write BENCHMARKS.md.

make bench            (starts Redis Stack unless REDIS_URL is set)
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import redis.asyncio as aioredis
from langgraph.checkpoint.memory import InMemorySaver

from bot.server import running_bot
from bot.settings import Settings
from gates.breaker import CircuitBreaker
from gates.cluster import KubernetesCluster
from gates.config import ActionPolicy
from gates.judge import ActionJudge
from gates.pipeline import ActionPipeline
from gates.store import ActionStore
from graph.build import build_graph
from graph.checkpoint import open_checkpointer
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.grader import Grader
from graph.model import make_chat_model
from graph.runner import Investigator
from graph.tools.tempo import TempoClient, tempo_tools
from graph.trace_guard import TraceVerifier
from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.fleet import SIGNING_SECRET, Fleet, LoadResult, answer_by_question, drive_load
from sandbox.kubernetes import KubernetesSimulator, write_kubeconfig
from sandbox.scenarios import bad_deploy
from sandbox.slack import SlackDriver, SlackSimulator

OUT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
Row = tuple[str, str, str, str]


async def _timed(run: Callable[[], Awaitable[object]], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        await run()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples):.1f} ms ({sorted(samples)[int(len(samples) * 0.9)]:.1f})"


async def bench_verification() -> list[Row]:
    """12 cited IDs, Tempo answering in 50 ms: concurrent checks against one at a time."""
    scenario = bad_deploy()
    ids = [t.trace_id for t in scenario.traces]
    async with TempoSimulator(traces=scenario.traces) as tempo:
        tempo.faults.latency_s = 0.05
        client = TempoClient(TempoSpec(url=tempo.url, timeout_s=5))
        sequential = TraceVerifier(client, concurrency=1)
        concurrent = TraceVerifier(client, concurrency=8)
        base = await _timed(lambda: sequential.check(ids), 5)
        fast = await _timed(lambda: concurrent.check(ids), 5)
        await client.aclose()
    speedup = statistics.median(base) / statistics.median(fast)
    return [
        ("verify 12 trace IDs, Tempo 50 ms", "one at a time (baseline)", _ms(base), "1.0x"),
        (
            "verify 12 trace IDs, Tempo 50 ms",
            "8 concurrent (shipped)",
            _ms(fast),
            f"{speedup:.1f}x",
        ),
    ]


async def bench_turn(redis_url: str) -> list[Row]:
    """One question → search → answer → trace guard, with the checkpoint in memory vs in Redis."""
    scenario = bad_deploy()
    limits = GraphLimits()
    answer = f"payment-api 1.42.0 is failing; see {scenario.error_trace_ids[0]}."
    rows: list[Row] = []
    async with TempoSimulator(traces=scenario.traces) as tempo, GeminiSimulator() as gemini:
        model = make_chat_model(
            ModelSpec(api_key="bench", base_url=gemini.url, max_retries=0, timeout_s=10)
        )
        client = TempoClient(TempoSpec(url=tempo.url))
        tools = tempo_tools(client)
        verifier = TraceVerifier(client, limits.trace_verify_concurrency)
        grader = Grader(model, tools, limits.grader_max_steps)  # no rubric: never called

        async def turns(investigator: Investigator) -> list[float]:
            async def one() -> None:
                gemini.script(
                    Reply.call("query_tempo_traces", traceql="{ status = error }"),
                    Reply.text(answer),
                )
                result = await investigator.investigate(f"bench:{uuid.uuid4().hex}", "why?", "b")
                assert result.status == "answered", result

            await one()  # warm-up: connections, index set-up
            return await _timed(one, 30)

        memory = Investigator(
            build_graph(model, tools, verifier, grader, InMemorySaver(), limits), limits
        )
        base = await turns(memory)
        async with open_checkpointer(redis_url, ttl_minutes=60) as saver:
            redis = Investigator(build_graph(model, tools, verifier, grader, saver, limits), limits)
            measured = await turns(redis)
        await client.aclose()
    overhead = statistics.median(measured) - statistics.median(base)
    rows.append(
        (
            "one turn (2 model calls, 1 search, 1 check)",
            "in-memory checkpoint (baseline)",
            _ms(base),
            "—",
        )
    )
    rows.append(
        (
            "one turn (2 model calls, 1 search, 1 check)",
            "Redis checkpoint (shipped)",
            _ms(measured),
            f"+{overhead:.1f} ms",
        )
    )
    return rows


async def bench_approval(redis_url: str) -> list[Row]:
    """Approving a rollback: one click, against 50 concurrent clicks racing for it."""
    redis = aioredis.from_url(redis_url)
    timings: dict[int, list[float]] = {1: [], 50: []}
    executions: dict[int, int] = {1: 0, 50: 0}
    async with KubernetesSimulator() as kube, GeminiSimulator() as gemini:
        kubeconfig = write_kubeconfig(
            Path(tempfile.gettempdir()) / f"bench-{uuid.uuid4().hex}.json", kube.url
        )
        cluster = await KubernetesCluster.connect(str(kubeconfig), timeout_s=5)
        model = make_chat_model(ModelSpec(api_key="bench", base_url=gemini.url, max_retries=0))
        for clicks in (1, 50):
            for round_ in range(10):
                name = f"svc-{clicks}-{round_}"
                kube.add_deployment("bench", name, ["img:1", "img:2"])
                policy = ActionPolicy(actions_enabled=True, approvers=frozenset({"U1"}))
                prefix = f"bench-{uuid.uuid4().hex[:8]}"
                pipeline = ActionPipeline(
                    ActionStore(redis, prefix),
                    cluster,
                    CircuitBreaker(redis, policy, prefix),
                    ActionJudge(model, "closed"),
                    policy,
                )
                gemini.script(Reply.json({"safe_to_proceed": True, "reason": "bench"}))
                request = await pipeline.propose(
                    action="rollout_undo",
                    namespace="bench",
                    deployment=name,
                    thread_key=f"bench:{name}",
                    requester="U0",
                    reason="bench",
                )
                writes_before = len(kube.writes)
                started = time.perf_counter()
                await asyncio.gather(*(pipeline.approve(request.id, "U1") for _ in range(clicks)))
                timings[clicks].append((time.perf_counter() - started) * 1000)
                executions[clicks] += len(kube.writes) - writes_before
        await cluster.close()
        kubeconfig.unlink()
    await redis.aclose()
    extra = statistics.median(timings[50]) - statistics.median(timings[1])
    return [
        (
            "approve a rollback (10 rounds)",
            f"1 click (baseline), {executions[1]} executions",
            _ms(timings[1]),
            "—",
        ),
        (
            "approve a rollback (10 rounds)",
            f"50 concurrent clicks, {executions[50]} executions",
            _ms(timings[50]),
            f"+{extra:.1f} ms",
        ),
    ]


async def bench_slack_ack(redis_url: str) -> list[Row]:
    """Slack wants a 200 within 3 s: the ack while 30 answers are being worked on, against
    the ack of duplicate deliveries on an idle bot."""
    scenario = bad_deploy()
    async with (
        SlackSimulator() as slack,
        TempoSimulator(traces=scenario.traces) as tempo,
        GeminiSimulator() as gemini,
    ):
        settings = Settings(
            _env_file=None,
            slack_bot_token="xoxb-bench",
            slack_signing_secret="bench-secret",
            slack_api_url=f"{slack.url}/api/",
            google_api_key="bench",
            gemini_base_url=gemini.url,
            llm_max_retries=0,
            tempo_url=tempo.url,
            redis_url=redis_url,
            redis_prefix=f"bench-{uuid.uuid4().hex[:8]}",
            port=0,
            default_rubric="",
        )
        async with running_bot(settings, host="127.0.0.1") as bot:
            driver = SlackDriver(bot.url, "bench-secret", team=f"TB{uuid.uuid4().hex[:6]}")

            async def ack(ts: str, event_id: str) -> float:
                started = time.perf_counter()
                status, _ = await driver.mention("why?", ts=ts, event_id=event_id)
                assert status == 200
                return (time.perf_counter() - started) * 1000

            gemini.script(Reply.text("warm-up"))
            await ack("1700000000.000001", "EvWarm")
            await bot.services.jobs.join(30)
            idle = [await ack("1700000000.000001", "EvWarm") for _ in range(30)]  # duplicates
            slow = Reply(parts=({"text": "answer"},), delay_s=0.3)
            gemini.script(*[slow] * 30)
            busy = await asyncio.gather(
                *(ack(f"1700000100.{i:06d}", f"EvBusy{i}") for i in range(30))
            )
            await bot.services.jobs.join(60)
    extra = statistics.median(busy) - statistics.median(idle)
    return [
        (
            "Slack ack (HTTP 200) of a mention",
            "duplicate delivery, idle bot (baseline)",
            _ms(idle),
            "—",
        ),
        (
            "Slack ack (HTTP 200) of a mention",
            "30 new mentions at once (shipped)",
            _ms(list(busy)),
            f"+{extra:.1f} ms",
        ),
    ]


async def _fleet_load(
    redis_url: str, tmp: Path, receivers: int, workers: int, redeliver: float
) -> LoadResult:
    async with (
        SlackSimulator() as slack,
        TempoSimulator(traces=bad_deploy().traces) as tempo,
        GeminiSimulator() as gemini,
    ):
        gemini.script(*[lambda r: answer_by_question(r, delay_s=0.2)] * 200)
        env = {
            "SLACK_BOT_TOKEN": "xoxb-bench",
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_URL": f"{slack.url}/api/",
            "GOOGLE_API_KEY": "bench",
            "GEMINI_BASE_URL": gemini.url,
            "LLM_MAX_RETRIES": "0",
            "TEMPO_URL": tempo.url,
            "REDIS_URL": redis_url,
            "REDIS_PREFIX": f"bench-{uuid.uuid4().hex[:8]}",
            "PROGRESS_INTERVAL": "0",
            "DEFAULT_RUBRIC": "",
            "KUBECONFIG": "",
            "LOG_LEVEL": "INFO",
            "WORKER_MODE": "queue" if workers else "inline",
        }
        fleet = Fleet(env, tmp)
        try:
            serving = [fleet.serve() for _ in range(receivers)]
            working = [fleet.worker() for _ in range(workers)]
            await asyncio.gather(*(p.ready(60) for p in serving + working))
            return await drive_load(
                slack,
                gemini,
                [p.url for p in serving],
                threads=20,
                turns_per_thread=5,
                redeliver=redeliver,
                spread_s=3.0,
                timeout_s=180,
            )
        finally:
            fleet.close()


def _load_row(variant: str, result: LoadResult, baseline: LoadResult | None) -> Row:
    latencies = sorted(result.latencies_s)
    p50 = statistics.median(latencies) if latencies else float("nan")
    p99 = latencies[int(len(latencies) * 0.99)] if latencies else float("nan")
    figures = (
        f"{result.answered}/{result.turns} answered, {result.duplicates} duplicates, "
        f"{result.lost} lost, {result.inversions} inversions; mention→answer "
        f"p50 {p50:.2f} s, p99 {p99:.2f} s"
    )
    if baseline is None:
        return ("100 mentions in 20 threads within 3 s (processes)", variant, figures, "—")
    base = statistics.median(baseline.latencies_s)
    return (
        "100 mentions in 20 threads within 3 s (processes)",
        variant,
        figures,
        f"p50 {p50 / base:.2f}x",
    )


async def bench_fleet(redis_url: str) -> list[Row]:
    """Durable turns under load: one inline `serve` (baseline) against 2 `serve` + 2
    `tracegate worker` processes with 20% of the events delivered again to the other
    receiver. Model replies take 200 ms; each thread's 5 turns must run one at a time."""
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        baseline = await _fleet_load(redis_url, tmp, receivers=1, workers=0, redeliver=0.0)
        scaled = await _fleet_load(redis_url, tmp, receivers=2, workers=2, redeliver=0.2)
    return [
        _load_row("1 inline serve (baseline)", baseline, None),
        _load_row("2 serve + 2 worker, 20% redelivered", scaled, baseline),
    ]


async def main() -> None:
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        raise SystemExit("REDIS_URL is not set: run `make bench`, which starts Redis Stack")
    rows = (
        await bench_verification()
        + await bench_turn(redis_url)
        + await bench_approval(redis_url)
        + await bench_slack_ack(redis_url)
        + await bench_fleet(redis_url)
    )
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`python -m bench`); every figure is compared with a baseline",
        "measured in the same run, on the same machine. Simulators and Redis run on loopback.",
        "",
        f"- when: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "",
        "| benchmark | variant | median (p90) | vs baseline |",
        "|---|---|---|---|",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
    ]
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    asyncio.run(main())
