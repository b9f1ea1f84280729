"""Grounding a draft: find its claims, judge each against the evidence, ask the sources
about the rest at once, and leave an answer that states only what was checked."""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from typing import Literal

from graph.grounding.check import ClaimCheck, Finding, check_of, judge, subject_of
from graph.grounding.claims import MAX_CLAIMS, Claim, find_claims
from graph.grounding.evidence import Evidence, Fact
from graph.grounding.sources import LiveSources, lookups_for
from graph.sentences import cut_sentences

GroundingMode = Literal["remove", "mark"]
UNVERIFIED_MARK = " _(unverified)_"
UNCHECKED_MARK = " _(unchecked)_"
TOO_MANY = Finding("unchecked", why=f"more than {MAX_CLAIMS} facts in one answer")


async def ground_draft(
    draft: str,
    facts: Sequence[Fact],
    sources: LiveSources | None,
    tolerance_s: float,
) -> tuple[list[Claim], list[ClaimCheck]]:
    """Every claim of `draft` and its check, in order. Past MAX_CLAIMS, claims are left
    unchecked (a draft with hundreds of facts is not an answer anyone reads whole)."""
    claims = find_claims(draft)
    evidence = Evidence(facts)
    revisions = _paired_revisions(draft, claims)
    findings = [
        judge(c, draft, evidence, tolerance_s, revisions.get(i))
        for i, c in enumerate(claims[:MAX_CLAIMS])
    ]
    findings += [TOO_MANY] * (len(claims) - len(findings))
    unresolved = [i for i, f in enumerate(findings) if f.status is None]
    if unresolved and sources is not None:
        named = {c.value for c in claims if c.kind in ("deployment", "service", "workload")}
        subjects = evidence.subjects() | named
        wanted = {
            i: lookups_for(
                claims[i],
                subject_of(claims[i], draft, evidence, subjects),
                evidence,
                sources.namespaces,
            )
            for i in unresolved
        }
        looked = await sources.look_up(key for keys in wanted.values() for key in keys)
        evidence.add(looked.facts)
        for i in unresolved:
            finding = judge(claims[i], draft, evidence, tolerance_s, revisions.get(i))
            failed = [looked.failed[k] for k in wanted[i] if k in looked.failed]
            if finding.status is None and failed:
                finding = Finding("unchecked", why=failed[0])
            findings[i] = finding
    return claims, [check_of(c, f) for c, f in zip(claims, findings, strict=True)]


_WITH_REVISION = re.compile(r"[\s`*_]*+[(,:]?[\s`*_]*+(?:image|version|tag|runs?|ran)?[\s`*_]*+")


def _paired_revisions(draft: str, claims: Sequence[Claim]) -> dict[int, Claim]:
    """The revision claim each version or image is written with: "revision 41 (1.41.3)",
    "rev 41, image registry/payment-api:1.41.3" (the claim right after a revision)."""
    paired: dict[int, Claim] = {}
    for i in range(1, min(len(claims), MAX_CLAIMS)):
        before, claim = claims[i - 1], claims[i]
        written_with = _WITH_REVISION.fullmatch(draft, before.end, claim.start)
        if claim.kind in ("version", "image") and before.kind == "revision" and written_with:
            paired[i] = before
    return paired


def _kinds(claims: Sequence[Claim]) -> str:
    """ "a version, an image and a pod": the kinds of `claims`, each once, with articles."""
    kinds = [
        ("an " if k[0] in "aeiou" else "a ") + k for k in dict.fromkeys(c.kind for c in claims)
    ]
    return ", ".join(kinds[:-1]) + (" and " if len(kinds) > 1 else "") + kinds[-1]


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
    code = _code_spans(draft)
    placed = sorted(((_mark_at(code, claim), mark) for claim, mark in inserted))
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
        notes.append(
            f"{which} removed for stating {_kinds(ungrounded)} that no tool result, thread "
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


def _code_spans(text: str) -> list[tuple[int, int]]:
    fences = [(m.start(), m.end()) for m in _FENCE.finditer(text)]
    inline = [
        (m.start(), m.end())
        for m in _INLINE_CODE.finditer(text)
        if not any(s <= m.start() < e for s, e in fences)
    ]
    return fences + inline


def _mark_at(code: list[tuple[int, int]], claim: Claim) -> int:
    """Where a claim's mark goes: right after it, or after the code span or fenced block
    it stands in (a command stays as it was written, copyable)."""
    return next((end for start, end in code if start <= claim.start < end), claim.end)


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
