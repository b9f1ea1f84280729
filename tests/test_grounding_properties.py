"""The grounding check on answers it has never seen: true facts drawn from each of the 16
eval worlds' evidence (gathered with the real tools, bench/grounding_worlds.py) and written
in random styles, zones and formats are never flagged; the same answer with one fact
changed to a near miss of its kind is never posted as grounded.

`make test` runs EXAMPLES examples per kind (over all worlds at once); `make
bench-grounding` runs many more and writes the figures per kind to BENCHMARKS.md. Shrunk
failures are kept below as regression cases (`@example`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import grounding_worlds
from bench.grounding_answers import WRITERS, Answer, Truth, answer, truth_of
from graph.grounding.check import ClaimCheck
from graph.grounding.evidence import Fact
from graph.grounding.guard import ground_draft

EXAMPLES = 25  # per kind, each over a world drawn from the 16
TOLERANCE_S = 300


class DataPick:
    """Hypothesis' draws as the answer writer's choices (so failures shrink)."""

    def __init__(self, data: st.DataObject) -> None:
        self._data = data

    def choice(self, options: Any) -> Any:
        return self._data.draw(st.sampled_from(list(options)))

    def integer(self, low: int, high: int) -> int:
        return self._data.draw(st.integers(low, high))


_WORLDS: dict[str, tuple[list[Fact], Truth, float]] = {}


def _world(name: str) -> tuple[list[Fact], Truth, float]:
    if name not in _WORLDS:
        seen = asyncio.run(grounding_worlds.gather(name))
        _WORLDS[name] = (seen.facts, truth_of(seen.facts, seen.namespace), seen.now)
    return _WORLDS[name]


def _checks(text: str, facts: list[Fact]) -> list[ClaimCheck]:
    return asyncio.run(ground_draft(text, facts, None, TOLERANCE_S))[1]


def _caught(written: Answer, checks: list[ClaimCheck]) -> bool:
    values = [v.lower() for v in (written.value, written.also) if v]
    return any(
        c["status"] != "grounded"
        and any(v in c["text"].lower() or c["text"].lower() in v for v in values)
        for c in checks
    )


WORLD_NAMES = grounding_worlds.names()


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_true_facts_are_never_flagged_and_near_misses_never_pass(kind: str) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(world=st.sampled_from(WORLD_NAMES), data=st.data())
    def run(world: str, data: st.DataObject) -> None:
        facts, truth, now = _world(world)
        written = answer(DataPick(data), truth, now, kind)
        if written is None:
            return
        flagged = [c for c in _checks(written.true, facts) if c["status"] != "grounded"]
        assert flagged == [], (world, written.true)
        assert _caught(written, _checks(written.invented, facts)), (world, written.invented)

    run()
