"""What the model reads back from a tool call: our wrapper around LangGraph's ToolNode, run
in a real one-node LangGraph graph."""

from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import START, MessagesState, StateGraph

from graph.config import TempoSpec
from graph.nodes.tools import tool_node
from graph.tools import DEFAULT_RESULT_CHARS as MAX_TOOL_RESULT_CHARS
from graph.tools import Shown, ToolFailed, declared, result_budget
from graph.tools.loki import LokiClient, LokiSpec, loki_tools
from graph.tools.prometheus import PrometheusClient, PrometheusSpec, prometheus_tools
from graph.tools.tempo import TempoClient, tempo_tools


@tool
def dump_logs() -> str:
    """Return a lot of text."""
    return "x" * (MAX_TOOL_RESULT_CHARS + 500)


@tool
def list_lines() -> str:
    """Return twenty numbered lines."""
    return "\n".join(f"line {i:02d} of twenty" for i in range(20))


@tool
def connect() -> str:
    """Fail the way a misconfigured client does."""
    raise RuntimeError("auth failed for https://admin:hunter2@tempo.internal")


@tool
def read_cluster() -> str:
    """Fail the way a refused API call does."""
    raise ToolFailed("The Kubernetes API refused: forbidden.", retryable=False)


async def _call(tool_: BaseTool) -> ToolMessage:
    builder = StateGraph(MessagesState)
    builder.add_node("tools", tool_node([tool_]))
    builder.add_edge(START, "tools")
    call: dict[str, Any] = {"name": tool_.name, "args": {}, "id": "call-1"}
    final = await builder.compile().ainvoke({"messages": [AIMessage("", tool_calls=[call])]})
    result = final["messages"][-1]
    assert isinstance(result, ToolMessage)
    return result


async def test_a_result_longer_than_the_cap_is_cut_and_says_so() -> None:
    result = await _call(dump_logs)
    assert result.text == "x" * MAX_TOOL_RESULT_CHARS + "\n[result truncated]"


async def test_a_result_over_its_tools_budget_is_cut_at_a_line_break_and_says_so() -> None:
    result = await _call(declared({"list_lines": Shown("Listing", budget=100)}, [list_lines])[0])
    whole = list_lines.invoke({}).splitlines()

    kept, note = result.text.rsplit("\n", 1)
    assert note == "[result truncated]"
    assert kept.splitlines() == whole[: len(kept.splitlines())]  # whole lines only
    assert len(kept) <= 100 and len(kept.splitlines()) == 100 // len(whole[0] + "\n")


async def test_every_evidence_tool_names_its_own_output_budget() -> None:
    tempo = TempoClient(TempoSpec(url="http://127.0.0.1:9"))
    loki = LokiClient(LokiSpec(url="http://127.0.0.1:9"))
    prometheus = PrometheusClient(PrometheusSpec(url="http://127.0.0.1:9"))
    tools = tempo_tools(tempo) + loki_tools(loki) + prometheus_tools(prometheus)
    for client in (tempo, loki, prometheus):
        await client.aclose()

    budgets = {t.name: result_budget(t) for t in tools}
    assert all(0 < b < MAX_TOOL_RESULT_CHARS for b in budgets.values())


async def test_an_unexpected_failure_is_an_error_naming_its_kind_never_its_text() -> None:
    result = await _call(connect)
    assert result.status == "error"
    assert "RuntimeError" in result.text and "Retrying will not help" in result.text
    assert "hunter2" not in result.text and "Traceback" not in result.text


async def test_a_tool_failure_reads_as_the_tools_words_and_whether_to_retry() -> None:
    result = await _call(read_cluster)
    assert result.status == "error"
    assert result.text == (
        "The Kubernetes API refused: forbidden. Retrying the same call will not help."
    )
