"""Keeping the conversation well-formed for the model after an interrupted run."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

INTERRUPTED = "Not run: the investigation was interrupted before this tool answered."


def close_dangling_tool_calls(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """Answer tool calls that never got a result (a restart mid-tool), so the model API,
    which requires a response to every function call, accepts the history."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    closed: list[AnyMessage] = []
    for index, message in enumerate(messages):
        closed.append(message)
        if not isinstance(message, AIMessage) or not message.tool_calls:
            continue
        if index == len(messages) - 1:
            continue  # the latest turn's calls are about to run
        closed.extend(
            ToolMessage(
                INTERRUPTED, tool_call_id=call["id"] or "", name=call["name"], status="error"
            )
            for call in message.tool_calls
            if call["id"] not in answered
        )
    return closed


# Why a reply can end before its answer does (the API's finishReason), in the user's words.
UNFINISHED = {
    "SAFETY": "the model's safety filters withheld its answer",
    "PROHIBITED_CONTENT": "the model's safety filters withheld its answer",
    "BLOCKLIST": "the model's safety filters withheld its answer",
    "SPII": "the model's safety filters withheld its answer",
    "RECITATION": "the model stopped because its answer repeated a source verbatim",
    "MAX_TOKENS": "the answer was cut off at the model's output limit",
}


def finished(response: AIMessage) -> AIMessage:
    """The reply as it stands when the model finished it; when it stopped for another
    reason (safety filters, the output limit), the reply says so in plain words after
    whatever text it has, so the turn ends with a message, never an empty or silently
    truncated one. A reply that calls tools is left to call them."""
    raw = response.response_metadata.get("finish_reason")
    reason = str(getattr(raw, "name", raw) or "STOP")
    if reason == "STOP" or response.tool_calls:
        return response
    why = UNFINISHED.get(reason, f"the model stopped without finishing ({reason})")
    note = f"_This answer is incomplete: {why}. Ask again, more narrowly, or look directly._"
    text = response.text.strip()
    return response.model_copy(update={"content": f"{text}\n\n{note}" if text else note})
