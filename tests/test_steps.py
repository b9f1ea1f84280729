"""Step accounting: how many steps a tool round or a revision needs, counted from the wiring."""

from langchain_core.messages import AIMessage
from langgraph.graph import END, START

from graph.build import ROUTES, STEPS
from graph.runner import Investigator
from graph.state import InvestigationState
from graph.steps import StepBudget


def _state(remaining: int, calls: int = 1, used: int = 0) -> InvestigationState:
    pending = AIMessage(
        "", tool_calls=[{"name": "get_trace", "args": {}, "id": str(i)} for i in range(calls)]
    )
    return {
        "messages": [pending],
        "remaining_steps": remaining,
        "tool_calls_used": used,
    }


def test_a_tool_round_and_a_draft_need_the_longest_way_to_the_end_without_a_loop() -> None:
    assert STEPS.to_end["agent"] == 4  # agent, force_answer, check_draft, grade
    assert STEPS.to_end["tools"] == 5  # tools, then all of the above


def test_a_node_added_to_the_wiring_is_counted_on_every_path_through_it() -> None:
    longer = {**ROUTES, "check_draft": ("agent", "summarise", END), "summarise": ("grade",)}
    assert StepBudget(longer).to_end["agent"] == STEPS.to_end["agent"] + 1


def test_a_tool_round_needs_room_for_tools_and_the_way_from_there_to_the_end() -> None:
    assert STEPS.stop_reason(_state(remaining=6), tool_budget=8) is None
    assert STEPS.stop_reason(_state(remaining=5), tool_budget=8) == "step_limit"


def test_the_tool_budget_is_checked_before_the_steps() -> None:
    assert STEPS.stop_reason(_state(remaining=20, calls=2, used=7), tool_budget=8) == "tool_budget"


def test_a_revision_needs_revisions_left_and_room_for_another_draft() -> None:
    assert STEPS.room_for_revision(_state(remaining=5), revisions=0, limit=2)
    assert not STEPS.room_for_revision(_state(remaining=4), revisions=0, limit=2)
    assert not STEPS.room_for_revision(_state(remaining=20), revisions=2, limit=2)


def test_the_accounting_counts_the_graph_that_runs(investigator: Investigator) -> None:
    drawn = investigator.graph.get_graph()
    edges = {(e.source, e.target) for e in drawn.edges}
    declared = {(node, ahead) for node, aheads in ROUTES.items() for ahead in aheads}
    assert edges == declared | {(START, "agent")}
