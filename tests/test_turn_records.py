"""Recording a turn (what happens before Slack hears 200), on a real Redis: the record and
its saq job in one step, and a burst of records sharing one round trip."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError
from saq.job import Status
from saq.queue.redis import RedisQueue

from bot.turn.saq_contract import queue_keys
from bot.turn.store import Recorded, Turn, TurnStore, turn_id_of
from bot.turn.worker import JOB_FUNCTION, WorkerTiming, enqueue_turn, job_for_record, turn_queue
from tests.redis_fixtures import wait_for

TIMING = WorkerTiming(recovery_budget_s=30)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url, client_name=f"records-{uuid.uuid4().hex[:8]}")
    yield client
    await client.aclose()


@dataclass
class Records:
    """A turn store and its job queue under a prefix of their own."""

    store: TurnStore
    queue: RedisQueue

    async def record(self, turn: Turn) -> Recorded:
        """What the ack path does: the record and its saq job in one step."""
        return await self.store.record(turn, job_for_record(self.queue, turn.id, TIMING))

    async def record_together(self, turns: list[Turn]) -> list[Recorded | BaseException]:
        """Records made in the same pass of the event loop; each its own reply or error."""
        return await asyncio.gather(*(self.record(t) for t in turns), return_exceptions=True)


def records_on(redis: aioredis.Redis) -> Records:
    prefix = f"rec{uuid.uuid4().hex[:8]}"
    return Records(TurnStore(redis, 3600, prefix), turn_queue(redis, prefix))


@pytest.fixture
def records(redis: aioredis.Redis) -> Records:
    return records_on(redis)


def _turn(ts: str, root: str = "1700000000.000100") -> Turn:
    thread = f"TREC:C1:{root}"
    return Turn(
        id=turn_id_of(thread, ts),
        thread=thread,
        team="TREC",
        channel="C1",
        root=root,
        ts=ts,
        user="U1",
        text="why?",
        event_id="",
    )


async def test_a_recorded_turn_s_job_is_saq_s_own_queued_in_the_same_step(
    records: Records,
) -> None:
    turn = _turn("1700000000.000100")

    recorded = await records.record(turn)
    job = await records.queue.job(turn.id)
    # What saq's own enqueue does for the same turn: nothing more to queue.
    queued_again = await enqueue_turn(records.queue, turn.id, TIMING)

    assert recorded == "queued"
    assert job is not None
    assert (job.function, job.kwargs, job.status) == (
        JOB_FUNCTION,
        {"turn_id": turn.id},
        Status.QUEUED,
    )
    assert (job.heartbeat, job.retries, job.timeout) == (TIMING.heartbeat_s, 1000, 0)
    assert await records.queue.count("queued") == 1
    assert queued_again is False


@pytest.mark.parametrize(
    "turn_id",
    ["TREC:C1:1700000000.000100@1700000000.000200", 'q"uote\\ é 9999999999999 \x00turn'],
    ids=["plain", "escapes-digits-and-the-stand-in"],
)
async def test_a_record_s_job_is_byte_for_byte_what_saq_serialises(
    records: Records, turn_id: str
) -> None:
    ours = job_for_record(records.queue, turn_id, TIMING)
    await enqueue_turn(records.queue, turn_id, TIMING)  # saq's own enqueue, for comparison
    saqs = await records.queue.job(turn_id)

    assert ours is not None and saqs is not None
    saqs.queued = json.loads(ours.payload)["queued"]  # the one field that is a clock
    assert ours.payload == records.queue.serialize(saqs)
    keys = queue_keys(records.queue)
    assert ours.keys == (keys.incomplete, saqs.id, keys.queued, saqs.abort_id)


async def test_a_redelivered_turn_is_recorded_before_and_queues_nothing_new(
    records: Records,
) -> None:
    turn = _turn("1700000000.000200")

    first = await records.record(turn)
    again = await records.record(turn)

    assert (first, again) == ("queued", "before")
    assert await records.queue.count("queued") == 1


async def test_a_job_saq_s_keys_refuse_leaves_the_record_standing(
    redis: aioredis.Redis, records: Records
) -> None:
    turn = _turn("1700000000.000300")
    await redis.set(queue_keys(records.queue).incomplete, "not a sorted set")

    recorded = await records.record(turn)

    assert recorded == "recorded"  # the caller queues the job later; the sweep would too
    assert await records.store.get(turn.id) is not None
    assert await records.store.head(turn.thread) == turn.id


async def test_a_burst_of_records_shares_one_connection_and_each_gets_its_own_reply(
    redis: aioredis.Redis, records: Records
) -> None:
    turns = [_turn(f"1700000001.{i:06d}", root=f"1700000001.{i:06d}") for i in range(50)]
    broken = turns[7]
    await redis.set(records.store._queue(broken.thread), "not a sorted set")

    replies = await records.record_together(turns)
    name = (await redis.client_getname()) or ""
    ours = [c for c in await redis.client_list() if c.get("name") == name]

    assert isinstance(replies[7], ResponseError)
    assert replies[:7] + replies[8:] == ["queued"] * 49
    assert await records.queue.count("queued") == 49
    assert len(ours) <= 2  # not one connection per record


async def _script_calls(redis: aioredis.Redis) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


@pytest.mark.parametrize(("burst", "invocations"), [(50, 1), (70, 2)])
async def test_a_burst_of_records_is_one_script_call_per_64_records(
    empty_redis_stack: str, burst: int, invocations: int
) -> None:
    """Counted on a Redis of its own: its command statistics count every client's script
    calls, and other tests run side by side (pytest-xdist)."""
    await wait_for(empty_redis_stack)
    redis = aioredis.from_url(empty_redis_stack)
    try:
        records = records_on(redis)
        # Its scripts already loaded, as in a running bot (the first call of a fresh Redis
        # is refused NOSCRIPT and sent again).
        await records.record(_turn("1700000005.000100", root="1700000005.000100"))
        turns = [_turn(f"1700000004.{i:06d}", root=f"1700000004.{i:06d}") for i in range(burst)]
        before = await _script_calls(redis)

        replies = await records.record_together(turns)

        assert replies == ["queued"] * burst
        assert await _script_calls(redis) - before == invocations
    finally:
        await redis.aclose()


async def test_a_redis_that_lost_its_scripts_is_given_them_again(empty_redis_stack: str) -> None:
    """On a Redis of its own: SCRIPT FLUSH would take every other test's scripts too."""
    await wait_for(empty_redis_stack)
    redis = aioredis.from_url(empty_redis_stack)
    try:
        records = records_on(redis)
        # Its scripts are loaded (by a record in another thread), then lost.
        await records.record(_turn("1700000002.000900", root="1700000002.000900"))
        await redis.script_flush()
        turns = [_turn(f"1700000002.{i:06d}") for i in range(3)]

        replies = await records.record_together(turns)

        assert replies == ["queued"] * 3
        assert [await records.store.head(turns[0].thread)] == [turns[0].id]
    finally:
        await redis.aclose()


async def test_a_record_that_cannot_be_sent_fails_alone_not_its_whole_batch(
    records: Records,
) -> None:
    good, bad = _turn("1700000003.000100"), _turn("1700000003.000200")
    bad = Turn(**{**bad.__dict__, "text": "why \udcff?"})  # not encodable as UTF-8

    replies = await records.record_together([good, bad])

    assert replies[0] == "queued"
    assert isinstance(replies[1], UnicodeEncodeError)
    assert await records.store.get(good.id) is not None


async def test_a_caller_cancelled_before_its_batch_is_sent_is_not_recorded(
    records: Records,
) -> None:
    turns = [_turn(f"1700000005.{i:06d}", root=f"1700000005.{i:06d}") for i in range(3)]
    calls = [asyncio.create_task(records.record(t)) for t in turns]
    await asyncio.sleep(0)  # each has joined the batch; the batch is sent in the next pass
    calls[1].cancel()

    replies = await asyncio.gather(*calls, return_exceptions=True)

    assert replies[0] == replies[2] == "queued"
    assert isinstance(replies[1], asyncio.CancelledError)
    assert await records.store.get(turns[1].id) is None  # Slack gets no 200: it delivers again


async def test_callers_of_a_flush_cancelled_before_it_ran_are_cancelled_not_left_waiting(
    records: Records,
) -> None:
    turns = [_turn(f"1700000006.{i:06d}", root=f"1700000006.{i:06d}") for i in range(3)]
    calls = [asyncio.create_task(records.record(t)) for t in turns]
    await asyncio.sleep(0)  # the callers have joined the batch
    await asyncio.sleep(0)  # the batch's flush task exists, not yet started
    for flush in records.store._record._flushing:
        flush.cancel()

    async with asyncio.timeout(5):
        replies = await asyncio.gather(*calls, return_exceptions=True)

    assert all(isinstance(reply, asyncio.CancelledError) for reply in replies)


async def test_a_queue_named_with_the_stand_in_s_digits_still_gets_saq_s_own_job(
    redis: aioredis.Redis,
) -> None:
    queue = turn_queue(redis, f"tg-9999999999999-{uuid.uuid4().hex[:6]}")
    turn_id = "TREC:C1:1700000000.000100@1700000000.000300"

    ours = job_for_record(queue, turn_id, TIMING)
    await enqueue_turn(queue, turn_id, TIMING)
    saqs = await queue.job(turn_id)

    assert ours is not None and saqs is not None
    saqs.queued = json.loads(ours.payload)["queued"]
    assert ours.payload == queue.serialize(saqs)
