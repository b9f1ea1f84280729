"""A run that lost its thread (paused past its lease while another worker took the turn
over) writes nothing more to the thread's checkpoint."""

import asyncio

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from graph.checkpoint import Superseded
from graph.runner import Investigator
from sandbox import GeminiSimulator, Reply, TempoSimulator


async def test_a_superseded_run_cannot_overwrite_the_newer_run_s_checkpoint(
    investigator: Investigator, gemini: GeminiSimulator, tempo: TempoSimulator, thread_id: str
) -> None:
    turn = f"{thread_id}@1.0"
    owner = {"stale": True}

    async def stale_fence() -> None:
        if owner["stale"]:
            raise Superseded("another worker holds the thread")

    gemini.script(
        Reply.call("query_tempo_traces", traceql="{ status = error }"),
        Reply.text("the new owner's answer"),
    )
    owner["stale"] = False
    # The first run's tool call is slow (within TEMPO_TIMEOUT): the run is "paused" there.
    tempo.faults.latency_s = 0.8
    first = asyncio.create_task(
        investigator.investigate(thread_id, "why 500s?", "U1", turn_id=turn, fence=stale_fence)
    )
    await tempo.wait_for_request("/api/search")
    tempo.faults.latency_s = 0
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    async with asyncio.timeout(5):  # the model's tool call is saved in the background
        while (await investigator.graph.aget_state(config)).next != ("tools",):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    # The lease moves on: the first run's fence now refuses, and another run takes the turn
    # over from the checkpoint and finishes it while the first is still waiting.
    owner["stale"] = True
    second = await investigator.investigate(thread_id, "why 500s?", "U1", turn_id=turn)
    assert second.answer == "the new owner's answer"

    # Its slow tool result arrives after the new owner finished. With background
    # checkpointing the refused write may surface as Superseded or only end the run.
    stale = (await asyncio.gather(first, return_exceptions=True))[0]
    assert isinstance(stale, Superseded) or getattr(stale, "status", None) == "failed"
    messages = (
        await investigator.graph.aget_state({"configurable": {"thread_id": thread_id}})
    ).values["messages"]
    assert isinstance(messages[-1], AIMessage)
    assert messages[-1].text == "the new owner's answer"
