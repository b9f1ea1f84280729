"""The bot's own Prometheus metrics: Slack requests and their ack latency, turns, the queue.
The graph's and the gates' metrics live in `graph.metrics` and `gates.metrics`; all of them
are in prometheus_client's default registry, which `/metrics` serves."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from graph.runner import InvestigationResult

EVENTS_RECEIVED = Counter(
    "tracegate_slack_events_total", "Requests from Slack (events, clicks, commands) received"
)
EVENTS_DEDUPLICATED = Counter(
    "tracegate_slack_events_deduplicated_total", "Slack redeliveries of an event already handled"
)
ACK_SECONDS = Histogram(
    "tracegate_slack_ack_seconds",
    "From a Slack request's arrival to its acknowledgement (Slack retries after 3 s)",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5),
)
TURNS_STARTED = Counter("tracegate_turns_started_total", "Investigation turns started")
ALERTS_RECEIVED = Counter(
    "tracegate_alerts_received_total",
    "Alert notifications received (webhooks and alerts posted in channels), by source and status",
    ["source", "status"],
)
ALERTS_INVESTIGATED = Counter(
    "tracegate_alerts_investigated_total",
    "Investigations an alert started (no one asked), by source",
    ["source"],
)
ALERTS_SKIPPED = Counter(
    "tracegate_alerts_skipped_total",
    "Alerts that started no investigation, by reason (severity, hourly_limit, resolved)",
    ["reason"],
)
ANSWER_FEEDBACK = Counter(
    "tracegate_answer_feedback_total",
    "People's verdicts on answers (a changed verdict counts again), by verdict",
    ["verdict"],
)
TURNS_FINISHED = Counter(
    "tracegate_turns_finished_total", "Investigation turns finished, by status", ["status"]
)
TURN_SECONDS = Histogram(
    "tracegate_turn_duration_seconds",
    "How long an investigation turn took, by status",
    ["status"],
    buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
)
MODEL_WAITS = Histogram(
    "tracegate_model_wait_seconds",
    "Waits of turns for model capacity, until their next try (the worker slot is free)",
    ["reason"],  # quota | overload | limit
    buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600),
)
QUEUE_DEPTH = Gauge("tracegate_queue_depth", "Turns queued and not yet taken by a worker")
OLDEST_WAITING = Gauge(
    "tracegate_queue_oldest_turn_seconds", "Age of the oldest turn not finished yet (0: none)"
)

QueueStats = Callable[[], Awaitable[tuple[int, float | None]]]  # (queued, oldest recorded at)


def observe_turn(result: InvestigationResult) -> None:
    TURNS_FINISHED.labels(result.status).inc()
    TURN_SECONDS.labels(result.status).observe(result.duration_s)


async def exposition(queue_stats: QueueStats | None) -> web.Response:
    """Every metric, with the queue gauges read fresh (they are Redis reads, not events)."""
    if queue_stats is not None:
        queued, oldest = await queue_stats()
        QUEUE_DEPTH.set(queued)
        OLDEST_WAITING.set(max(0.0, time.time() - oldest) if oldest is not None else 0)
    return web.Response(
        body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST}
    )
