"""`force_answer`: the budget or the step limit ran out; answer with what is known."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool

from graph.config import GraphLimits
from graph.history import summary_view
from graph.messages import close_dangling_tool_calls, finished
from graph.nodes.agent import Node
from graph.progress import reporter
from graph.prompts import FORCE_ANSWER_PROMPT, STOP_REASONS, SYSTEM_PROMPT
from graph.state import InvestigationState
from graph.steps import StepBudget

NO_ANSWER = "I could not reach an answer within this question's limits. Narrow the question."


def make_force_answer(
    model: BaseChatModel, tools: Sequence[BaseTool], steps: StepBudget, limits: GraphLimits
) -> Node:
    # Same tool declarations as the agent (the history holds their calls), but none may run.
    answer_only = model.bind_tools(list(tools), tool_choice="none")

    async def force_answer(state: InvestigationState) -> dict[str, Any]:
        reason = steps.stop_reason(state, limits.tool_budget) or "tool_budget"
        reporter()({"type": "forced_answer", "reason": reason})
        last = state["messages"][-1]
        # Every function call needs a response before the model may speak again.
        skipped = [
            ToolMessage(
                f"Not run: {STOP_REASONS[reason]}",
                tool_call_id=call["id"] or "",
                name=call["name"],
                status="error",
            )
            for call in (last.tool_calls if isinstance(last, AIMessage) else [])
        ]
        instruction = HumanMessage(FORCE_ANSWER_PROMPT.format(reason=STOP_REASONS[reason]))
        history = close_dangling_tool_calls(
            [*summary_view(state, limits.full_tool_results), *skipped]
        )
        response = await answer_only.ainvoke([SystemMessage(SYSTEM_PROMPT), *history, instruction])
        # Any tool call the model still attempts is dropped: only its text is kept.
        answer = AIMessage(content=finished(response).text.strip() or NO_ANSWER)
        return {"messages": [*skipped, answer], "stop_reason": reason}

    return force_answer
