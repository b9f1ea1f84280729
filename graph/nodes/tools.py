"""`tools`: run the tool calls of the latest model turn, concurrently, and count them."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_stream_writer

from graph.metrics import TOOL_CALLS
from graph.nodes.agent import ConfigNode
from graph.state import InvestigationState
from graph.tools.errors import ToolFailed
from graph.trace_ids import find_trace_ids

MAX_TOOL_RESULT_CHARS = 12_000
MAX_CONTEXT_CHARS = 6_000
MAX_EVIDENCE = 20


def with_investigation(
    config: RunnableConfig, messages: Sequence[AnyMessage], incident_start: float | None = None
) -> RunnableConfig:
    """Hand tools what the thread has found so far: trace IDs that came out of tool results
    and the question with the latest evidence, as plain text (for proposals), and when the
    thread's alert started (for search windows)."""
    tool_texts = [m.text for m in messages if isinstance(m, ToolMessage)]
    evidence = list(dict.fromkeys(t for text in tool_texts for t in find_trace_ids(text)))
    question = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
    context = f"Question: {question}\n\nLatest tool results:\n" + "\n---\n".join(tool_texts[-3:])
    configurable = {
        **(config.get("configurable") or {}),
        "evidence": evidence[:MAX_EVIDENCE],
        "context": context[:MAX_CONTEXT_CHARS],
        "incident_start": incident_start,
    }
    return {**config, "configurable": configurable}


def _bounded(message: ToolMessage) -> ToolMessage:
    text = message.content if isinstance(message.content, str) else str(message.content)
    if len(text) > MAX_TOOL_RESULT_CHARS:
        message.content = text[:MAX_TOOL_RESULT_CHARS] + "\n[result truncated]"
    return message


async def run_tool_call(
    by_name: dict[str, BaseTool], call: ToolCall, config: RunnableConfig | None = None
) -> ToolMessage:
    """Run one tool call; a missing tool or a failure becomes an error result, never raised."""
    tool = by_name.get(call["name"])
    call_id = call["id"] or ""
    if tool is None:
        known = ", ".join(sorted(by_name))
        return ToolMessage(
            f"There is no tool named {call['name']!r}. Available tools: {known}.",
            tool_call_id=call_id,
            name=call["name"],
            status="error",
        )
    try:
        result = await tool.ainvoke(call, config)
    except ToolFailed as exc:  # the tool's own words, written for the model
        return ToolMessage(str(exc), tool_call_id=call_id, name=call["name"], status="error")
    except Exception as exc:  # a tool failure is reported to the model, not raised
        return ToolMessage(
            f"{call['name']} failed: {type(exc).__name__}: {exc}",
            tool_call_id=call_id,
            name=call["name"],
            status="error",
        )
    assert isinstance(result, ToolMessage)
    return _bounded(result)


def make_tools(tools: Sequence[BaseTool]) -> ConfigNode:
    by_name = {t.name: t for t in tools}

    async def run_tools(state: InvestigationState, config: RunnableConfig) -> dict[str, Any]:
        write = get_stream_writer()
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        for call in last.tool_calls:
            write({"type": "tool_started", "tool": call["name"], "args": call["args"]})
        tool_config = with_investigation(config, state["messages"], state.get("incident_start"))
        results = await asyncio.gather(
            *(run_tool_call(by_name, c, tool_config) for c in last.tool_calls)
        )
        for call, result in zip(last.tool_calls, results, strict=True):
            outcome = "failed" if result.status == "error" else "succeeded"
            TOOL_CALLS.labels(call["name"], outcome).inc()
            write(
                {
                    "type": "tool_finished",
                    "tool": call["name"],
                    "status": result.status,
                    "outcome": outcome,
                }
            )
        return {
            "messages": list(results),
            "tool_calls_used": state.get("tool_calls_used", 0) + len(last.tool_calls),
        }

    return run_tools


def failed_tools_notice(events: Sequence[dict[str, Any]]) -> str | None:
    """A notice for the answer when tools failed this turn: its evidence may be missing."""
    failed = sorted(
        {e["tool"] for e in events if e["type"] == "tool_finished" and e.get("outcome") == "failed"}
    )
    if not failed:
        return None
    return f"Failed this turn: {', '.join(failed)}; the answer may lack that evidence."
