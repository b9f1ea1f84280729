"""B7: alerts. The webhook's ack under a burst, against bare Bolt's ack in the same run, and
what a storm costs in model calls.

- Ack: 200 notifications at once to `POST /alerts/alertmanager` of a `serve` (queue mode:
  it records each and posts the groups; the turns wait for workers), each timed at the
  sender; the baseline is a bare Bolt AsyncApp acking 200 mentions at once, in the same run.
  Alertmanager abandons a delivery after max(group_interval, 10 s); Slack wants its 3 s.
- Storm: 40 alerts in 4 groups (4 notifications of 10, as Alertmanager sends them) through
  the webhook to an inline `serve`; the model calls the investigations made, against one
  investigation per alert (what a bot without grouping would start).

`scripts/with-redis .venv/bin/python -m bench.alerts` writes its section of BENCHMARKS.md;
`make bench` runs it with the rest.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness import bare_bolt, bench_settings, mention_acks, write_section
from bot.process.server import running_bot
from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.scenarios import bad_deploy
from sandbox.slack import SlackSimulator

OUT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
BEGIN, END = "<!-- alerts: begin -->", "<!-- alerts: end -->"
TOKEN = "bench-alert-token"
BURST = 200
ROUNDS = 3
ANSWER = "The errors began when the alert fired; the evidence does not show why yet."


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def notification(group: str, alerts: int = 1, service: str = "checkout") -> dict[str, Any]:
    labels = {"alertname": group, "severity": "critical", "service": service}
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{group}"}}',
        "status": "firing",
        "receiver": "tracegate",
        "groupLabels": {"alertname": group},
        "commonLabels": labels,
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.bench",
        "alerts": [
            {
                "status": "firing",
                "labels": {**labels, "pod": f"{service}-{i}"},
                "annotations": {"summary": f"{group} fires"},
                "startsAt": "2026-11-30T14:01:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus.bench/graph",
                "fingerprint": f"{group}-{i}",
            }
            for i in range(alerts)
        ],
    }


async def _burst(url: str, bodies: list[bytes], headers: dict[str, str]) -> list[float]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(body: bytes) -> float:
            started = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                assert response.status == 200, response.status
            return (time.perf_counter() - started) * 1000

        return list(await asyncio.gather(*(one(b) for b in bodies)))


async def _bare_bolt_burst(slack: SlackSimulator) -> list[float]:
    """200 mentions at once to a Bolt app that only acks (B1's baseline)."""
    runner = await bare_bolt(slack)
    try:
        return await mention_acks(f"http://127.0.0.1:{runner.addresses[0][1]}", slack, BURST)
    finally:
        await runner.cleanup()


async def measure_ack(redis_url: str) -> list[str]:
    rows: dict[str, list[tuple[float, float]]] = {"bare": [], "hook": []}
    async with (
        SlackSimulator(bot_token="xoxb-bench") as slack,
        TempoSimulator(traces=bad_deploy().traces) as tempo,
        GeminiSimulator() as gemini,
    ):
        channel = "CBENCHALERTS"
        slack.channels.add(channel)
        settings = bench_settings(
            slack,
            gemini,
            tempo,
            redis_url,
            worker_mode="queue",
            alert_webhook_token=TOKEN,
            alert_channel=channel,
            auto_investigations_per_hour=10_000,
        )
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        async with running_bot(settings, host="127.0.0.1") as bot:
            url = f"{bot.url}/alerts/alertmanager"
            for round_ in range(ROUNDS + 1):  # the first round warms both up
                bare = await _bare_bolt_burst(slack)
                bodies = [
                    json.dumps(notification(f"Bench{round_}x{i}")).encode() for i in range(BURST)
                ]
                hook = await _burst(url, bodies, headers)
                await bot.services.jobs.join(120, turns=False)  # the groups' posts, off the clock
                if round_:
                    rows["bare"].append((statistics.median(bare), percentile(bare, 0.99)))
                    rows["hook"].append((statistics.median(hook), percentile(hook, 0.99)))
    p99 = {k: statistics.median(r[1] for r in v) for k, v in rows.items()}
    name = f"B7 alert webhook ack, {BURST} notifications at once"

    def figure(key: str) -> str:
        runs = rows[key]
        return (
            f"p50 {statistics.median(r[0] for r in runs):.1f} ms, "
            f"p99 {statistics.median(r[1] for r in runs):.1f} ms "
            f"({min(r[1] for r in runs):.1f}–{max(r[1] for r in runs):.1f})"
        )

    return [
        f"| {name} | bare Bolt AsyncApp, {BURST} mentions (baseline) | {figure('bare')} | — | |",
        f"| {name} | serve: recorded in Redis before the 200 | {figure('hook')} | "
        f"p99 {p99['hook'] / p99['bare']:.2f}× | p99 < 3 s (Slack), < 10 s (Alertmanager) |",
    ]


async def measure_storm(redis_url: str) -> list[str]:
    async with (
        SlackSimulator(bot_token="xoxb-bench") as slack,
        TempoSimulator(traces=bad_deploy().traces) as tempo,
        GeminiSimulator() as gemini,
    ):
        channel = "CBENCHSTORM"
        slack.channels.add(channel)
        gemini.script(*[Reply.text(ANSWER)] * 40)
        settings = bench_settings(
            slack, gemini, tempo, redis_url, alert_webhook_token=TOKEN, alert_channel=channel
        )
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        names = ("CheckoutErrors", "CheckoutLatency", "PodRestarts", "ProbeFailures")
        async with running_bot(settings, host="127.0.0.1") as bot:
            url = f"{bot.url}/alerts/alertmanager"
            # as Alertmanager sends a storm: each group's notification, then each again
            # (its repeat), all with the group's 10 alerts
            bodies = [json.dumps(notification(n, alerts=10)).encode() for n in names] * 2
            await _burst(url, bodies, headers)
            await bot.services.jobs.join(120)
        calls = len(gemini.requests)
        posted = [m for m in slack.messages.values() if m.channel == channel and not m.thread_ts]
    per_investigation = calls / max(1, len(posted))
    naive = round(40 * per_investigation)
    return [
        f"| B7 alert storm, 40 alerts in 4 groups (8 notifications) | one investigation per "
        f"alert (baseline) | {naive} model calls | — | |",
        f"| B7 alert storm, 40 alerts in 4 groups (8 notifications) | one per group: "
        f"{len(posted)} messages | {calls} model calls | {calls / max(1, naive):.2f}× | "
        "4 investigations |",
    ]


async def measure(redis_url: str) -> str:
    rows = await measure_ack(redis_url) + await measure_storm(redis_url)
    return "\n".join(
        [
            BEGIN,
            "## Alerts (`python -m bench.alerts`)",
            "",
            "| benchmark | variant | figure | vs baseline | target |",
            "|---|---|---|---|---|",
            *rows,
            "",
            "- The webhook's figure is the sender's round trip on loopback; each notification is a",
            "  group of its own (a new message to post, an investigation to queue), recorded in",
            "  Redis before the 200; posting the group runs after the answer, in the same process.",
            "- The storm's answers are scripted: one model call per investigation here; a real",
            "  investigation makes several (B6), and the ratio is what grouping saves.",
            END,
        ]
    )


def write(section: str) -> None:
    write_section(OUT, BEGIN, END, section)


def main() -> None:
    import os

    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        raise SystemExit("REDIS_URL is not set: run it with scripts/with-redis")
    section = asyncio.run(measure(redis_url))
    write(section)
    print(section)


if __name__ == "__main__":
    main()
