"""A worker SIGKILLed mid-stream: the turn resumed by another process closes the dead run's
tasks, goes on in the same stream and stops it with the answer: one message, no task left
running, no stream left "thinking". Real `tracegate serve` processes."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable

from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.fleet import Fleet
from sandbox.scenarios import Scenario
from sandbox.slack import SlackMessage, SlackSimulator
from tests.fleet_fixtures import ANSWER, ask, requests_reach, serving


async def _until(check: Callable[[], SlackMessage | None], what: str, fleet: Fleet) -> SlackMessage:
    deadline = time.monotonic() + 60
    while (found := check()) is None:
        assert time.monotonic() < deadline, f"{what}\n{fleet.logs()}"
        await asyncio.sleep(0.05)
    return found


async def test_a_worker_killed_mid_stream_leaves_one_answer_and_no_running_task(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
) -> None:
    trace_id = scenario.error_trace_ids[0]
    gemini.script(Reply.call("get_trace", trace_id=trace_id), Reply.text(ANSWER))
    tempo.faults.hang = True  # the tool waits on Tempo while the process is killed
    fleet = fleet_for(SLACK_STREAMING="on", TEMPO_TIMEOUT="60")
    first = await serving(fleet)
    root = await ask(slack, first)
    await requests_reach(gemini, 1)

    def reading_the_trace() -> SlackMessage | None:
        for message in slack.thread("C1", root):
            if any(
                t["title"] == f"Reading trace {trace_id}" and t["status"] == "in_progress"
                for t in message.tasks().values()
            ):
                return message
        return None

    await _until(reading_the_trace, "the stream never showed the tool running", fleet)
    first.signal(signal.SIGKILL)
    await first.exited(5)
    tempo.faults.hang = False
    fleet.serve()

    def stopped() -> SlackMessage | None:
        thread = slack.thread("C1", root)
        return thread[0] if thread and not thread[0].streaming() else None

    message = await _until(stopped, "the stream was never stopped", fleet)
    assert len(slack.thread("C1", root)) == 1  # one message: the stream, with the answer
    assert json.dumps(message.blocks).count(ANSWER) == 1
    tasks = list(message.tasks().values())
    assert not [t for t in tasks if t["status"] in ("in_progress", "pending")]
    reads = [t for t in tasks if t["title"] == f"Reading trace {trace_id}"]
    assert (
        [(t["status"], t.get("output", "")[:11]) for t in reads]
        == [
            ("error", "interrupted"),  # the dead run's, closed by the run that resumed it
            ("complete", f"trace {trace_id}"[:11]),
        ]
    )
