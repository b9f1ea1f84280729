"""The Gemini simulator speaks the REST API the real langchain-google-genai client uses."""

from langchain_google_genai import ChatGoogleGenerativeAI

from sandbox import GeminiSimulator, Reply


def _client(gemini: GeminiSimulator) -> ChatGoogleGenerativeAI:
    return ChatGoogleGenerativeAI(
        model="gemini-3.8-flash", base_url=gemini.url, google_api_key="k", max_retries=1
    )


async def test_streamed_replies_arrive_as_server_sent_events(gemini: GeminiSimulator) -> None:
    gemini.script(Reply.text("streamed hello"))
    chunks = [chunk.text async for chunk in _client(gemini).astream("hi")]
    assert "".join(chunks) == "streamed hello"
    assert gemini.requests[0].stream


async def test_per_model_scripts_take_precedence_over_the_shared_one(
    gemini: GeminiSimulator,
) -> None:
    gemini.script(Reply.text("shared"))
    gemini.script(Reply.text("for flash"), model="gemini-3.8-flash")
    first = await _client(gemini).ainvoke("hi")
    assert first.text == "for flash"
    assert gemini.pending == 1


async def test_an_exhausted_script_is_an_http_error_not_a_silent_reply(
    gemini: GeminiSimulator,
) -> None:
    client = _client(gemini)
    try:
        await client.ainvoke("hi")
    except Exception as exc:
        assert "no scripted reply left" in str(exc)
    else:
        raise AssertionError("an unscripted request must fail")
