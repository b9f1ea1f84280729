"""The ActionRequest state machine: legal moves only, terminal states final."""

import asyncio
import contextlib

import pytest
import redis.asyncio as aioredis

from gates.model import ActionRequest, IllegalTransition, check_transition
from gates.pipeline import ActionPipeline
from gates.store import ActionStore, RequestNotFound
from tests.gates_fixtures import until
from tests.test_action_aftermath import HeldAt


def test_terminal_states_never_change() -> None:
    for terminal in ("refused", "rejected", "expired", "succeeded", "failed", "aborted"):
        with pytest.raises(IllegalTransition, match="is terminal"):
            check_transition(terminal, "approved")


def test_approval_cannot_skip_execution() -> None:
    with pytest.raises(IllegalTransition, match="pending_approval → succeeded is not a legal"):
        check_transition("pending_approval", "succeeded")


async def test_an_illegal_transition_fails_loudly_and_changes_nothing(
    pipeline: ActionPipeline,
) -> None:
    request = ActionRequest(
        action="scale", namespace="shop", deployment="x", thread_key="t", requester="U"
    )
    await pipeline.store.create(request)
    with pytest.raises(IllegalTransition):
        await pipeline.store.transition(request.id, "succeeded", "U")
    assert (await pipeline.store.get(request.id)).status == "proposed"


async def test_a_request_id_cannot_be_created_twice(pipeline: ActionPipeline) -> None:
    request = ActionRequest(
        action="scale", namespace="shop", deployment="x", thread_key="t", requester="U"
    )
    await pipeline.store.create(request)
    with pytest.raises(ValueError, match="already exists"):
        await pipeline.store.create(request)


async def test_a_process_dying_as_it_indexes_a_request_leaves_no_request_its_thread_cannot_see(
    pipeline: ActionPipeline, redis_url: str
) -> None:
    """Creating a request and entering it in its thread's index are one step: a process
    whose Redis connection dies at the first command naming the thread's index (held by a
    loopback proxy, then the process's work cancelled) leaves either both or neither."""
    request = ActionRequest(
        action="scale", namespace="shop", deployment="x", thread_key="T1:C1:1.2", requester="U"
    )
    index = pipeline.store.thread_index(request.thread_key).encode()
    async with HeldAt(redis_url, index) as proxy:
        dying = aioredis.from_url(proxy.url)
        store = ActionStore(dying, prefix=pipeline.store.prefix)
        create = asyncio.create_task(store.create(request))
        await until(proxy.held.is_set, "the command naming the thread's index", timeout_s=5)
        create.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await create
        await dying.aclose(close_connection_pool=True)

    in_thread = [found.id for found in await pipeline.store.for_thread(request.thread_key)]
    try:
        await pipeline.store.get(request.id)
        stored = True
    except RequestNotFound:
        stored = False
    assert (stored, in_thread) in ((False, []), (True, [request.id]))
