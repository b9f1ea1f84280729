"""A model reply that ends for a reason other than finishing its answer (the safety filters
withheld it, or it ran into the output token limit) ends the turn with a message that says
so, through the real graph against the Gemini simulator."""

from __future__ import annotations

from graph.runner import Investigator
from sandbox import GeminiSimulator, Reply


async def test_a_reply_the_safety_filters_withheld_ends_the_turn_saying_so(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(Reply.blocked())

    result = await investigator.investigate(thread_id, "why is checkout failing?", "U1")

    assert result.status == "answered"
    assert "incomplete: the model's safety filters withheld its answer" in result.answer
    assert gemini.pending == 0 and len(gemini.requests) == 1


async def test_an_answer_cut_off_at_the_output_limit_is_marked_as_cut_off(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(Reply.cut_off("The checkout failures look like they started when"))

    result = await investigator.investigate(thread_id, "why is checkout failing?", "U1")

    assert result.answer.startswith("The checkout failures look like they started when")
    assert "incomplete: the answer was cut off at the model's output limit" in result.answer
