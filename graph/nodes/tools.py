"""`tools`: LangGraph's `ToolNode` runs the latest model turn's tool calls; what is ours
wraps each call: long results cut short, progress events (titled as the tool's `Shown`
says), metrics, the tool budget, and the evidence each result hands over (only the kinds
of facts its tool declares).

Tools raise when they fail (`ToolFailed`, or anything unexpected); `tool_error_text` turns
the exception into the error result the model reads: what failed and whether retrying
helps, never a stack trace.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolInvocationError
from langgraph.types import Command

from graph.charts import ChartData, Findings
from graph.grounding.evidence import CITE, TEXT, Fact
from graph.metrics import TOOL_CALLS
from graph.nodes.agent import ConfigNode
from graph.progress import reporter
from graph.state import InvestigationState
from graph.tools import Shown, ToolFailed, result_budget, shown
from graph.untrusted import truncate

log = logging.getLogger(__name__)

UNKNOWN_TOOL = "unknown"  # the metric label of a call to a tool that does not exist
SUMMARY_CHARS = 200  # the first line of a result, in the tool_finished event

Execute = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]


def tool_error_text(exc: Exception) -> str:
    """The error result the model reads when a tool raised."""
    if isinstance(exc, ToolFailed):
        advice = (
            "The same call may work if retried later."
            if exc.retryable
            else "Retrying the same call will not help."
        )
        return f"{exc} {advice}"
    if isinstance(exc, ToolInvocationError):  # the model's arguments did not fit the tool
        return exc.message
    log.error("tool raised %s", type(exc).__name__, exc_info=exc)
    return (
        f"The tool failed unexpectedly ({type(exc).__name__}). Retrying will not help this "
        "turn: answer with the evidence you have and say this step failed."
    )


async def bounded(request: ToolCallRequest, execute: Execute) -> ToolMessage | Command[Any]:
    """Run the call; a result longer than the tool's output budget is cut short, at a line
    break when one is near (the evidence it hands over beside the text stays whole)."""
    result = await execute(request)
    if isinstance(result, ToolMessage):
        text = result.content if isinstance(result.content, str) else str(result.content)
        limit = result_budget(request.tool)
        if len(text) > limit:
            line_end = text.rfind("\n", 0, limit)
            result.content = text[: line_end if line_end > limit // 2 else limit]
            result.content += "\n[result truncated]"
    return result


async def _observed(request: ToolCallRequest, execute: Execute) -> ToolMessage | Command[Any]:
    """`bounded`, with progress events and the per-tool metric around it."""
    name = request.tool_call["name"]
    args = request.tool_call["args"]
    declared = shown(request.tool)
    report = reporter(request.runtime.context)
    started: dict[str, Any] = {"type": "tool_started", "tool": name, "args": args}
    if declared is not None:  # a tool the model made up has no title: it is shown by name
        started["title"] = declared.title_for(args if isinstance(args, dict) else {})
    report(started)
    result = await bounded(request, execute)
    status = result.status if isinstance(result, ToolMessage) else "success"
    outcome = "failed" if status == "error" else "succeeded"
    # The label is the tool's own name: a name the model made up would be a new series.
    TOOL_CALLS.labels(request.tool.name if request.tool else UNKNOWN_TOOL, outcome).inc()
    finished: dict[str, Any] = {
        "type": "tool_finished",
        "tool": name,
        "status": status,
        "outcome": outcome,
    }
    if declared is None or declared.headline:
        finished["summary"] = _first_line(result)  # the result's headline, for the timeline
    if link := _link(result):
        finished["link"] = link
    report(finished)
    return result


def _link(result: ToolMessage | Command[Any]) -> str | None:
    """The first web link among the result's citations (a Grafana Explore URL)."""
    artifact = result.artifact if isinstance(result, ToolMessage) else None
    for each in artifact if isinstance(artifact, list) else ():
        where = each.get("where", "") if each.get("kind") == CITE else ""
        if where.startswith(("https://", "http://")):
            return str(where)
    return None


def _first_line(result: ToolMessage | Command[Any]) -> str:
    """A tool result's first line, short (telemetry: shown escaped, never as instructions)."""
    if not isinstance(result, ToolMessage):
        return ""
    text = result.content if isinstance(result.content, str) else str(result.content)
    return truncate(text.strip().split("\n", 1)[0], SUMMARY_CHARS)


def declares(declared: Shown | None, each: Fact) -> bool:
    """Whether a tool hands over facts of this kind ("text": what free text it reads
    names, of any kind). A tool with no `Shown` is not one of the registry's: a test's."""
    if declared is None:
        return True
    return each["kind"] in declared.facts or (each.get("basis") == TEXT and TEXT in declared.facts)


def _evidence(
    messages: Sequence[Any], declared: dict[str, Shown | None]
) -> tuple[list[Fact], list[ChartData]]:
    """The facts tools handed over beside their text (their artifacts), of the kinds each
    declares, and the chart data of the same results, taken off the messages: the state
    keeps them once, in `evidence` and `charts`, and the messages stay small."""
    facts: list[Fact] = []
    charts: list[ChartData] = []
    for message in messages:
        if isinstance(message, ToolMessage) and isinstance(message.artifact, list):
            kept = [f for f in message.artifact if declares(declared.get(str(message.name)), f)]
            if len(kept) < len(message.artifact):
                log.warning(
                    "%s handed over facts of kinds it does not declare; they are not evidence: %s",
                    message.name,
                    sorted({f["kind"] for f in message.artifact} - {f["kind"] for f in kept}),
                )
            facts += kept
            if isinstance(message.artifact, Findings) and message.artifact.chart is not None:
                charts.append(message.artifact.chart)
            message.artifact = None
    return facts, charts


def tool_node(
    tools: Sequence[BaseTool],
    wrapper: Callable[[ToolCallRequest, Execute], Awaitable[ToolMessage | Command[Any]]] = bounded,
) -> ToolNode:
    """LangGraph's ToolNode: calls run concurrently, an unknown tool or a failure becomes
    an error result for the model."""
    return ToolNode(list(tools), handle_tool_errors=tool_error_text, awrap_tool_call=wrapper)


def make_tools(tools: Sequence[BaseTool]) -> ConfigNode:
    node = tool_node(tools, _observed)
    declared = {t.name: shown(t) for t in tools}

    async def run_tools(state: InvestigationState, config: RunnableConfig) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        result = cast(dict[str, Any], await node.ainvoke(state, config))
        used = state.get("tool_calls_used", 0) + len(last.tool_calls)
        facts, charts = _evidence(result.get("messages") or [], declared)
        return {
            **result,
            "tool_calls_used": used,
            **({"evidence": facts} if facts else {}),
            **({"charts": charts} if charts else {}),
        }

    return run_tools
