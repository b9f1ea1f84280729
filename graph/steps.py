"""Step accounting: how many graph steps a turn still needs, counted from the wiring.

LangGraph's `RemainingSteps` tells a node how many steps are left before the recursion
limit; a node that sees N can be followed by at most N - 1 more. Whether there is room
for another tool round or another draft is therefore a question about the graph's shape:
the longest way from the next node to END. `build.py` declares that shape once
(`ROUTES`); this module reads it, so no other file knows a step count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langchain_core.messages import AIMessage
from langgraph.graph import END

from graph.state import InvestigationState, StopReason

Routes = Mapping[str, Sequence[str]]  # node -> the nodes (or END) it may go to next


def _longest_to_end(routes: Routes, node: str, visiting: frozenset[str]) -> int:
    """Nodes on the longest path from `node` to END that visits no node twice (counting
    `node`). Every edge back to a visited node is a revision or a tool round, and each of
    those asks for room again before it is taken, so it need not be counted here."""
    if node == END:
        return 0
    ahead = [n for n in routes[node] if n not in visiting]
    lengths = [_longest_to_end(routes, n, visiting | {node}) for n in ahead]
    reachable = [length for length in lengths if length >= 0]
    if not reachable:
        return -1  # every way on leads back into this path: no finish from here
    return 1 + max(reachable)


class StepBudget:
    """What the turn's remaining steps allow, for a graph wired as `routes`."""

    def __init__(self, routes: Routes) -> None:
        self.to_end = {node: _longest_to_end(routes, node, frozenset()) for node in routes}

    def room_for(self, state: InvestigationState, node: str) -> bool:
        """Whether `node` may run next and every path from it still reaches END."""
        return state["remaining_steps"] > self.to_end[node]

    def stop_reason(self, state: InvestigationState, tool_budget: int) -> StopReason | None:
        """Why the agent's pending tool calls may not run, if they may not: `tool_budget`
        is how many calls a turn may make."""
        last = state["messages"][-1]
        calls = len(last.tool_calls) if isinstance(last, AIMessage) else 0
        if state.get("tool_calls_used", 0) + calls > tool_budget:
            return "tool_budget"
        if not self.room_for(state, "tools"):
            return "step_limit"
        return None

    def room_for_revision(self, state: InvestigationState, revisions: int, limit: int) -> bool:
        """Whether a guard or the grader may send the draft back to the agent once more."""
        return revisions < limit and self.room_for(state, "agent")
