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
