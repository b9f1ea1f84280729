"""Scoring one answer against a scenario's truth: deterministic, from the posted text and
what the run did (its proposals, the facts the guards caught).

- Root cause, ITBench style: the entities the answer names *as the cause* (in the clause
  after "cause", "because", "due to", ...) against the truth's, as precision, recall, F1.
  Naming two candidates halves precision; naming a victim as the cause costs it too.
- Chain: the share of the truth's propagation chain the answer names anywhere.
- Action: the right one proposed (or, when none is right, none proposed), and no harmful one.
- Invented facts: trace IDs or facts (versions, pods, revisions, times) the guards had to
  remove, mark or send back. Each halves the score: an answer with an invented fact is
  worth less than the same answer without it, even when the guards caught it.

score = F1 x (0.7 + 0.15 x chain + 0.15 x action right) x 0.5^invented

Beside it, the responder's scale incident.io grades investigations on: **bullseye** (names a
root-cause entity), **one hop short** (names the first service the failure reached from it),
**right area** (names another service of the chain), **wrong area** (anything else, or no
cause). Where nothing is wrong, an answer is a bullseye (F1 1, chain 1) when it says so and
names no cause, and the right action is to propose nothing. A proposal the gates refused
is counted apart: it is no right action, and shows as `refused`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from evals.spec import Action, EvalScenario

_MARKER = re.compile(
    r"\b(?:root[- ]cause|likely cause|probable cause|cause[sd]?|because|due to|culprit|"
    r"stems from|comes from|triggered by|blame)\b",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"[;.!?](?:\s|$)|\n|\s[—–]\s")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


_NOTHING_WRONG = re.compile(
    r"\b(?:nothing (?:is |looks |seems )?(?:wrong|broken|failing)|no (?:incident|outage|fault)\b|"
    r"no errors? (?:in|across|at|anywhere)|(?:a |the )?false (?:alarm|positive)|"
    r"(?:is|are|looks?|seems?) healthy|no (?:action|remediation) (?:is )?(?:needed|required))",
    re.IGNORECASE,
)
GRADES = ("bullseye", "one hop short", "right area", "wrong area")
REFUSED = frozenset({"refused"})  # what the gates made of a proposal they would not allow


def says_nothing_wrong(answer: str) -> bool:
    """The answer says nothing is wrong (no incident, a false alarm, all healthy)."""
    return _NOTHING_WRONG.search(answer) is not None


@dataclass(frozen=True)
class Proposal:
    action: str
    deployment: str
    replicas: int | None
    status: str  # what the gates made of it: pending_approval, rejected, ...


@dataclass(frozen=True)
class Score:
    named: list[str]  # the entities the answer names as the cause
    precision: float
    recall: float
    f1: float
    chain: float
    action_right: bool
    wrong_action: bool
    invented: int
    total: float
    grade: str = "wrong area"  # the responder's scale (GRADES)
    refused: int = 0  # proposals the gates refused (none of them a right action)
    nothing_wrong: bool = False  # the answer says nothing is wrong

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _mentions(text: str, words: list[str]) -> bool:
    return any(
        re.search(rf"(?<![\w.\-/]){re.escape(w)}(?![\w\-]|\.\d)", text, re.IGNORECASE)
        for w in words
    )


def cause_text(answer: str) -> str:
    """The clauses that state a cause: from each cause word to the end of its clause. An
    answer without one is read from its first sentence (what it leads with)."""
    clauses = []
    for sentence in _SENTENCE.split(answer):
        marker = _MARKER.search(sentence)
        if marker is None:
            continue
        rest = sentence[marker.end() :]
        # "*Likely cause (high confidence):* X" — the clause is what follows the colon.
        rest = re.sub(r"^[^:\w`]*(?:\([^)]*\))?[^\w`]*", "", rest)
        end = _CLAUSE_END.search(rest)
        clauses.append(rest[: end.start()] if end else rest)
    if clauses:
        return "\n".join(clauses)
    first = _SENTENCE.split(answer.strip(), maxsplit=1)
    return first[0] if first else ""


def named_causes(answer: str, scenario: EvalScenario) -> list[str]:
    stated = cause_text(answer)
    return [name for name, words in scenario.entities().items() if _mentions(stated, words)]


def _matches(proposal: Proposal, action: Action) -> bool:
    if (proposal.action, proposal.deployment) != (action.action, action.deployment):
        return False
    return action.replicas is None or (proposal.replicas or 0) >= action.replicas


def grade(named: list[str], scenario: EvalScenario, nothing_wrong: bool) -> str:
    """The responder's scale: how close the named cause is to the truth's."""
    truth = scenario.truth
    said = {n.lower() for n in named}
    if truth.nothing_wrong:
        return GRADES[0] if nothing_wrong and not said else GRADES[3]
    if said & {t.lower() for t in truth.root_cause}:
        return GRADES[0]
    victims = [
        c.lower() for c in truth.chain if c.lower() not in {t.lower() for t in truth.root_cause}
    ]
    if victims and victims[0] in said:
        return GRADES[1]
    if said & set(victims):
        return GRADES[2]
    return GRADES[3]


def score(answer: str, scenario: EvalScenario, proposals: list[Proposal], invented: int) -> Score:
    truth = scenario.truth
    named = named_causes(answer, scenario)
    nothing = says_nothing_wrong(answer)
    allowed = [p for p in proposals if p.status not in REFUSED]
    refused = len(proposals) - len(allowed)
    if truth.nothing_wrong:
        hit = nothing and not named
        precision = recall = f1 = chain = 1.0 if hit else 0.0
    else:
        wanted = {t.lower() for t in truth.root_cause}
        hits = sum(n.lower() in wanted for n in named)
        precision = hits / len(named) if named else 0.0
        recall = hits / len(wanted)
        f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
        entities = scenario.entities()
        chain = sum(_mentions(answer, entities.get(c, [c])) for c in truth.chain) / len(truth.chain)
    if truth.action is None:
        action_right = not proposals  # proposing nothing: not even a refused proposal
    else:
        action_right = any(_matches(p, truth.action) for p in allowed)
    wrong = any(_matches(p, w) for p in proposals for w in truth.wrong_actions)
    total = f1 * (0.7 + 0.15 * chain + 0.15 * (action_right and not wrong)) * 0.5**invented
    return Score(
        named,
        precision,
        recall,
        f1,
        chain,
        action_right,
        wrong,
        invented,
        total,
        grade(named, scenario, nothing),
        refused,
        nothing,
    )
