"""The ActionRequest state machine: legal moves only, terminal states final."""

import pytest

from gates.model import ActionRequest, IllegalTransition, check_transition
from gates.pipeline import ActionPipeline


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
