"""`agent`: the model reads the thread and either calls tools or drafts an answer."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from graph.config import GraphLimits
from graph.history import bound_history
from graph.messages import close_dangling_tool_calls, finished
from graph.progress import reporter
from graph.prompts import SYSTEM_PROMPT
from graph.state import InvestigationState


class Node(Protocol):
    """What every node factory returns: a partial state update, no routing."""

    def __call__(self, state: InvestigationState) -> Awaitable[dict[str, Any]]: ...


class ConfigNode(Protocol):
    """A node that also needs the run's config (thread id, user)."""

    def __call__(
        self, state: InvestigationState, config: RunnableConfig
    ) -> Awaitable[dict[str, Any]]: ...


def make_agent(model: BaseChatModel, tools: Sequence[BaseTool], limits: GraphLimits) -> Node:
    bound = model.bind_tools(list(tools))

    async def agent(state: InvestigationState) -> dict[str, Any]:
        report = reporter()
        report({"type": "model_started", "node": "agent"})
        # Earlier turns are compacted in the state itself (same message ids), so the
        # checkpoint shrinks with the model's input and the work is done once per turn.
        history = bound_history(state, limits.context_budget_tokens, limits.full_tool_results)
        messages = close_dangling_tool_calls(history.view)
        response = finished(await bound.ainvoke([SystemMessage(SYSTEM_PROMPT), *messages]))
        calls = [c["name"] for c in getattr(response, "tool_calls", [])]
        report({"type": "model_finished", "node": "agent", "tool_calls": calls})
        update: dict[str, Any] = {"messages": [*history.updates, response]}
        if history.summary is not None:
            update["history_summary"] = history.summary
            update["summarised_turns"] = history.summarised
        return update

    return agent
