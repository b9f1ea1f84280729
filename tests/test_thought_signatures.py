"""Gemini 3's thought signatures: the simulator issues one on the first function call of
each reply and refuses (400 INVALID_ARGUMENT) a request of the same turn that drops it, as
the real API does; tracegate, through langchain-google-genai, sends each one back as it
was issued, also after resuming a turn from its checkpoint."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from graph.runner import Investigator
from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.gemini import SKIP_SIGNATURE
from sandbox.scenarios import Scenario

QUESTION = {"role": "user", "parts": [{"text": "why is checkout failing?"}]}


async def _generate(
    gemini: GeminiSimulator, contents: list[dict[str, Any]], model: str = "gemini-3.8-flash"
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=gemini.url) as client:
        return await client.post(
            f"/v1beta/models/{model}:generateContent", json={"contents": contents}
        )


async def _call_and_answer(
    gemini: GeminiSimulator, signature: str | None, model: str = "gemini-3.8-flash"
) -> httpx.Response:
    """Ask, get a function call, send it back (with `signature`, or its own when '=')."""
    gemini.script(Reply.call("get_trace", trace_id="ab"), Reply.text("done"))
    first = await _generate(gemini, [QUESTION], model)
    call = first.json()["candidates"][0]["content"]["parts"][0]
    if signature != "=":
        call.pop("thoughtSignature")
        if signature is not None:
            call["thoughtSignature"] = signature
    answer = {"functionResponse": {"name": "get_trace", "response": {"result": "ok"}}}
    contents = [QUESTION, {"role": "model", "parts": [call]}, {"role": "user", "parts": [answer]}]
    return await _generate(gemini, contents, model)


async def test_a_function_call_sent_back_with_its_signature_is_accepted(
    gemini: GeminiSimulator,
) -> None:
    response = await _call_and_answer(gemini, "=")
    assert response.status_code == 200
    assert gemini.requests[-1].bypassed_signatures == 0


async def test_a_function_call_sent_back_without_its_signature_is_invalid_argument(
    gemini: GeminiSimulator,
) -> None:
    response = await _call_and_answer(gemini, None)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert "missing a thought_signature" in error["message"]


async def test_a_signature_the_api_never_issued_is_refused_as_corrupted(
    gemini: GeminiSimulator,
) -> None:
    response = await _call_and_answer(gemini, "bm90LWEtc2lnbmF0dXJl")
    assert (response.status_code, response.json()["error"]["message"]) == (
        400,
        "Corrupted thought signature.",
    )


async def test_the_documented_bypass_is_accepted_and_counted(gemini: GeminiSimulator) -> None:
    response = await _call_and_answer(gemini, SKIP_SIGNATURE)
    assert response.status_code == 200
    assert gemini.requests[-1].bypassed_signatures == 1


async def test_models_before_gemini_3_are_not_checked(gemini: GeminiSimulator) -> None:
    response = await _call_and_answer(gemini, None, model="gemini-2.5-flash-lite")
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        (Reply.error(400, "bad"), "INVALID_ARGUMENT"),
        (Reply.error(404, "gone"), "NOT_FOUND"),
        (Reply.quota(3), "RESOURCE_EXHAUSTED"),
        (Reply.overloaded(), "UNAVAILABLE"),
        (Reply.error(500, "boom"), "INTERNAL"),
    ],
)
async def test_errors_carry_the_apis_status_name(
    gemini: GeminiSimulator, reply: Reply, status: str
) -> None:
    gemini.script(reply)
    response = await _generate(gemini, [QUESTION])
    assert response.json()["error"]["status"] == status


async def test_a_tool_round_sends_the_issued_signature_back(
    investigator: Investigator, gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> None:
    gemini.script(
        Reply.call("get_trace", trace_id=scenario.error_trace_ids[0]),
        Reply.text("Nothing conclusive yet."),
    )
    result = await investigator.investigate(thread_id, "why is checkout failing?", "U1")

    assert result.answer.startswith("Nothing conclusive yet.")
    assert [r.status for r in gemini.requests] == [200, 200]
    assert gemini.requests[1].bypassed_signatures == 0


async def test_a_turn_resumed_from_its_checkpoint_sends_the_issued_signature_back(
    investigator: Investigator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    """The function call comes back from the checkpoint (a run cancelled inside the tool,
    then resumed) carrying the signature the API issued, not the bypass."""
    tempo.faults.latency_s = 30
    gemini.script(Reply.call("get_trace", trace_id=scenario.error_trace_ids[0]))
    running = asyncio.create_task(
        investigator.investigate(thread_id, "why?", "U1", turn_id="turn-1")
    )
    await tempo.wait_for_request("/api/v2/traces/")
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    tempo.faults.latency_s = 0
    gemini.script(Reply.text("Nothing conclusive yet."))
    result = await investigator.investigate(thread_id, "why?", "U1", turn_id="turn-1")

    assert result.answer.startswith("Nothing conclusive yet.")
    assert gemini.requests[-1].status == 200
    assert gemini.requests[-1].bypassed_signatures == 0
