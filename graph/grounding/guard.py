"""Grounding a draft: find its claims, judge each against the evidence, ask the sources
about the rest at once, and leave an answer that states only what was checked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from graph.grounding.check import ClaimCheck, Finding, check_of, judge, subject_of
from graph.grounding.claims import Claim, find_claims
from graph.grounding.evidence import Evidence, Fact
from graph.grounding.sources import LiveSources, lookups_for
from graph.sentences import cut_sentences

GroundingMode = Literal["remove", "mark"]
UNVERIFIED_MARK = " _(unverified)_"
UNCHECKED_MARK = " _(unchecked)_"


async def ground_draft(
    draft: str,
    facts: Sequence[Fact],
    sources: LiveSources | None,
    tolerance_s: float,
) -> tuple[list[Claim], list[ClaimCheck]]:
    """Every claim of `draft` and its check, in order."""
    claims = find_claims(draft)
    evidence = Evidence(facts)
    findings = [judge(c, draft, evidence, tolerance_s) for c in claims]
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
            finding = judge(claims[i], draft, evidence, tolerance_s)
            failed = [looked.failed[k] for k in wanted[i] if k in looked.failed]
            if finding.status is None and failed:
                finding = Finding("unchecked", why=failed[0])
            findings[i] = finding
    return claims, [check_of(c, f) for c, f in zip(claims, findings, strict=True)]


def _kinds(claims: Sequence[Claim]) -> str:
    kinds = list(dict.fromkeys(c.kind for c in claims))
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
    text = draft
    for claim, mark in sorted(marks, key=lambda pair: pair[0].end, reverse=True):
        if not any(s <= claim.start < e for s, e in cut):
            text = text[: claim.end] + mark + text[claim.end :]
    if cut:  # marks sit after every cut sentence's claims, so the spans still hold
        text = cut_sentences(text, _shifted(cut, marks))
    notes = []
    if ungrounded and mode == "remove":
        which = "1 sentence was" if len(cut) == 1 else f"{len(cut)} sentences were"
        notes.append(
            f"{which} removed for stating a {_kinds(ungrounded)} that no tool result, thread "
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


def _shifted(
    spans: set[tuple[int, int]], marks: Sequence[tuple[Claim, str]]
) -> list[tuple[int, int]]:
    """Sentence spans moved by the marks inserted before (or inside) them."""
    moved = []
    for start, end in spans:
        before = sum(len(m) for c, m in marks if c.end <= start)
        inside = sum(len(m) for c, m in marks if start < c.end <= end)
        moved.append((start + before, end + before + inside))
    return moved
