"""Step accounting: how many steps a tool round or a revision needs, counted from the wiring;
and the routing between steps, which stays in the event loop."""

import asyncio
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import FrameType
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.graph import END, START

from graph.build import ROUTES, STEPS
from graph.runner import Investigator
from graph.state import InvestigationState
from graph.steps import StepBudget
from sandbox import GeminiSimulator, Reply


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


class _WatchedExecutor(ThreadPoolExecutor):
    """The event loop's default executor, noting the source file of every Python function
    called on its threads."""

    def __init__(self) -> None:
        super().__init__(max_workers=4)
        self.sources: list[str] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def watched() -> Any:
            def note(frame: FrameType, event: str, arg: object) -> None:
                if event == "call":
                    self.sources.append(frame.f_code.co_filename)

            sys.setprofile(note)
            try:
                return fn(*args, **kwargs)
            finally:
                sys.setprofile(None)

        return super().submit(watched)


async def test_routing_between_steps_stays_in_the_event_loop(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    executor = _WatchedExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    gemini.script(
        Reply.call("query_tempo_traces", traceql="{ status = error }"), Reply.text("done")
    )

    await investigator.investigate(thread_id, "why?", "U1")

    # A route that is a plain function is run on a thread: a hand-over there and back at
    # every step of every turn.
    assert [source for source in executor.sources if source.endswith("graph/build.py")] == []
