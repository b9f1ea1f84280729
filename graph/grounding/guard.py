"""Grounding a draft: find its claims, judge each against the evidence, ask the sources
about the rest at once, and leave an answer that states only what was checked."""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from typing import Literal

from graph.grounding.check import ClaimCheck, Judgement, check_of, judge, order_of, subject_of
from graph.grounding.claims import MAX_CLAIMS, Claim, ClaimKind, find_claims
from graph.grounding.evidence import Evidence, Fact
from graph.grounding.sources import LiveSources, lookups_for
from graph.sentences import cut_sentences

GroundingMode = Literal["remove", "mark"]
UNVERIFIED_MARK = " _(unverified)_"
UNCHECKED_MARK = " _(unchecked)_"
NOT_ASKED = Judgement("unchecked", why="tracegate has no live source to look it up")
TOO_MANY = Judgement("unchecked", why=f"more than {MAX_CLAIMS} facts in one answer")
KNOWN_KINDS: tuple[ClaimKind, ...] = ("node", "pod", "replicaset", "deployment", "service")


async def ground_draft(
    draft: str,
    facts: Sequence[Fact],
    sources: LiveSources | None,
    tolerance_s: float,
) -> tuple[list[Claim], list[ClaimCheck]]:
    """Every claim of `draft` and its check, in order. Past MAX_CLAIMS, claims are left
    unchecked (a draft with hundreds of facts is not an answer anyone reads whole)."""
    evidence = Evidence(facts)
    # the names the evidence knows, by kind, for reading bare and near-miss names
    known = {kind: evidence.values(kind) for kind in KNOWN_KINDS}
    known["pod"] += [p.rsplit("-", 1)[1] for p in known["pod"] if "-" in p]
    claims = find_claims(draft, known)
    # the revision claim each version or image is written with: "revision 41 (1.41.3)",
    # "rev 41, image registry/payment-api:1.41.3" (the claim right after a revision)
    revisions = {
        i: claims[i - 1]
        for i in range(1, min(len(claims), MAX_CLAIMS))
        if _WITH_REVISION.fullmatch(draft, claims[i - 1].end, claims[i].start)
        and claims[i].kind in ("version", "image")
        and claims[i - 1].kind == "revision"
    }
    judgements = [
        judge(c, draft, evidence, tolerance_s, revisions.get(i))
        for i, c in enumerate(claims[:MAX_CLAIMS])
    ]
    judgements += [TOO_MANY] * (len(claims) - len(judgements))
    unresolved = [i for i, f in enumerate(judgements) if f.status is None]
    subjects = evidence.subjects()
    if sources is not None:
        subjects |= {c.value for c in claims if c.kind in ("deployment", "service", "workload")}
    wanted = {
        i: lookups_for(
            claims[i],
            subject_of(claims[i], draft, subjects),
            evidence,
            sources.namespaces if sources is not None else ["?"],
        )
        for i in unresolved
    }
    if sources is None:  # nothing to ask: what a source could settle is unchecked
        for i in unresolved:
            if wanted[i]:
                judgements[i] = NOT_ASKED
    elif unresolved:
        looked = await sources.look_up(key for keys in wanted.values() for key in keys)
        evidence.add(looked.facts)
        for i in unresolved:
            judgement = judge(claims[i], draft, evidence, tolerance_s, revisions.get(i))
            failed = [looked.failed[k] for k in wanted[i] if k in looked.failed]
            if judgement.status is None and failed:
                judgement = Judgement("unchecked", why=failed[0])
            judgements[i] = judgement
    for first, second, back in _ordered_pairs(draft, claims[:MAX_CLAIMS]):
        if judgements[first].status == "grounded" and judgements[second].status == "grounded":
            wrong = _out_of_order(claims[first], claims[second], back, draft, evidence)
            if wrong is not None:
                judgements[first] = wrong
    return claims, [check_of(c, f, evidence) for c, f in zip(claims, judgements, strict=True)]


_FROM_TO = re.compile(r"[\s`*_]*+(?:to|→|->|=>)[\s`*_]*+(?:revision\s+|rev\s+|version\s+|v(?=\d))?")
_FROM = re.compile(r"\bfrom[\s`*_]*+(?:revision\s+|rev\s+|version\s+)?$", re.IGNORECASE)
_BACKWARDS = re.compile(
    r"\b(?:roll(?:ed|ing)?[\s-]*back|rollback|revert\w*|undo\w*|downgrad\w*)", re.I
)


def _ordered_pairs(draft: str, claims: Sequence[Claim]) -> list[tuple[int, int, bool]]:
    """Versions or revisions written as a change, "from 1.41.3 to 1.42.0", "41 → 42": the
    pair, and whether the change goes back (a rollback goes from newer to older)."""
    pairs = []
    for i in range(len(claims) - 1):
        a, b = claims[i], claims[i + 1]
        if a.kind != b.kind or a.kind not in ("version", "revision"):
            continue
        if not _FROM_TO.fullmatch(draft, a.end, b.start):
            continue
        lead = draft[max(a.sentence[0], a.start - 120) : a.start]
        arrow = not re.search(r"\bto\b", draft[a.end : b.start])
        if arrow or _FROM.search(lead):
            pairs.append((i, i + 1, bool(_BACKWARDS.search(lead))))
    return pairs


def _out_of_order(
    a: Claim, b: Claim, back: bool, draft: str, evidence: Evidence
) -> Judgement | None:
    """A change written in the wrong order for the rollout history: "upgraded from 1.42.0
    to 1.41.3" when 1.41.3 is the older release."""
    subject = subject_of(a, draft, evidence.subjects())
    if subject is None:
        return None
    first, second = order_of(a, subject, evidence), order_of(b, subject, evidence)
    if first is None or second is None or first == second:
        return None
    if (first > second) != back:
        which = "after" if first > second else "before"
        why = f"{subject} ran {a.text} {which} {b.text} (revisions {first} and {second})"
        return Judgement("ungrounded", why=why)
    return None


_WITH_REVISION = re.compile(
    r"[\s`*_]*+[(,:=]?[\s`*_]*+(?:is|was|image|version|tag|runs?|ran)?[\s`*_]*+"
)


def finalise(
    draft: str, claims: Sequence[Claim], checks: Sequence[ClaimCheck], mode: GroundingMode
) -> tuple[str, int, int]:
    """The answer to post, how many claims were removed and how many marked. Ungrounded
    claims are removed with their sentence (`remove`) or marked *(unverified)* (`mark`);
    unchecked ones are marked *(unchecked)* either way. The answer says how many and why."""
    ungrounded = [c for c, k in zip(claims, checks, strict=True) if k["status"] == "ungrounded"]
    unchecked = [c for c, k in zip(claims, checks, strict=True) if k["status"] == "unchecked"]
    marks = [(c, UNCHECKED_MARK) for c in unchecked]
    if mode == "mark":
        marks += [(c, UNVERIFIED_MARK) for c in ungrounded]
    cut = {c.sentence for c in ungrounded} if mode == "remove" else set()
    inserted = [(c, m) for c, m in marks if not any(s <= c.start < e for s, e in cut)]
    # A mark goes right after its claim, or after the code span or fenced block it stands
    # in (a command stays as it was written, copyable).
    fences = [m.span() for m in _FENCE.finditer(draft)]
    code = fences + [
        m.span()
        for m in _INLINE_CODE.finditer(draft)
        if not any(s <= m.start() < e for s, e in fences)
    ]
    placed = sorted((next((e for s, e in code if s <= c.start < e), c.end), m) for c, m in inserted)
    pieces, cursor = [], 0
    for at, mark in placed:
        pieces += [draft[cursor:at], mark]
        cursor = at
    text = "".join([*pieces, draft[cursor:]])
    if cut:
        text = cut_sentences(text, _shifted(cut, placed))
    notes = []
    if ungrounded and mode == "remove":
        which = "1 sentence was" if len(cut) == 1 else f"{len(cut)} sentences were"
        # "a version, an image and a pod": their kinds, each once, with articles
        kinds = [
            f"{'an' if k[0] in 'aeiou' else 'a'} {k}"
            for k in dict.fromkeys(c.kind for c in ungrounded)
        ]
        listed = ", ".join(kinds[:-1]) + (" and " if len(kinds) > 1 else "") + kinds[-1]
        notes.append(
            f"{which} removed for stating {listed} that no tool result, thread "
            "message or cluster lookup shows"
        )
    elif ungrounded:
        notes.append(
            f"{len(ungrounded)} fact{'s' * (len(ungrounded) != 1)} marked _unverified_: no tool "
            "result, thread message or cluster lookup shows them"
        )
    if unchecked:
        notes.append(
            f"{len(unchecked)} fact{'s' * (len(unchecked) != 1)} marked _unchecked_: their "
            "source could not be reached"
        )
    if notes:
        text = text.rstrip() + "\n\n" + "\n".join(f"_{n[:1].upper()}{n[1:]}._" for n in notes)
    return text, len(ungrounded) if mode == "remove" else 0, len(marks)


_FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```[^\n]*", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]+`")


def _shifted(
    spans: set[tuple[int, int]], marks: Sequence[tuple[int, str]]
) -> list[tuple[int, int]]:
    """Sentence spans moved by the marks inserted before (or inside) them: a position moves
    by every mark inserted at or before it."""
    placed = sorted((at, len(m)) for at, m in marks)
    ends = [end for end, _ in placed]
    totals = list(itertools.accumulate(size for _, size in placed))

    def shift(position: int) -> int:
        count = bisect.bisect_right(ends, position)
        return totals[count - 1] if count else 0

    return [(start + shift(start), end + shift(end)) for start, end in spans]
