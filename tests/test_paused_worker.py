"""docs/operating.md § Durable turns, one turn at a time: a worker paused past its thread's
lease (SIGSTOP: a stopped process, a long GC pause) wakes up (SIGCONT) unable to overwrite
the run that took over: the thread keeps the new run's answer, and the stale run's text
reaches Slack nowhere. Real processes (queue mode), real Redis, the Slack and Gemini
simulators."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

import redis.asyncio as aioredis

from sandbox import GeminiSimulator, Reply
from sandbox.fleet import Fleet
from sandbox.scenarios import Scenario
from sandbox.slack import SlackSimulator
from tests.fleet_fixtures import ANSWER, answered, ask, requests_reach
from tests.gates_fixtures import until

STALE = "The stale run's answer, written while its lease was gone."


async def _thread_let_go(redis_url: str, prefix: str, timeout_s: float = 20) -> None:
    """Until no run holds a thread's lease (bounded)."""
    client = aioredis.from_url(redis_url)

    async def let_go() -> bool:
        return not [k async for k in client.scan_iter(match=f"{prefix}:lease:*")]

    try:
        await until(let_go, f"every thread of {prefix} to be let go", timeout_s)
    finally:
        await client.aclose()


async def test_a_worker_paused_past_its_lease_cannot_overwrite_the_answer(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    scenario: Scenario,
) -> None:
    gemini.script(
        Reply.call("get_trace", trace_id=scenario.error_trace_ids[0]),
        # Answered while the first worker is stopped: it reads this when it wakes up.
        Reply(parts=({"text": STALE},), delay_s=1.0),
        Reply.text(ANSWER),  # the run that took the turn over
    )
    fleet = fleet_for(WORKER_MODE="queue")
    serve, paused = fleet.serve(), fleet.worker()
    await asyncio.gather(serve.ready(), paused.ready())
    root = await ask(slack, serve)
    await requests_reach(gemini, 2)

    paused.signal(signal.SIGSTOP)
    taker = fleet.worker()
    await taker.ready()
    await answered(slack, root, ANSWER, fleet, timeout_s=60)
    # The run that took over has finished and let the thread go: the paused run wakes to a
    # thread nobody holds, whose turn is done (its heartbeat must not take the lease again).
    await _thread_let_go(fleet.env["REDIS_URL"], fleet.env["REDIS_PREFIX"])
    edits_before = len(slack.calls_to("chat.update"))
    paused.signal(signal.SIGCONT)
    await asyncio.sleep(8)  # the woken run reads its stale reply and tries to go on

    thread = slack.thread("C1", root)
    assert len(thread) == 1 and ANSWER in thread[0].text, [m.text for m in thread]
    written = [str(c.args.get("text", "")) for c in slack.calls if c.method.startswith("chat.")]
    assert not any(STALE in text for text in written)
    assert len(slack.calls_to("chat.update")) == edits_before
    assert len(gemini.requests) == 3
