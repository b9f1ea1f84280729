"""Turns under harsher faults: Redis losing its data, evicted records, SIGTERM with a
queue of waiting turns, a resume after a proposal (real processes, real Redis Stack, the
simulators; the harness of tests/test_durable_turns.py)."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

import redis.asyncio as aioredis

from gates.store import ActionStore, as_text
from sandbox import GeminiSimulator, Reply
from sandbox.fleet import Fleet, RedisStackServer
from sandbox.kubernetes import KubernetesSimulator
from sandbox.scenarios import Scenario
from sandbox.slack import SlackMessage, SlackSimulator
from tests.fleet_fixtures import (
    ANSWER,
    answered,
    ask,
    driver_for,
    requests_reach,
    script_slow_answer_after_a_tool,
    serving,
)
from tests.gates_fixtures import APPROVER, REQUESTER, SAFE, SECOND_APPROVER, write_kubeconfig
from tests.proposals import ROLLBACK, ROLLBACK_PROPOSED


async def _wait(condition: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await asyncio.sleep(0.1)


def _texts(thread: list[SlackMessage]) -> list[str]:
    return [m.text for m in thread]


async def _restart_without_persistence(redis_server: RedisStackServer) -> None:
    """What a Redis without AOF/RDB (or a failover to an empty replica) does: it comes back
    empty."""
    await redis_server.stop()
    shutil.rmtree(redis_server.dir, ignore_errors=True)
    redis_server.dir.mkdir()
    await asyncio.sleep(1)
    await redis_server.start()


async def test_redis_back_empty_mid_turn_still_ends_in_the_answer(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    scenario: Scenario,
    redis_server: RedisStackServer,
) -> None:
    """Redis comes back empty (no persistence, a failover to an empty replica) while the
    model answers: the worker, still holding the turn in memory, takes the vanished lease
    again and delivers the answer."""
    script_slow_answer_after_a_tool(gemini, scenario, delay_s=6.0, spare_answers=3)
    fleet = fleet_for(redis=redis_server.url)
    root = await ask(slack, await serving(fleet))
    await requests_reach(gemini, 2)
    await _restart_without_persistence(redis_server)

    deadline = time.monotonic() + 45
    thread = slack.thread("C1", root)
    while time.monotonic() < deadline and not any(ANSWER in t for t in _texts(thread)):
        await asyncio.sleep(0.2)
        thread = slack.thread("C1", root)
    texts = _texts(thread)
    assert any(ANSWER in t for t in texts), (
        f"thread shows {texts}, not the answer, 45 s after the model answered\n"
        + fleet.logs()[-3000:]
    )
    assert not any("could not answer" in t for t in texts), texts


async def test_after_redis_comes_back_empty_new_questions_still_get_answers(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    redis_server: RedisStackServer,
) -> None:
    """After Redis lost its data while idle, the next incident question is answered."""
    gemini.script(*[Reply.text(ANSWER)] * 4)
    fleet = fleet_for(redis=redis_server.url)
    driver = driver_for((await serving(fleet)).url)
    first = slack.new_ts()
    await driver.mention("checkout 500s, why?", ts=first)
    await answered(slack, first, ANSWER, fleet, timeout_s=30)

    await _restart_without_persistence(redis_server)
    await asyncio.sleep(3)
    second = slack.new_ts()
    status, _ = await driver.mention("and payments, why?", ts=second)
    assert status == 200
    await answered(slack, second, ANSWER, fleet, timeout_s=30)


STALE = "STALE: the paused worker's answer, written after another worker finished the turn."


def _actions_fleet(fleet_for: Callable[..., Fleet], kube: KubernetesSimulator, tmp: Path) -> Fleet:
    """Processes that may propose actions on the Kubernetes simulator."""
    return fleet_for(
        KUBECONFIG=str(write_kubeconfig(tmp / "kubeconfig", kube.url)),
        ACTIONS_ENABLED="true",
        ACTION_APPROVERS=f"{APPROVER},{SECOND_APPROVER}",
    )


async def _ask_and_kill_after(
    fleet: Fleet, slack: SlackSimulator, gemini: GeminiSimulator, *, requests: int
) -> str:
    """Ask a `serve` of the fleet to fix checkout, SIGKILL it once the model has had
    `requests` requests, and start another; the thread's root."""
    first = await serving(fleet)
    root = await ask(slack, first, "fix checkout", user=REQUESTER)
    await requests_reach(gemini, requests)
    first.signal(signal.SIGKILL)
    await first.exited(5)
    fleet.serve()
    return root


async def _settled_thread(slack: SlackSimulator, root: str, fleet: Fleet) -> list[SlackMessage]:
    """The thread once the resumed turn asked for approval, and its card had time to come."""
    await answered(slack, root, "needs your approval", fleet, timeout_s=60)
    await asyncio.sleep(2)
    return slack.thread("C1", root)


async def test_a_turn_resumed_after_proposing_an_action_still_posts_its_card(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
    tmp_path: Path,
) -> None:
    """Killed after `propose_action` was checkpointed: the resumed turn finds its proposal
    in the action store and posts its approval card."""
    gemini.script(
        ROLLBACK,
        SAFE,  # the judge
        Reply(parts=({"text": "too late"},), delay_s=120.0),  # the process dies waiting
        ROLLBACK_PROPOSED,
    )
    fleet = _actions_fleet(fleet_for, kube, tmp_path)
    # Killed once the proposal is judged, while the answer is being written.
    root = await _ask_and_kill_after(fleet, slack, gemini, requests=3)
    thread = await _settled_thread(slack, root, fleet)

    cards = [m for m in thread if m.text.startswith("Proposed action:")]
    assert len(cards) == 1, f"{len(cards)} approval card(s); thread: {_texts(thread)}"


async def test_sigterm_hands_the_thread_s_waiting_turns_back_to_the_queue(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    redis_url: str,
) -> None:
    """A stopping worker gives the jobs of turns waiting behind its running turn back to
    the queue at once, so another worker runs them in order."""
    gemini.script(
        Reply(parts=({"text": "answer to turn 1"},), delay_s=6.0),
        Reply.text("answer to turn 2"),
        Reply.text("answer to turn 3"),
    )
    fleet = fleet_for(WORKER_MODE="queue", SHUTDOWN_GRACE="2", RECOVERY="30")
    serve, leaving = fleet.serve(), fleet.worker()
    await asyncio.gather(serve.ready(), leaving.ready())
    driver = driver_for(serve.url)
    root = slack.new_ts()
    await driver.mention("turn 1", ts=root)
    await requests_reach(gemini, 1)
    later = [f"{root[:-6]}{n:06d}" for n in (200, 300)]
    for n, ts in enumerate(later, start=2):
        await driver.mention(f"turn {n}", ts=ts, thread_ts=root)
    prefix = fleet.env["REDIS_PREFIX"]
    client = aioredis.from_url(redis_url)

    async def statuses() -> dict[int, str | None]:
        found = {}
        for n, ts in enumerate(later, start=2):
            thread_key = f"{driver.team}:C1:{root}"
            raw = await client.get(f"saq:job:{prefix}:turns:{thread_key}@{ts}")
            found[n] = json.loads(raw)["status"] if raw else None
        return found

    try:
        # The waiting jobs are taken by `leaving` (32 slots): both active before it stops.
        deadline = time.monotonic() + 30
        while set((await statuses()).values()) != {"active"}:
            assert time.monotonic() < deadline, f"waiting jobs not taken: {await statuses()}"
            await asyncio.sleep(0.05)
        leaving.signal(signal.SIGTERM)
        assert await leaving.exited(15) == 0
        after = await statuses()
    finally:
        await client.aclose()
    started = time.monotonic()
    fleet.worker()
    await answered(slack, root, "answer to turn 3", fleet, timeout_s=60)
    took = time.monotonic() - started
    assert all(s == "queued" for s in after.values()), (
        f"after SIGTERM the waiting turns' jobs are {after} (owned by an exited worker); "
        f"a new worker answered the thread's last turn only after {took:.0f}s"
    )


async def test_a_turn_whose_record_was_evicted_does_not_wedge_its_thread(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    redis_url: str,
) -> None:
    """A turn hash evicted under memory pressure (a `volatile-*` policy) is dropped from
    its thread's queue; the turns behind it still run."""
    gemini.script(*[Reply.text(ANSWER)] * 3)
    fleet = fleet_for(WORKER_MODE="queue")
    driver = driver_for((await serving(fleet)).url)
    root = slack.new_ts()
    await driver.mention("first question", ts=root)  # recorded; no worker yet
    prefix = fleet.env["REDIS_PREFIX"]
    thread_key = f"{driver.team}:C1:{root}"
    client = aioredis.from_url(redis_url)
    try:
        assert await client.delete(f"{prefix}:turn:{thread_key}@{root}") == 1  # evicted
    finally:
        await client.aclose()
    follow_up = f"{root[:-6]}000200"
    await driver.mention("second question", ts=follow_up, thread_ts=root)
    fleet.worker()
    await answered(slack, root, ANSWER, fleet, timeout_s=40)


def test_the_worker_timing_keeps_the_recovery_promise() -> None:
    """Lease, heartbeat and sweep derived from RECOVERY never add up to more than it."""
    from bot.process.settings import Settings

    broken = {
        r: Settings(_env_file=None, recovery=r).worker.recovery_s
        for r in (10.0, 11.0, 12.0, 13.0, 14.0, 30.0)
    }
    assert all(bound <= r for r, bound in broken.items()), broken


async def test_redis_down_longer_than_the_lease_mid_turn_the_answer_still_comes(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    scenario: Scenario,
    redis_server: RedisStackServer,
) -> None:
    """Redis (with its AOF) away for 6 s, longer than the lease: the answer still comes,
    once."""
    script_slow_answer_after_a_tool(gemini, scenario, delay_s=4.0, spare_answers=3)
    fleet = fleet_for(redis=redis_server.url)
    root = await ask(slack, await serving(fleet))
    await requests_reach(gemini, 2)
    await redis_server.stop()
    await asyncio.sleep(6)
    await redis_server.start()
    thread = await answered(slack, root, ANSWER, fleet, timeout_s=40)
    assert len(thread) == 1, _texts(thread)


async def test_a_proposal_killed_while_the_judge_decides_is_refused_and_never_shown(
    fleet_for: Callable[..., Fleet],
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
    redis_url: str,
    tmp_path: Path,
) -> None:
    """Killed between recording a proposal and the judge's verdict: the resumed turn
    proposes again (its tool runs again) and shows that proposal only; the first one is
    refused as interrupted, not left `proposed` with a card nobody can act on."""
    gemini.script(
        ROLLBACK,
        Reply(parts=SAFE.parts, delay_s=120.0),  # the judge: the process dies waiting
        SAFE,  # the judge, asked again by the resumed turn
        ROLLBACK_PROPOSED,
    )
    fleet = _actions_fleet(fleet_for, kube, tmp_path)
    # Killed once the proposal is recorded, while the judge is being asked.
    root = await _ask_and_kill_after(fleet, slack, gemini, requests=2)
    thread = await _settled_thread(slack, root, fleet)
    prefix = fleet.env["REDIS_PREFIX"]
    redis = aioredis.from_url(redis_url)
    store = ActionStore(redis, prefix)
    ids = [as_text(k).rsplit(":", 1)[1] async for k in redis.scan_iter(f"{prefix}:action:*")]
    requests = sorted([await store.get(i) for i in ids], key=lambda r: r.created_at)
    await redis.aclose()

    cards = [m for m in thread if m.text.startswith("Proposed action:")]
    assert len(cards) == 1, f"{len(cards)} card(s); thread: {_texts(thread)}"
    assert [r.status for r in requests] == ["refused", "pending_approval"]
    assert "stopped before the rule gates and the judge had decided" in requests[0].history[-1].note
    assert cards[0].metadata is not None
    assert cards[0].metadata["event_payload"]["tag"] == f"card:{requests[1].id}"
