"""Whatever arrives from Slack, the runner returns a clear result and never raises."""

from graph.runner import EMPTY_QUESTION, Investigator
from sandbox import GeminiSimulator, Reply


async def test_an_empty_question_is_answered_with_a_hint_and_no_model_call(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    result = await investigator.investigate(thread_id, "  \n\t ", "U1")
    assert (result.status, result.answer) == ("rejected", EMPTY_QUESTION)
    assert gemini.requests == []


async def test_a_50000_character_message_is_cut_to_the_limit_and_said_so(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(Reply.text("Looked at the first part."))
    result = await investigator.investigate(thread_id, "why " * 12_500, "U1")

    user_turn = gemini.requests[0].contents[0]["parts"][0]["text"]
    assert len(user_turn) == investigator.limits.question_max_chars
    assert result.status == "answered"
    assert result.notices == ["Your message has 49,999 characters; only the first 8,000 were read."]


async def test_control_characters_never_reach_the_model(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(Reply.text("ok"))
    await investigator.investigate(thread_id, "why\x00 is\x1b[31m checkout\u202e down?\x07", "U1")

    assert gemini.requests[0].contents[0]["parts"][0]["text"] == "why is[31m checkout down?"


async def test_a_model_outage_ends_in_a_short_failure_message(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(Reply.error(500, "backend exploded"))
    result = await investigator.investigate(thread_id, "why?", "U1")

    assert result.status == "failed"
    assert result.answer.startswith("The language model did not answer. Try again in a minute")
    assert result.correlation_id in result.answer
    assert "Traceback" not in result.answer and "backend exploded" not in result.answer


async def test_a_failing_progress_callback_does_not_stop_the_investigation(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    async def broken(event: dict[str, object]) -> None:
        raise RuntimeError("slack is down")

    gemini.script(Reply.text("still answered"))
    result = await investigator.investigate(thread_id, "why?", "U1", on_progress=broken)
    assert result.answer == "still answered"
