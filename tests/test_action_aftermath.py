"""What follows an executed action survives the process that executed it: the circuit
breaker counts each execution exactly once, and the rollout of a success is followed to
the end by one process at a time, even when the executor or the follower is killed
(SIGKILL) or stopped by a rolling deploy (SIGTERM). Real processes, real Redis, real
kubernetes_asyncio against the simulator; the Redis connection of a process is cut at a
chosen command by a loopback proxy, not by changing its code."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from urllib.parse import urlparse

import pytest
import redis.asyncio as aioredis

from gates.model import ActionRequest, RolloutHealth
from gates.pipeline import ActionPipeline
from gates.reconciler import Reconciler
from sandbox import GeminiSimulator
from sandbox.fleet import Fleet
from sandbox.kubernetes import KubernetesSimulator, write_kubeconfig
from sandbox.slack import SlackMessage, SlackSimulator
from tests.fleet_fixtures import approval_card, driver_for, serving
from tests.gates_fixtures import (
    APPROVER,
    REQUESTER,
    SAFE,
    SECOND_APPROVER,
    PipelineFactory,
    audit_entries,
    kill_mid_approval,
    propose_scale,
    until,
)
from tests.proposals import ROLLBACK, ROLLBACK_PROPOSED
from tests.slack_fixtures import BotFactory

THREAD = "T1:C1:1700000000.000500"
TARGET = "shop/payment-api"


class HeldAt:
    """A loopback proxy in front of Redis that forwards a client's commands until one
    contains every one of `markers`; that command (and anything after it on its
    connection) is held: the client waits for an answer that never comes."""

    def __init__(self, redis_url: str, *markers: bytes) -> None:
        parsed = urlparse(redis_url)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 6379)
        self.db = parsed.path or "/0"
        self.markers = markers
        self.held = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"redis://127.0.0.1:{port}{self.db}"

    async def __aenter__(self) -> HeldAt:
        self._server = await asyncio.start_server(self._connect, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _connect(
        self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        server_r, server_w = await asyncio.open_connection(*self.upstream)
        self._writers += [client_w, server_w]

        async def commands() -> None:
            while data := await client_r.read(65536):
                if all(marker in data for marker in self.markers):
                    self.held.set()
                    return  # never forwarded
                server_w.write(data)
                await server_w.drain()

        async def answers() -> None:
            while data := await server_r.read(65536):
                client_w.write(data)
                await client_w.drain()

        with contextlib.suppress(ConnectionError):
            await asyncio.gather(commands(), answers())


# The breaker's count is the only script that names a breaker window and the index of
# executions to count (the breaker's state read names the window only).
BREAKER_COUNT = (b"EVALSHA", b":breaker:executions:", b":actions:uncounted")


async def _breaker(pipeline: ActionPipeline) -> tuple[int, int, bool]:
    state = await pipeline.breaker.state(TARGET)
    return state.recent_executions, state.consecutive_failures, state.open


async def _approve_killed_before_the_count(
    pipeline: ActionPipeline, request: ActionRequest, redis_url: str, kubeconfig: Path
) -> None:
    """Approve `request` in a process of its own whose breaker count never reaches Redis,
    and SIGKILL it there: the execution has ended, the count has not been made."""
    async with HeldAt(redis_url, *BREAKER_COUNT) as proxy:
        await kill_mid_approval(
            redis_url=proxy.url,
            prefix=pipeline.store.prefix,
            kubeconfig=kubeconfig,
            request_id=request.id,
            lease_s=pipeline.store.lease_s,
            at=proxy.held.is_set,
        )


async def test_a_success_whose_executor_died_before_the_count_is_counted_once(
    pipeline_for: PipelineFactory,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
    kubeconfig: Path,
    redis_url: str,
) -> None:
    pipeline = pipeline_for()
    request = await propose_scale(pipeline, gemini, THREAD)
    await _approve_killed_before_the_count(pipeline, request, redis_url, kubeconfig)
    ended = await pipeline.store.get(request.id)
    before = await _breaker(pipeline)

    # Two processes' reconcilers at once, then again: one count between them.
    await asyncio.gather(Reconciler(pipeline).run_once(), Reconciler(pipeline_for()).run_once())
    await Reconciler(pipeline).run_once()

    assert ended.status == "succeeded" and kube.writes
    assert before == (0, 0, False)  # the kill came between the transition and the count
    assert await _breaker(pipeline) == (1, 0, False)
    assert await pipeline.store.uncounted() == []


async def test_failures_whose_executor_died_before_the_count_still_open_the_breaker(
    pipeline_for: PipelineFactory,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
    kubeconfig: Path,
    redis_url: str,
) -> None:
    pipeline = pipeline_for(breaker_failure_threshold=2)
    kube.faults.status, kube.faults.methods = 403, ("PATCH",)  # every write refused
    for n in range(2):
        request = await propose_scale(pipeline, gemini, f"{THREAD}{n}")
        await _approve_killed_before_the_count(pipeline, request, redis_url, kubeconfig)
        assert (await pipeline.store.get(request.id)).status == "failed"
    assert await _breaker(pipeline) == (0, 0, False)

    await Reconciler(pipeline).run_once()
    await Reconciler(pipeline).run_once()

    assert await _breaker(pipeline) == (2, 2, True)


async def test_an_execution_counted_again_after_its_window_is_not_counted_twice(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    """An execution that ended longer ago than the window (every process was down) leaves
    no window entry to tell a second count from a first: the request itself says it was
    counted, so the failure streak moves once."""
    request = await propose_scale(pipeline, gemini, THREAD)
    store = pipeline.store
    await store.transition(request.id, "approved", APPROVER, expect="pending_approval")
    await store.transition(request.id, "executing", APPROVER, expect="approved")
    failed = await store.transition(request.id, "failed", "test", expect="executing")
    long_ago = time.time() - 2 * pipeline.policy.breaker_window_s
    await store.redis.zadd(store.uncounted_index, {failed.id: long_ago})  # its end mark

    first = await pipeline.count(failed, long_ago)
    between = await _breaker(pipeline)  # reading the state drops what left the window
    again = [await pipeline.count(failed, long_ago), await pipeline.count(failed)]

    assert (first, again) == (True, [False, False])
    assert between == (0, 1, False)
    assert await _breaker(pipeline) == (0, 1, False)


async def test_only_a_real_success_is_left_to_follow(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    real, dry = pipeline_for(), pipeline_for(actions_enabled=False)
    succeeded = await propose_scale(real, gemini, THREAD)
    dry_run = await propose_scale(dry, gemini, THREAD, replicas=5)
    failed = await propose_scale(real, gemini, THREAD, deployment="fresh-svc", replicas=3)
    await dry.approve(dry_run.id, APPROVER)  # first: it changes nothing
    await real.approve(succeeded.id, APPROVER)
    kube.faults.status, kube.faults.methods = 403, ("PATCH",)
    await real.approve(failed.id, APPROVER)

    statuses = [(await real.store.get(r.id)).status for r in (succeeded, dry_run, failed)]
    assert statuses == ["succeeded", "succeeded", "failed"]
    assert await real.store.unfollowed() == [succeeded.id]
    assert [r.id for r in await Reconciler(real).to_follow()] == [succeeded.id]


async def test_a_recorded_rollout_whose_mark_a_race_left_is_not_followed_again(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    """A success's mark to follow, left in the index after its rollout was recorded (the
    state a race leaves), is dropped by the reconciler, not handed out to be followed."""
    request = await _succeeded(pipeline, gemini)
    health = RolloutHealth(healthy=True, detail="rolled out: 4/4 available")
    assert await pipeline.store.record_rollout(request.id, health, "follower-a") is not None
    await pipeline.store.redis.zadd(pipeline.store.unfollowed_index, {request.id: time.time()})

    assert await Reconciler(pipeline).to_follow() == []
    assert await pipeline.store.unfollowed() == []
    assert await _rollouts_recorded(pipeline, request.id) == 1


async def _succeeded(pipeline: ActionPipeline, gemini: GeminiSimulator) -> ActionRequest:
    request = await propose_scale(pipeline, gemini, THREAD)
    result = await pipeline.approve(request.id, APPROVER)
    assert result.request is not None and result.request.status == "succeeded", result
    return result.request


async def _rollouts_recorded(pipeline: ActionPipeline, request_id: str) -> int:
    audit = await audit_entries(pipeline.store, request_id)
    return sum(e["event"] == "rollout_followed" for e in audit)


async def test_while_one_process_follows_a_rollout_no_other_does(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    """The follower's lease is short and renewed: long after it would have lapsed, another
    process still finds the rollout followed and leaves it alone."""
    lease_s = 0.3
    follower = pipeline_for(lease_s=lease_s, rollout_watch_s=20, rollout_poll_s=0.05)
    other = pipeline_for(lease_s=lease_s, rollout_watch_s=20, rollout_poll_s=0.05)
    kube.rollout_delay_s = 2.5
    request = await _succeeded(follower, gemini)
    following = asyncio.create_task(follower.follow_rollout(request))
    lease = follower.store.follow_lease_key(request.id)
    await until(lambda: follower.store.redis.exists(lease), "the follower to take its lease")

    await asyncio.sleep(4 * lease_s)
    meanwhile = await asyncio.wait_for(other.follow_rollout(request), 1.0)
    still_following = not following.done()
    followed = await asyncio.wait_for(following, 20)

    assert meanwhile is None and still_following
    assert followed is not None and followed.rollout is not None and followed.rollout.healthy
    assert await _rollouts_recorded(follower, request.id) == 1
    assert await follower.store.unfollowed() == []
    assert not await follower.store.redis.exists(lease)  # released at once


async def test_a_resumed_follow_keeps_the_deadline_counted_from_the_success(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    pipeline = pipeline_for(rollout_watch_s=2, rollout_poll_s=0.05)
    kube.faults.pods_never_available = True
    await _succeeded(pipeline, gemini)
    await asyncio.sleep(1.5)  # its first follower died; the reconciler comes by now

    (resumed,) = await Reconciler(pipeline).to_follow()
    started = time.monotonic()
    followed = await pipeline.follow_rollout(resumed)
    took = time.monotonic() - started

    assert followed is not None and followed.rollout is not None
    assert followed.rollout.detail == "not healthy after 2 s: 4/6 available"
    assert took < 1.0, f"followed {took:.1f}s more: the deadline restarted on resume"
    assert await Reconciler(pipeline).to_follow() == []


def _actions_fleet(fleet_for: Callable[..., Fleet], kube: KubernetesSimulator, tmp: Path) -> Fleet:
    """`serve` processes that act on the Kubernetes simulator; a dead process's action work
    (and so its follow lease, ACTION_LEASE when shorter than 15 s) is taken over in 3 s."""
    return fleet_for(
        KUBECONFIG=str(write_kubeconfig(tmp / "kubeconfig", kube.url)),
        ACTIONS_ENABLED="true",
        ACTION_APPROVERS=f"{APPROVER},{SECOND_APPROVER}",
        KUBE_TIMEOUT="0.5",
        ACTION_LEASE="3s",
        RECONCILE_INTERVAL="1s",
        ROLLOUT_WATCH_TIMEOUT="60s",
    )


def _status_line(card: SlackMessage) -> str:
    """The card's lines under the gate decisions: status, rollout, notes."""
    gates = next(i for i, b in enumerate(card.blocks) if "*judge*" in str(b))
    return "\n".join(
        b["elements"][0]["text"] for b in card.blocks[gates + 1 :] if b["type"] == "context"
    )


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    yield client
    await client.aclose()


async def _stopped_while_following(
    fleet: Fleet,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    redis: aioredis.Redis,
    signum: signal.Signals,
) -> tuple[SlackMessage, str]:
    """A `serve` posts a rollback card, executes it on a click, and gets `signum` while it
    follows the rollout; the card and the request id."""
    gemini.script(ROLLBACK, SAFE, ROLLBACK_PROPOSED)
    first = await serving(fleet)
    driver = driver_for(first.url)
    root = slack.new_ts()
    await driver.mention("fix checkout", ts=root, user=REQUESTER)

    posted, request_id = await approval_card(slack, root, fleet)
    await driver.click(
        "approve_action", request_id, user=APPROVER, channel="C1", message_ts=posted.ts
    )
    lease = f"{fleet.env['REDIS_PREFIX']}:actions:following:{request_id}"
    await until(lambda: redis.exists(lease), "the rollout to be followed")
    first.signal(signum)
    await first.exited(20)
    return posted, request_id


async def test_a_rollout_two_followers_finish_together_is_recorded_once(
    pipeline: ActionPipeline, gemini: GeminiSimulator
) -> None:
    request = await _succeeded(pipeline, gemini)
    health = RolloutHealth(healthy=True, detail="rolled out: 4/4 available")

    both = await asyncio.gather(
        pipeline.store.record_rollout(request.id, health, "follower-a"),
        pipeline.store.record_rollout(request.id, health, "follower-b"),
    )

    assert sum(recorded is not None for recorded in both) == 1
    assert await _rollouts_recorded(pipeline, request.id) == 1
    assert await pipeline.store.unfollowed() == []


async def test_a_follow_resumed_past_its_deadline_is_not_judged_on_one_failed_read(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    pipeline = pipeline_for(rollout_watch_s=1, rollout_poll_s=0.05)
    await _succeeded(pipeline, gemini)
    await asyncio.sleep(1.2)  # its follower died; every process was down past the timeout
    (resumed,) = await Reconciler(pipeline).to_follow()
    kube.faults.status, kube.faults.status_times, kube.faults.methods = 500, 1, ("GET",)

    followed = await pipeline.follow_rollout(resumed)

    assert followed is not None and followed.rollout is not None
    assert followed.rollout.healthy, followed.rollout.detail


async def test_a_status_read_before_the_deadline_is_not_the_verdict_when_later_reads_fail(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    pipeline = pipeline_for(rollout_watch_s=1, rollout_poll_s=0.1)
    kube.faults.pods_never_available = True
    scaled = await _succeeded(pipeline, gemini)

    def reads_fail() -> None:  # from just before the deadline on
        kube.faults.status, kube.faults.status_times, kube.faults.methods = 500, 100, ("GET",)

    asyncio.get_running_loop().call_later(0.8, reads_fail)
    followed = await pipeline.follow_rollout(scaled)

    assert followed is not None and followed.rollout is not None
    assert followed.rollout.detail.startswith("rollout status unreadable at its deadline")
    assert followed.rollout.reverse == ""  # no undo suggested on a status it could not read


async def test_a_rollout_never_read_is_recorded_unreadable_with_no_undo_suggested(
    pipeline_for: PipelineFactory, gemini: GeminiSimulator, kube: KubernetesSimulator
) -> None:
    pipeline = pipeline_for(rollout_watch_s=0.2, rollout_poll_s=0.05)
    scaled = await _succeeded(pipeline, gemini)
    kube.faults.status, kube.faults.methods = 500, ("GET",)  # the API server reads fail

    followed = await pipeline.follow_rollout(scaled)

    assert followed is not None and followed.rollout is not None
    assert followed.rollout.detail.startswith("rollout status unreadable")
    assert (followed.rollout.healthy, followed.rollout.reverse) == (False, "")


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "stopped"])
async def test_a_rollout_its_follower_left_is_followed_to_the_end_by_another_process(
    signum: signal.Signals,
    fleet_for: Callable[..., Fleet],
    bot_for: BotFactory,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
    redis: aioredis.Redis,
    tmp_path: Path,
) -> None:
    """SIGKILL, or SIGTERM in a rolling deploy (the stopping process waits 10 s for its
    listener work, then leaves): the card still says how the rollout went, said once."""
    kube.rollout_delay_s = 14.0  # longer than a stopping process waits
    fleet = _actions_fleet(fleet_for, kube, tmp_path)
    card, request_id = await _stopped_while_following(fleet, slack, gemini, redis, signum)
    prefix = fleet.env["REDIS_PREFIX"]
    async with bot_for(
        redis_prefix=prefix, kube_timeout=0.5, action_lease="3s", reconcile_interval="1s"
    ) as survivor:
        actions = survivor.services.cards.actions
        assert actions is not None
        left = await actions.store.get(request_id)
        await until(lambda: "rolled out" in _status_line(card), "the card to show the rollout", 40)
        assert await survivor.services.jobs.join(10)

    assert (left.status, left.rollout) == ("succeeded", None), fleet.logs()
    assert _status_line(card).split("\n")[-1] == ":large_green_circle: rolled out: 4/4 available"
    assert await _rollouts_recorded(actions, request_id) == 1
    assert await actions.store.unfollowed() == []
