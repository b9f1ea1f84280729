"""Grounding precision and recall over the answer corpora (bench/grounding_corpus.py and the
second bench/grounding_second.py), the figures `python -m bench.grounding` writes to
BENCHMARKS.md."""

from collections.abc import AsyncIterator

import pytest

from bench import grounding_second
from bench.grounding import Outcome, World, corpus_world, run_corpus
from bench.grounding_corpus import CORRECT, INVENTED, Answer

KINDS = {"pod", "replicaset", "deployment", "service", "namespace", "node"}
KINDS |= {"image", "version", "revision", "time"}
PAIRS = {
    "first": (CORRECT, INVENTED),
    "second": (grounding_second.CORRECT, grounding_second.INVENTED),
}


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with corpus_world() as opened:
        yield opened


def test_the_first_corpora_are_large_enough_and_cover_every_kind() -> None:
    assert len(CORRECT) >= 40 and len(INVENTED) >= 40
    assert {a.kind for a in INVENTED} == KINDS
    assert len({a.style for a in CORRECT}) >= 6


@pytest.mark.parametrize("invented", [INVENTED, grounding_second.INVENTED])
def test_each_invented_value_is_written_once_as_stated(invented: list[Answer]) -> None:
    for answer in invented:
        assert answer.invented and answer.text.count(answer.invented) == 1, answer.text


@pytest.mark.parametrize("pair", PAIRS)
async def test_every_correct_answer_is_posted_with_no_claim_removed_or_marked(
    world: World, pair: str
) -> None:
    correct, _ = PAIRS[pair]
    outcomes = await run_corpus(world, correct)
    flagged = [(o.answer.text[:60], _flagged(o)) for o in outcomes if not o.clean]
    assert flagged == []
    assert sum(len(o.checks) for o in outcomes) >= 3 * len(correct)  # facts were checked


@pytest.mark.parametrize("pair", PAIRS)
async def test_at_least_95_percent_of_invented_facts_are_caught(world: World, pair: str) -> None:
    _, invented = PAIRS[pair]
    outcomes = await run_corpus(world, invented)
    missed = [(o.answer.kind, o.answer.invented) for o in outcomes if not o.caught]
    assert len(missed) <= 0.05 * len(outcomes), missed


def _flagged(outcome: Outcome) -> list[str]:
    return [
        f"{c['kind']} {c['text']}: {c['detail']}"
        for c in outcome.checks
        if c["status"] != "grounded"
    ]
