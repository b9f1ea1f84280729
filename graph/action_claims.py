"""The action-claim guard: a draft may not say an action was approved or carried out
unless tracegate's own records of the thread's actions say so.

Deterministic, no model involved. A *claim* is a sentence that asserts, as a fact, that
an action was approved, executed, rolled back or scaled. Mentions are not claims:
questions ("should we roll back?"), proposals and requests ("approve it in the card
below"), modal or conditional phrasing ("would help", "once approved", "needs to be
approved"), negations ("was not approved") and reported speech ("the span says it is
approved"). A claim is true when a request of the thread it can refer to is in a state
that supports it: approved means an approver's click moved it to `approved`; executed,
rolled back or scaled mean it `succeeded` for real (a dry run changed nothing).

Err on the side of flagging: a false positive costs one revision, a missed false claim
misleads an engineer in the middle of an incident.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gates.model import ActionRequest
from graph.sentences import cut_sentences, sentence_spans

ActionClaimKind = Literal["approved", "executed", "rolled_back", "scaled"]

# Verbs that assert an outcome by themselves.
_CLAIM_VERBS: dict[ActionClaimKind, str] = {
    "approved": r"approved|authori[sz]ed|signed\s+off",
    "executed": r"executed",
    "rolled_back": r"rolled\s+back|reverted|undone",
    "scaled": r"scaled",
}
_KIND: dict[str, ActionClaimKind] = {kind: kind for kind in _CLAIM_VERBS}
# Verbs too common in telemetry talk ("the query completed") to count on their own: they
# make a claim only in a sentence that is about an action.
_GENERIC_VERBS = r"carried\s+out|performed|applied|completed"
_ACTION_WORDS = re.compile(
    r"\b(?:roll-?backs?|roll(?:ing|ed)?\s+back|scal(?:e|ed|ing)|actions?|remediation|undo)\b",
    re.IGNORECASE,
)
_VERB = re.compile(
    "|".join(f"(?P<{kind}>\\b(?:{words})\\b)" for kind, words in _CLAIM_VERBS.items())
    + f"|(?P<generic>\\b(?:{_GENERIC_VERBS})\\b)",
    re.IGNORECASE,
)


def _words(*groups: str) -> frozenset[str]:
    return frozenset(" ".join(groups).split())


# Words before the verb (in its clause) that turn a statement of fact into something else.
_NOT_A_FACT = _words(
    "not no never nothing none neither nor without than instead",  # negation
    # modality, obligation, wishes: "will be executed", "needs to be approved", "be scaled"
    "be will would could should can may might must shall cannot",
    "need needs require requires awaiting pending ready want wants please",
    "if unless whether",  # condition
    # reported speech: "the span says it is approved"
    "say says said saying claim claims claimed tell tells told instruct instructs asks",
)
# Time words that make a condition unless the clause is in the past ("once approved" is
# not a claim, "after it was approved" is).
_TEMPORAL = _words("once when whenever after before until")
_PAST = _words("was were had")
_OPENERS = _TEMPORAL | _words("if unless")
MAX_LISTED = 10  # the thread's most recent requests named in revision feedback
_WINDOW = 6  # words before the verb that can qualify it
_CLAUSE_BREAK = re.compile(r"[,;:()\u2013\u2014]|\s-\s")
_WORD = re.compile(r"[a-z']+")


@dataclass(frozen=True)
class ActionClaim:
    """One sentence that asserts an action outcome, and what it asserts."""

    sentence: str
    start: int
    end: int
    kinds: frozenset[ActionClaimKind]


def _hedged(words: list[str]) -> bool:
    for index, word in enumerate(words):
        if word in _NOT_A_FACT or word.endswith("n't"):
            return True
        if word in _TEMPORAL and not _PAST.intersection(words[index + 1 :]):
            return True
    return False


def find_action_claims(text: str) -> list[ActionClaim]:
    """Every sentence of `text` that states as a fact that an action was approved,
    executed, rolled back or scaled, in order."""
    claims = []
    for start, end in sentence_spans(text):
        sentence = text[start:end]
        if sentence.rstrip().endswith("?"):
            continue
        kinds: set[ActionClaimKind] = set()
        for verb in _VERB.finditer(sentence):
            # The words leading up to the verb can make it something other than a fact: those
            # of its own clause, or an opening condition ("If it is approved, it is rolled back").
            before = sentence[: verb.start()].lower().replace("\u2019", "'")
            clauses = [_WORD.findall(clause) for clause in _CLAUSE_BREAK.split(before)]
            opening = clauses[0]
            if opening and opening[0] in _OPENERS and _hedged(opening):
                continue
            if _hedged(clauses[-1][-_WINDOW:]):
                continue
            if verb.lastgroup in _KIND:
                kinds.add(_KIND[verb.lastgroup])
            elif _ACTION_WORDS.search(sentence):
                kinds.add("executed")
        if kinds:
            claims.append(ActionClaim(sentence.strip(), start, end, frozenset(kinds)))
    return claims


def _supports(request: ActionRequest, kind: ActionClaimKind) -> bool:
    if kind == "approved":
        return any(step.to_status == "approved" for step in request.history)
    ran = request.status == "succeeded" and not (request.outcome and request.outcome.dry_run)
    if kind == "rolled_back":
        return ran and request.action == "rollout_undo"
    if kind == "scaled":
        return ran and request.action == "scale"
    return ran


def _named(sentence: str, deployment: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(deployment)}(?![\w-])", sentence, re.I) is not None


def unsupported_claims(text: str, requests: Sequence[ActionRequest]) -> list[ActionClaim]:
    """The claims of `text` that the thread's action records do not bear out. A claim holds
    when a request it can refer to is in a state that makes it true: a sentence that names
    a deployment refers to that deployment's requests only; one that names none may refer
    to any request of the thread."""
    unsupported = []
    for claim in find_action_claims(text):
        candidates = [r for r in requests if _named(claim.sentence, r.deployment)] or requests
        if not all(any(_supports(r, kind) for r in candidates) for kind in claim.kinds):
            unsupported.append(claim)
    return unsupported


def true_state(request: ActionRequest) -> str:
    """A request's state in plain words, from its record (never from the model)."""
    who = {step.to_status: step.actor for step in request.history}
    detail = request.outcome.detail if request.outcome else ""
    if request.status == "refused":
        if request.refusal is not None:
            return f"refused by {request.refusal.gate}: {request.refusal.reason}"
        return f"refused by the reviewer: {request.judge.reason if request.judge else 'no verdict'}"
    if request.status == "pending_approval":
        return "pending approval: nobody has approved it yet"
    if request.status in ("approved", "executing"):
        return f"approved by {who.get('approved', '?')}, executing"
    if request.status == "rejected":
        return f"rejected by {who.get('rejected', '?')}"
    if request.status == "expired":
        return "expired: nobody approved it in time"
    if request.status == "succeeded" and request.outcome and request.outcome.dry_run:
        return f"dry run succeeded, nothing was changed: {detail}"
    if request.status in ("succeeded", "failed", "aborted"):
        return f"{request.status}: {detail}" if detail else request.status
    return "being checked by the gates"


def revision_feedback(
    false_claims: Sequence[ActionClaim], requests: Sequence[ActionRequest]
) -> str:
    """The message that sends the agent back when its draft claims what did not happen."""
    quoted = "\n".join(f'- "{c.sentence[:300]}"' for c in false_claims)
    if requests:
        states = "\n".join(
            f"- {r.id} ({r.describe()}): {true_state(r)}" for r in requests[-MAX_LISTED:]
        )
        record = f"The actions proposed in this thread, as tracegate recorded them:\n{states}"
    else:
        record = "No action has been proposed in this thread, so none was approved or executed."
    return (
        "[action claim guard] Your draft states that an action was approved or carried out, "
        f"which tracegate's records do not show:\n{quoted}\n{record}\n"
        "Only an engineer's click on an approval card approves an action, and only then does "
        "tracegate execute it. Describe each action by its recorded state, drop any claim "
        "these states do not support, and answer again."
    )


def remove_claims(text: str, false_claims: Sequence[ActionClaim]) -> tuple[str, int]:
    """`text` without the false claims, and how many went; the text says it was cut."""
    cleaned = cut_sentences(text, [(c.start, c.end) for c in false_claims])
    removed = len(false_claims)
    if removed:
        which = "1 sentence was" if removed == 1 else f"{removed} sentences were"
        cleaned += (
            f"\n\n_{which} removed for saying that an action was approved or carried out, "
            "which tracegate's records do not show._"
        )
    return cleaned, removed
