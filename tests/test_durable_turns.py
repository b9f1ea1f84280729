"""No question is lost: real `tracegate serve` / `tracegate worker` processes, killed with
SIGKILL, stopped with SIGTERM, and a Redis server stopped and started mid-turn."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable

import redis.asyncio as aioredis

from sandbox import GeminiRequest, GeminiSimulator, Reply, TempoSimulator
from sandbox.fleet import Fleet, RedisStackServer, answer_by_question, drive_load
from sandbox.scenarios import Scenario
from sandbox.slack import SlackMessage, SlackSimulator
from tests.fleet_fixtures import (
    ANSWER,
    TIMING,
    answered,
    ask,
    driver_for,
    requests_reach,
    script_slow_answer_after_a_tool,
    serving,
)

SLOW = 120.0  # a model reply that never comes in time: the process dies waiting for it
RECOVERY_S = float(TIMING["RECOVERY"])  # the fleet's RECOVERY: the promise under test
# Past RECOVERY, what the bound allows for a loaded machine: the resumed process's first
# model call being scheduled, and polling granularity. Not a process start: the bound
# counts from when the process that takes over is up.
MARGIN_S = 3.0


def resumed_within_recovery(gemini: GeminiSimulator, since: float) -> None:
    """The turn's resumed step (its third model request) came within RECOVERY of `since`:
    when the holder was dead and a process that can take the turn over was up."""
    waited = gemini.requests[2].at - since
    assert waited <= RECOVERY_S + MARGIN_S, f"resumed {waited:.1f}s after, RECOVERY={RECOVERY_S}"


def first_agent_calls(requests: list[GeminiRequest]) -> int:
    """Requests that saw no tool result yet: the turn's first agent step."""
    return sum(
        not any("functionResponse" in part for c in r.contents for part in c.get("parts", []))
        for r in requests
    )


def script_slow_second_step(gemini: GeminiSimulator, scenario: Scenario) -> None:
    gemini.script(
        Reply.call("get_trace", trace_id=scenario.error_trace_ids[0]),
        Reply(parts=({"text": "too late"},), delay_s=SLOW),
        Reply.text(ANSWER),
    )


def assert_one_answer_replacing_the_placeholder(thread: list[SlackMessage]) -> None:
    assert len(thread) == 1, [m.text for m in thread]  # the placeholder, now the answer
    assert ANSWER in thread[0].text and thread[0].edits >= 1


async def test_a_killed_inline_serve_is_restarted_and_the_turn_resumes_from_its_checkpoint(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    scenario: Scenario,
) -> None:
    script_slow_second_step(gemini, scenario)
    fleet = fleet_for()
    first = await serving(fleet)
    root = await ask(slack, first, "checkout is throwing 500s, why?")
    await requests_reach(gemini, 2)  # the tool ran and was checkpointed; the model is slow

    first.signal(signal.SIGKILL)
    await first.exited(5)
    second = fleet.serve()
    await second.ready()
    up_at = time.monotonic()
    thread = await answered(slack, root, ANSWER, fleet, timeout_s=60)

    resumed_within_recovery(gemini, up_at)
    assert_one_answer_replacing_the_placeholder(thread)
    assert len(gemini.requests) == 3
    assert first_agent_calls(gemini.requests) == 1  # the finished first step was not re-asked


async def test_a_killed_worker_s_turn_is_taken_up_by_another_worker(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    scenario: Scenario,
) -> None:
    script_slow_second_step(gemini, scenario)
    fleet = fleet_for(WORKER_MODE="queue")
    serve, doomed = fleet.serve(), fleet.worker()
    await asyncio.gather(serve.ready(), doomed.ready())
    root = await ask(slack, serve)
    await requests_reach(gemini, 2)

    doomed.signal(signal.SIGKILL)
    killed_at = time.monotonic()
    survivor = fleet.worker()
    await survivor.ready()
    up_at = time.monotonic()
    thread = await answered(slack, root, ANSWER, fleet, timeout_s=60)

    resumed_within_recovery(gemini, max(killed_at, up_at))
    assert_one_answer_replacing_the_placeholder(thread)
    assert first_agent_calls(gemini.requests) == 1


async def test_sigterm_hands_a_long_turn_to_another_worker_and_exits_within_the_grace(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    scenario: Scenario,
) -> None:
    script_slow_second_step(gemini, scenario)
    fleet = fleet_for(WORKER_MODE="queue", SHUTDOWN_GRACE="2")
    serve, leaving = fleet.serve(), fleet.worker()
    await asyncio.gather(serve.ready(), leaving.ready())
    root = await ask(slack, serve)
    await requests_reach(gemini, 2)
    staying = fleet.worker()
    await staying.ready()

    leaving.signal(signal.SIGTERM)
    assert await leaving.exited(15) == 0
    thread = await answered(slack, root, ANSWER, fleet, timeout_s=30)

    assert_one_answer_replacing_the_placeholder(thread)
    assert "handed" in leaving.log() and "back to the queue" in leaving.log()
    assert not any("Looking into it" in m.text or "Thinking" in m.text for m in thread)


async def test_a_redelivery_of_a_recorded_turn_is_taken_care_of_not_dropped(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
) -> None:
    gemini.script(Reply.text(ANSWER))
    fleet = fleet_for(WORKER_MODE="queue")
    driver = driver_for((await serving(fleet)).url)
    root = slack.new_ts()
    # No worker yet: the turn is recorded and queued, and nobody runs it (as after a crash).
    assert (await driver.mention("why?", ts=root, event_id="Ev1"))[0] == 200
    assert (await driver.mention("why?", ts=root, event_id="Ev1", retry=1))[0] == 200
    fleet.worker()
    thread = await answered(slack, root, ANSWER, fleet, timeout_s=30)

    await asyncio.sleep(1)  # a second run would post a second placeholder by now
    assert len(thread) == 1 and len(gemini.requests) == 1


async def test_redis_stopped_and_started_mid_turn_and_the_answer_stands(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    scenario: Scenario,
    redis_server: RedisStackServer,
) -> None:
    # Spare answers: when the slow reply lands while Redis is still down (a loaded machine
    # restarts it slower), its step is not saved and is asked again after Redis is back.
    script_slow_answer_after_a_tool(gemini, scenario, delay_s=3.0, spare_answers=2)
    fleet = fleet_for(redis=redis_server.url)
    root = await ask(slack, await serving(fleet))
    await requests_reach(gemini, 2)  # the model is answering slowly

    await redis_server.stop()
    await asyncio.sleep(2)
    await redis_server.start()
    thread = await answered(slack, root, ANSWER, fleet, timeout_s=30)

    assert_one_answer_replacing_the_placeholder(thread)
    assert "Something went wrong" not in thread[0].text


async def test_a_turn_that_keeps_killing_its_worker_ends_in_a_plain_message(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
) -> None:
    gemini.script(*[Reply(parts=({"text": "too late"},), delay_s=SLOW)] * 3)
    fleet = fleet_for(WORKER_MODE="queue", MAX_ATTEMPTS="2")
    root = await ask(slack, await serving(fleet))
    for attempt in (1, 2):  # each run of the turn crashes its worker
        worker = fleet.worker()
        await requests_reach(gemini, attempt, timeout_s=40)
        worker.signal(signal.SIGKILL)
        await worker.exited(5)
    fleet.worker()
    thread = await answered(slack, root, "could not answer this after 2 attempts", fleet, 60)

    (message,) = thread
    assert "quote reference" in message.text
    assert len(gemini.requests) == 2  # no third run


async def test_socket_mode_stops_on_sigterm_while_slack_is_unreachable(
    fleet_for: Callable[..., Fleet], slack: SlackSimulator
) -> None:
    fleet = fleet_for(SLACK_APP_TOKEN="xapp-sandbox", SLACK_API_URL="http://127.0.0.1:9/api/")
    serve = fleet.serve()
    await serve.ready()
    await asyncio.sleep(1)  # connecting, and failing, in the background

    serve.signal(signal.SIGTERM)
    assert await serve.exited(10) == 0


async def test_a_turn_whose_job_was_lost_is_queued_again_by_a_worker(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    redis_url: str,
) -> None:
    gemini.script(Reply.text(ANSWER))
    fleet = fleet_for(WORKER_MODE="queue")
    root = await ask(slack, await serving(fleet), "why?")
    # The job vanishes from the queue (as when a worker dies in the middle of moving it).
    name = f"{fleet.env['REDIS_PREFIX']}:turns"
    client = aioredis.from_url(redis_url)
    try:
        async with asyncio.timeout(10):  # queued just after the 200
            while not (queued := await client.lrange(f"saq:{name}:queued", 0, -1)):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        (job_id,) = queued
        await client.delete(f"saq:{name}:queued", f"saq:{name}:incomplete", job_id)
    finally:
        await client.aclose()
    fleet.worker()
    thread = await answered(slack, root, ANSWER, fleet, timeout_s=30)

    assert len(thread) == 1
    assert "had lost its job; queued it again" in fleet.logs()


async def test_two_receivers_and_two_workers_answer_each_turn_once_in_arrival_order(
    fleet_for: Callable[..., Fleet], slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(*[lambda r: answer_by_question(r, delay_s=0.2)] * 30)
    fleet = fleet_for(WORKER_MODE="queue")
    receivers = [fleet.serve(), fleet.serve()]
    workers = [fleet.worker(), fleet.worker()]
    await asyncio.gather(*(p.ready() for p in receivers + workers))

    result = await drive_load(
        slack,
        gemini,
        [r.url for r in receivers],
        threads=4,
        turns_per_thread=5,
        redeliver=0.2,
        spread_s=1.0,
        timeout_s=60,
    )

    assert (result.answered, result.duplicates, result.lost) == (20, 0, 0), fleet.logs()
    assert result.inversions == 0


async def test_a_turn_killed_inside_a_tool_resumes_that_tool_not_the_model_step_before_it(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
) -> None:
    gemini.script(Reply.call("get_trace", trace_id=scenario.error_trace_ids[0]), Reply.text(ANSWER))
    tempo.faults.hang = True
    fleet = fleet_for(TEMPO_TIMEOUT="60")
    first = await serving(fleet)
    root = await ask(slack, first)
    await requests_reach(gemini, 1)
    await asyncio.sleep(1)  # the tool call is checkpointed; the tool waits on Tempo

    first.signal(signal.SIGKILL)
    await first.exited(5)
    tempo.faults.hang = False
    fleet.serve()
    await answered(slack, root, ANSWER, fleet, timeout_s=60)

    assert len(gemini.requests) == 2
    after_tool = gemini.requests[1].text()
    assert "interrupted" not in after_tool.lower()  # the tool ran again, for real
    assert "NullPointerException" in after_tool
