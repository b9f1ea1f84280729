"""A process killed after a step's writes were saved but before the checkpoint that folds
them in (LangGraph saves checkpoints in the background) leaves a checkpoint whose pending
task already has its result. The turn resumed from there goes on from that result; it is not
taken for finished (that posted "(empty answer)" after a worker was killed under load)."""

import asyncio
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from graph.runner import Investigator
from sandbox import GeminiSimulator, Reply
from sandbox.scenarios import Scenario

ANSWER = "payment-api throws NullPointerException after the deploy."


async def test_a_turn_whose_last_checkpoint_was_lost_after_its_tool_ran_resumes_to_the_answer(
    investigator: Investigator,
    gemini: GeminiSimulator,
    scenario: Scenario,
    thread_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    turn = f"{thread_id}@1.0"
    gemini.script(
        Reply.call("get_trace", trace_id=scenario.error_trace_ids[0]),
        Reply(parts=({"text": "too late"},), delay_s=60),  # the process dies waiting
        Reply.text(ANSWER),
    )
    saver: Any = investigator.graph.checkpointer
    put = saver.aput
    killing = asyncio.Event()

    async def put_lost_after_the_tool(config: Any, checkpoint: Any, *args: Any) -> Any:
        messages = checkpoint["channel_values"].get("messages", [])
        if any(isinstance(m, ToolMessage) for m in messages):
            await killing.wait()  # the process is killed before this put reaches Redis
            return config
        return await put(config, checkpoint, *args)

    monkeypatch.setattr(saver, "aput", put_lost_after_the_tool)
    killed = asyncio.create_task(
        investigator.investigate(thread_id, "why 500s?", "U1", turn_id=turn)
    )
    async with asyncio.timeout(10):
        while len(gemini.requests) < 2:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    killed.cancel()  # SIGKILL: nothing more of this run reaches Redis
    killing.set()
    async with asyncio.timeout(10):
        await asyncio.gather(killed, return_exceptions=True)
    monkeypatch.setattr(saver, "aput", put)
    snapshot = await investigator.graph.aget_state({"configurable": {"thread_id": thread_id}})
    assert [t.name for t in snapshot.tasks] == ["tools"] and snapshot.tasks[0].result

    async with asyncio.timeout(10):
        resumed = await investigator.investigate(thread_id, "why 500s?", "U1", turn_id=turn)

    assert resumed.answer == ANSWER
    assert len(gemini.requests) == 3  # the tool was not run again; the model step after it was
