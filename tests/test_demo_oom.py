"""`tracegate demo`'s OOM-loop incident: the cause is in pods, events and a memory metric,
not in traces; the scripted replay answers with it, every fact grounded."""

import io
import json
from pathlib import Path

from bot.process.demo import play
from sandbox.plays import AGENT


async def test_the_oom_loop_is_answered_from_pods_events_and_memory_not_traces(
    redis_url: str, tmp_path: Path
) -> None:
    out = io.StringIO()
    world, _ = await play(redis_url, out, tmp_path, scenes=["oom-loop"])
    transcript = out.getvalue()

    pod = world.oom.pods[0]
    assert "runs out of memory and is OOM-killed in a loop" in transcript
    assert f"pod {pod} after {world.oom.restarts[0]} restarts" in transcript
    assert "facts: 8 checked, 8 grounded, 0" in transcript
    results = "\n".join(
        json.dumps(part["functionResponse"])
        for request in world.gemini.requests  # type: ignore[union-attr]
        if request.model == AGENT
        for content in request.contents
        for part in content.get("parts", [])
        if "functionResponse" in part
    )
    assert "No traces match" in results  # Tempo has nothing on it
    assert "last terminated OOMKilled (exit code 137)" in results  # the pods
    assert "Warning BackOff pod/" in results  # the events
    assert "max 534M" in results  # the memory at its limit
    assert "loading price cache into memory" in results  # the previous container's log


async def test_the_demo_offers_the_metric_and_log_tools(redis_url: str, tmp_path: Path) -> None:
    out = io.StringIO()
    world, _ = await play(redis_url, out, tmp_path, scenes=["oom-loop"])
    offered = set(world.gemini.requests[0].tool_names)  # type: ignore[union-attr]
    assert offered >= {"query_prometheus_range", "query_loki_logs", "get_workload_pods"}
