"""Progress events: what a running turn reports as it goes (the bot edits its placeholder
with them; the Steps view lists them).

Nodes and tools report through the turn's run context (LangGraph's `Runtime.context`),
which the runner fills in for each turn. Not through LangGraph's "custom" stream mode:
that hands every event across threads (`call_soon_threadsafe`, a wake-up of the event
loop) and wakes the graph's step loop for it, about 6% of a short turn (benchmark B3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langgraph.runtime import get_runtime

Event = dict[str, Any]
Reporter = Callable[[Event], None]


def _ignore(event: Event) -> None:
    pass


@dataclass(frozen=True)
class TurnContext:
    """The run context of one turn: where its nodes and tools report progress."""

    report: Reporter = _ignore  # called on the event loop; must not block


def reporter(context: TurnContext | None = None) -> Reporter:
    """Where progress goes: the given run context's reporter, else the running graph's
    (outside a turn's run, nowhere)."""
    if context is None:
        context = get_runtime(TurnContext).context
    return context.report if context is not None else _ignore
