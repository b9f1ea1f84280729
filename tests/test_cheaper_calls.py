"""What makes each model call cheaper without losing what the answer rests on: the current
turn's older long tool results sent shortened (the state keeps them whole), tool
declarations sent without their docstrings' layout, the grader's transcript with tool
results cut short. Pure logic on real LangChain messages and tools."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph.config import TempoSpec
from graph.grader import MAX_RESULT_CHARS, transcript
from graph.history import EARLIER_MARK, bound_history, in_turn, summary_view
from graph.state import InvestigationState
from graph.tools.tempo import TempoClient, tempo_tools

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OTHER = "00f067aa0ba902b7aa0ba902b7aa0ba9"
TRACE_RESULT = "\n".join(
    [
        f"trace {TRACE}: 10 spans, 3 services, 1692 ms",
        "Names and quoted values are telemetry written by the traced services.",
        "root span: frontend GET /products",
        "error spans (1):",
        '- search GET /search 1537 ms http="500" status="OutOfMemoryError" [failure starts here]',
        "workloads (the processes that sent spans):",
        '- search service.version="2.3.0" k8s.pod.name="search-1": 2 spans, 1 error',
        '- inventory service.version="7.3.1" k8s.pod.name="inventory-1": 3 spans, 0 errors',
        "slowest spans:",
        *[f"- frontend GET /products {1692 - i} ms" for i in range(12)],
        f"- also seen: {OTHER}",
    ]
)


def _turn(results: int) -> list[HumanMessage | AIMessage | ToolMessage]:
    messages: list[HumanMessage | AIMessage | ToolMessage] = [HumanMessage("why?", id="q")]
    for i in range(results):
        call = {"name": "get_trace", "args": {"trace_id": TRACE}, "id": f"c{i}"}
        messages += [
            AIMessage("", tool_calls=[{**call, "type": "tool_call"}], id=f"ai{i}"),
            ToolMessage(TRACE_RESULT, tool_call_id=f"c{i}", name="get_trace", id=f"t{i}"),
        ]
    return messages


def _results(messages: list) -> list[str]:  # type: ignore[type-arg]
    return [m.text for m in messages if isinstance(m, ToolMessage)]


def test_only_the_latest_results_of_the_turn_are_sent_whole() -> None:
    sent = _results(in_turn(_turn(4), full_results=2))

    assert [text == TRACE_RESULT for text in sent] == [False, False, True, True]
    assert all(EARLIER_MARK in text for text in sent[:2])


def test_a_shortened_result_keeps_its_headline_failures_and_trace_ids_whole() -> None:
    shortened = _results(in_turn(_turn(3), full_results=1))[0]
    lines = shortened.splitlines()

    assert lines[0] == TRACE_RESULT.splitlines()[0]
    assert any("[failure starts here]" in line and "OutOfMemoryError" in line for line in lines)
    assert any(line.endswith("2 spans, 1 error") for line in lines)
    assert OTHER in shortened
    assert not any("0 errors" in line or "slowest" in line for line in lines)
    assert f"{len(TRACE_RESULT.splitlines()) - len(lines) + 1} of" in lines[-1]


def test_a_short_result_is_sent_whole_however_old() -> None:
    turn = _turn(3)
    short = ToolMessage("shop/search: 4/4 ready\n- 14: search:2.3.0", tool_call_id="c0", id="t0")
    turn[2] = short

    assert _results(in_turn(turn, full_results=1))[0] == short.text


def test_with_no_limit_every_result_is_sent_whole() -> None:
    assert _results(in_turn(_turn(4), full_results=0)) == [TRACE_RESULT] * 4


def test_the_state_keeps_the_current_turns_results_whole_and_model_turns_untouched() -> None:
    state: InvestigationState = {"messages": list(_turn(4))}
    history = bound_history(state, budget_tokens=100_000, full_results=1)

    assert history.updates == []  # nothing of the current turn is rewritten in the state
    originals = {m.id: m for m in state["messages"]}
    ai = [m for m in history.view if isinstance(m, AIMessage)]
    assert ai and all(m is originals[m.id] for m in ai)  # thought signatures ride on these
    assert sum(EARLIER_MARK in t for t in _results(history.view)) == 3


async def test_tool_declarations_are_sent_on_one_line_without_the_docstrings_layout() -> None:
    client = TempoClient(TempoSpec(url="http://127.0.0.1:9"))  # never asked: nothing is called
    declared = tempo_tools(client)
    await client.aclose()

    for tool in declared:
        assert "\n" not in tool.description and "  " not in tool.description
    assert "TraceQL" in declared[0].description


def test_the_graders_transcript_cuts_tool_results_short_and_keeps_the_answer() -> None:
    answer = "The cause is search 2.3.0. " * 40  # about 1,100 characters
    messages = [*_turn(2), AIMessage(answer, id="answer")]
    shown = transcript(messages, "n0nce")

    assert TRACE_RESULT[:MAX_RESULT_CHARS] in shown
    assert TRACE_RESULT[: MAX_RESULT_CHARS + 1] not in shown
    assert answer.strip() in shown


def test_a_forced_answer_reads_the_current_turn_as_the_agent_does() -> None:
    earlier = [HumanMessage("earlier question", id="e"), AIMessage("earlier answer", id="ea")]
    state: InvestigationState = {"messages": [*earlier, *_turn(3)]}
    view = summary_view(state, full_results=1)

    assert view[:2] == earlier
    assert [EARLIER_MARK in t for t in _results(view)] == [True, True, False]
