"""The grounding check: each claim of a draft against the evidence of its kind.

A claim is *grounded* when its value is in the evidence of its kind: a pod from a trace's
`k8s.pod.name`; a version from `service.version`, an image tag or the rollout history (of
the service or Deployment the sentence names, when it names one); a revision from that
Deployment's rollout history ("current revision N" must be the current one, "previous" or
"back to" an earlier one); a time within the tolerance of a timestamp in the evidence (a
sentence about a rollout, of a rollout's time). A claim not in the evidence is looked up
at its source where one can be asked (graph/grounding/sources.py); a source that cannot be
reached leaves it *unchecked*, never grounded. Anything else is *ungrounded*.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, TypedDict

from graph.grounding.claims import NAME_KINDS, ZONES, Claim
from graph.grounding.evidence import ROLLOUT, Evidence, Fact, iso

ClaimStatus = Literal["grounded", "ungrounded", "unchecked"]
MAX_HELD = 8  # values of a kind named in feedback


class ClaimCheck(TypedDict):
    kind: str
    text: str  # as the draft wrote it
    status: ClaimStatus
    source: str  # grounded: where the value was seen; otherwise ""
    detail: str  # ungrounded: what the evidence holds instead; unchecked: why


@dataclass(frozen=True)
class Finding:
    """One claim's judgement; `held` lists what the evidence has of its kind instead."""

    status: ClaimStatus | None  # None: not in the evidence (a source may still know)
    source: str = ""
    held: tuple[str, ...] = ()
    why: str = ""


_NAMES_FOR: dict[str, tuple[str, ...]] = {
    "pod": ("pod",),
    "replicaset": ("replicaset",),
    "deployment": ("deployment", "service"),
    "service": ("service", "deployment"),
    # A name of no stated kind: any name the evidence holds, or a name a text quoted.
    "workload": ("service", "deployment", "pod", "replicaset", "namespace", "node", "name"),
    "namespace": ("namespace",),
    "node": ("node",),
}
_ROLLOUT_WORDS = re.compile(
    r"\b(?:(?:re)?deploy(?:ed|ment|s)?|rolled\s+out|roll-?outs?|released?|revisions?|rev"
    r"|went\s+(?:out|live|from|to)|moved\s+(?:from|to)|switched|shipped|upgraded|bumped|landed"
    r"|pushed|promoted)\b",
    re.I,
)
_SYMPTOM_WORDS = re.compile(
    r"\b(?:errors?|fail\w*|alerts?|fir(?:ed|ing)|5\d\ds?|5xxs?|spikes?|latenc\w*|timeouts?"
    r"|start(?:ed|s)?|began|begin\w*|broke|crash\w*)\b",
    re.I,
)


_OF = re.compile(r"[\s`*_]*+(?:\(|,)?[\s`*_]*+(?:(?:of|for|in|on|from)\s++(?:the\s++)?)?[\s`*_]*+")


def _grounded(item: Fact | None) -> Finding | None:
    return Finding("grounded", item["source"]) if item else None


def subject_of(
    claim: Claim, draft: str, evidence: Evidence, subjects: frozenset[str] | set[str]
) -> str | None:
    """The service or Deployment the claim's sentence names nearest before the claim, or
    right after it ("1.42.0 of payment-api", "revision 42 (payment-api)")."""
    start, end = claim.sentence
    sentence = draft[start:end].lower()
    best: tuple[int, str] | None = None
    at, after = claim.start - start, claim.end - start
    opens = _clause_start(sentence, at)
    for named_start, named_end, name in _named(sentence, frozenset(subjects)):
        if opens <= named_start and named_end <= at:
            distance = at - named_end
        elif named_start >= after and _OF.fullmatch(sentence, after, named_start):
            distance = 1000 + named_start - after
        else:
            continue
        if best is None or distance < best[0]:
            best = (distance, name)
    return best[1] if best else None


def _clause_start(sentence: str, at: int) -> int:
    """Where the clause holding position `at` begins (after a ; — or ": ")."""
    breaks = [m.end() for m in _CLAUSE_BREAK.finditer(sentence, max(0, at - MAX_CLAUSE), at)]
    return breaks[-1] if breaks else 0


@functools.lru_cache(maxsize=512)
def _named(sentence: str, subjects: frozenset[str]) -> tuple[tuple[int, int, str], ...]:
    """Where each subject is named in a sentence (each sentence is scanned once a draft)."""
    return tuple(
        (m.start(), m.end(), name)
        for name in sorted(subjects)
        for m in re.finditer(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", sentence)
    )


def _name(claim: Claim, evidence: Evidence) -> Finding:
    kinds = _NAMES_FOR[claim.kind]
    found = _grounded(evidence.find(kinds, claim.value))
    if found:
        return found
    if claim.kind == "pod" and "-" not in claim.value:  # "pods h4kzp and w9t2r": a suffix
        ending = [p for p in evidence.values("pod") if p.endswith("-" + claim.value)]
        if len(ending) == 1:
            return _grounded(evidence.find(["pod"], ending[0])) or Finding(None)
    if claim.kind == "replicaset":  # a pod of it was seen: its name is the pod's prefix
        for pod in evidence.values("pod"):
            if pod.rsplit("-", 1)[0] == claim.value:
                return _grounded(evidence.find(["pod"], pod)) or Finding(None)
    held = sorted(evidence.values(kinds[0]), key=lambda v: -_shared_prefix(v, claim.value))
    return Finding(None, held=tuple(held))


def _shared_prefix(a: str, b: str) -> int:
    """How far two names agree from the start: the nearest real names are listed first."""
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _image(claim: Claim, subject: str | None, evidence: Evidence) -> Finding:
    value = claim.value
    own = evidence.values("image", subject) if subject else []
    for image in own or evidence.values("image"):
        short = image.rsplit("/", 1)[-1]
        if value in (image, short) or image.endswith("/" + value):
            return _grounded(evidence.find(["image"], image)) or Finding(None)
        if "@" in value and value.split("@", 1)[1] in image:
            return _grounded(evidence.find(["image"], image)) or Finding(None)
    return Finding(None, held=tuple(own or evidence.values("image")))


def _version(claim: Claim, subject: str | None, evidence: Evidence) -> Finding:
    own = evidence.values("version", subject) if subject else []
    if claim.role == "current" and subject:
        current = evidence.current("version", subject)
        if current and claim.value not in current:
            why = f"{subject}'s current version is {', '.join(current)}"
            return Finding("ungrounded", held=tuple(current), why=why)
    if own:
        if claim.value in own:
            return _grounded(evidence.find(["version"], claim.value, subject)) or Finding(None)
        others = evidence.find(["version"], claim.value)
        owner = others.get("subject") if others else None
        why = f"{claim.text} is {owner}'s, not {subject}'s" if owner else ""
        status: ClaimStatus | None = "ungrounded" if owner else None
        return Finding(status, held=tuple(own), why=why)
    if subject:  # the service named runs no version the evidence knows: ask its source
        return Finding(None, why=f"no version of {subject} in the evidence")
    found = _grounded(evidence.find(["version"], claim.value))
    return found or Finding(None, held=tuple(evidence.values("version")))


def _revision(claim: Claim, subject: str | None, evidence: Evidence) -> Finding:
    with_history = {s for s in evidence.subjects() if evidence.values("revision", s)}
    if subject not in with_history:
        subject = next(iter(with_history)) if len(with_history) == 1 else None
    if subject is None:  # any Deployment's, in the role the sentence gives it
        for other in with_history:
            current = evidence.current("revision", other)
            newest = max(map(int, current)) if current else None
            if claim.value not in evidence.values("revision", other):
                continue
            if claim.role == "current" and newest is not None and int(claim.value) != newest:
                continue
            if claim.role == "previous" and newest is not None and int(claim.value) >= newest:
                continue
            return _grounded(evidence.find(["revision"], claim.value, other)) or Finding(None)
        held = tuple(evidence.values("revision"))
        if evidence.find(["revision"], claim.value):
            return Finding("ungrounded", held=held, why=f"no Deployment's {claim.role} revision")
        return Finding(None, held=held)
    known = evidence.values("revision", subject)
    current = evidence.current("revision", subject)
    held = tuple(sorted(known, key=int))
    if claim.value not in known:
        return Finding(None, why=f"{subject}'s revisions are {', '.join(held)}")
    if claim.role == "current" and current and claim.value not in current:
        why = f"{subject}'s current revision is {max(current, key=int)}, not {claim.value}"
        return Finding("ungrounded", held=held, why=why)
    if claim.role == "previous" and current and int(claim.value) >= max(map(int, current)):
        why = f"revision {claim.value} is {subject}'s current one, not an earlier one"
        return Finding("ungrounded", held=held, why=why)
    return _grounded(evidence.find(["revision"], claim.value, subject)) or Finding(None)


_TIME = re.compile(
    r"(?:(\d{4}-\d{2}-\d{2})[t ])?(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\.\d+)?"
    r"(?:\s?([ap])\.?m\.?)?\s?([a-z]+)?([+-]\d{1,2}(?::?\d{2})?)?$",
    re.ASCII,
)


def parse_time(text: str) -> tuple[float | None, int, int] | None:
    """(the instant if the text has a date, else None; the UTC second of the day; how
    precise it is in seconds), or None when it cannot be read."""
    m = _TIME.match(text.strip().lower())
    if not m:
        return None
    date, hours, minutes, seconds, half, zone, shift = m.groups()
    offset_min = 0
    if zone:
        if zone not in ZONES:
            return None
        offset_min = ZONES[zone]
    if shift:  # "+02:00", "UTC+1", "-0500"
        digits = shift[1:].replace(":", "")
        hours_off, minutes_off = (digits, "0") if len(digits) <= 2 else (digits[:-2], digits[-2:])
        offset_min += (int(hours_off) * 60 + int(minutes_off)) * (-1 if shift[0] == "-" else 1)
    hour = int(hours)
    if half:  # "2:01 PM": 14:01; "12:30 am": 00:30
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half == "p" else 0)
    local = hour * 3600 + int(minutes) * 60 + int(seconds or 0)
    utc_second = (local - offset_min * 60) % 86400
    precision = 1 if seconds else 60
    if date:
        try:
            midnight = datetime.fromisoformat(date).replace(tzinfo=UTC).timestamp()
        except ValueError:  # "2026-11-31": no such day
            return None
        return midnight + local - offset_min * 60, utc_second, precision
    return None, utc_second, precision


_CLAUSE_BREAK = re.compile(r";|\s[-–—]\s|:\s")


def _about(draft: str, claim: Claim) -> str | None:
    """What a time is the time of, by its clause: "rollout" (deployed, rolled out, revision
    ...) or "symptom" (errors, alert, started ...) when the clause speaks of only one of
    them; None (any time) when it speaks of both or neither."""
    clause = _clause(draft, claim)
    at = clause.find(claim.text)
    # the cue word the time is written with: the nearest before it, no comma between
    lead = clause[:at]
    cues = [(m.end(), "rollout") for m in _ROLLOUT_WORDS.finditer(lead)]
    cues += [(m.end(), "symptom") for m in _SYMPTOM_WORDS.finditer(lead)]
    if cues:
        end, what = max(cues)
        if "," not in lead[end:]:
            return what
    rollout = bool(_ROLLOUT_WORDS.search(clause))
    symptom = bool(_SYMPTOM_WORDS.search(clause))
    if rollout != symptom:
        return "rollout" if rollout else "symptom"
    return None


def _clause(draft: str, claim: Claim) -> str:
    """The part of the claim's sentence between clause breaks (; — -) around it."""
    start, end = claim.sentence
    before = draft[max(start, claim.start - MAX_CLAUSE) : claim.start]
    after = draft[claim.end : min(end, claim.end + MAX_CLAUSE)]
    breaks = list(_CLAUSE_BREAK.finditer(before))
    head = before[breaks[-1].end() :] if breaks else before
    tail = _CLAUSE_BREAK.search(after)
    return head + claim.text + (after[: tail.start()] if tail else after)


MAX_CLAUSE = 300  # characters read either side of a time for its clause
_MONTH_NAMES = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTHS = "|".join(rf"{m[:3]}(?:{m[3:]})?" if len(m) > 3 else m for m in _MONTH_NAMES)
# A date right before the time: "on 2026-11-28 at 14:10", "Nov 28, 14:10", "28 November 14:10"
_ADJACENT = r",?\s*(?:at\s+|@\s*)?$"
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})" + _ADJACENT, re.ASCII)
_NAMED_DAY = re.compile(
    rf"\b(?:({_MONTHS})\.?\s+(\d{{1,2}})|(\d{{1,2}})\s+({_MONTHS}))\b" + _ADJACENT,
    re.IGNORECASE | re.ASCII,
)
DATE_REACH = 32  # characters before a time where its date may stand


def _stated_day(before: str, seen: list[tuple[float, Fact]]) -> float | None:
    """Midnight UTC of the date the sentence states before a clock time, if it states one
    (a month name takes the year of the newest evidence)."""
    before = before[-DATE_REACH:]
    m = _ISO_DAY.search(before) or _NAMED_DAY.search(before)
    if m is None:
        return None
    try:
        if m.re is _ISO_DAY:
            year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
        else:
            name = (m.group(1) or m.group(4)).lower()[:3]
            newest = max((at for at, _ in seen), default=0.0)
            year = datetime.fromtimestamp(newest, UTC).year
            month = [n[:3] for n in _MONTH_NAMES].index(name) + 1
            day = int(m.group(2) or m.group(3))
        return datetime(year, month, day, tzinfo=UTC).timestamp()
    except ValueError:  # "2026-02-31"
        return None


def _time(claim: Claim, draft: str, evidence: Evidence, tolerance_s: float) -> Finding:
    parsed = parse_time(claim.value)
    if parsed is None:
        return Finding("unchecked", why=f"{claim.text} is not a time tracegate can read")
    instant, second, precision = parsed
    about = _about(draft, claim)
    about_rollout = about == "rollout"
    # A rollout's time must be a rollout's; any other time may be any time seen (symptoms
    # are often compared with rollouts in one breath: "deployed before the errors (13:10)").
    pool = evidence.times(ROLLOUT) if about_rollout else evidence.times()
    subject = subject_of(claim, draft, evidence, evidence.subjects()) if about_rollout else None
    own = evidence.times(ROLLOUT, subject) if subject else []
    pool = own or pool  # the rollouts of the Deployment the sentence names, if it names one
    seen = evidence.times()
    day = _stated_day(draft[claim.sentence[0] : claim.start], seen)
    if instant is None and day is not None:  # "on 2026-11-28 at 14:10", "Nov 28, 14:10"
        instant = day + second
    elif instant is None and seen:  # a clock time alone is the last such time up to now
        newest = max(at for at, _ in seen)
        instant = newest - newest % 86400 + second
        if instant > newest + tolerance_s + precision:
            instant -= 86400
    slack = tolerance_s + precision - 1
    for at, item in sorted(pool, key=lambda pair: pair[0]):
        if instant is not None and abs(instant - at) <= slack:
            return Finding("grounded", item["source"])
    near = sorted(pool, key=lambda pair: pair[0])
    held = tuple(iso(at) for at, _ in (near[:2] + near[-2:] if len(near) > 4 else near))
    what = "rollout times" if about_rollout else "times"
    return Finding(None, held=held, why=f"no {what} in the evidence within the tolerance")


def judge(
    claim: Claim,
    draft: str,
    evidence: Evidence,
    tolerance_s: float,
    revision: Claim | None = None,
) -> Finding:
    """One claim against the evidence, no source asked; `revision` is the revision claim a
    version or image is written with, if any."""
    if claim.kind in NAME_KINDS:
        return _name(claim, evidence)
    if claim.kind == "time":
        return _time(claim, draft, evidence, tolerance_s)
    subject = subject_of(claim, draft, evidence, evidence.subjects())
    if claim.kind in ("image", "version") and revision is not None:
        paired = _of_revision(claim, revision, subject, evidence)
        if paired is not None:
            return paired
    if claim.kind == "image":
        return _image(claim, subject, evidence)
    if claim.kind == "version":
        return _version(claim, subject, evidence)
    return _revision(claim, subject, evidence)


def _of_revision(
    claim: Claim, revision: Claim, subject: str | None, evidence: Evidence
) -> Finding | None:
    """A version or image written with its revision ("revision 41 (1.41.3)") must be that
    revision's; None when the evidence does not say what the revision ran."""
    ran = [f for f in evidence.facts_of(claim.kind, subject) if f.get("revision") == revision.value]
    if not ran:
        return None
    for item in ran:
        if item["value"] == claim.value or item["value"].endswith("/" + claim.value):
            return Finding("grounded", item["source"])
    held = tuple(sorted({f["value"] for f in ran}))
    why = f"revision {revision.value} ran {', '.join(held)}"
    return Finding("ungrounded", held=held, why=why)


def check_of(claim: Claim, finding: Finding) -> ClaimCheck:
    status: ClaimStatus = finding.status or "ungrounded"
    if status == "grounded":
        detail = ""
    elif finding.why and status == "unchecked":
        detail = finding.why
    else:
        held = ", ".join(finding.held[:MAX_HELD]) + (" …" if len(finding.held) > MAX_HELD else "")
        detail = (
            "; ".join(
                part for part in (finding.why, f"the evidence holds {held}" if held else "") if part
            )
            or f"no {claim.kind} in the evidence"
        )
    return {
        "kind": claim.kind,
        "text": claim.text,
        "status": status,
        "source": finding.source,
        "detail": detail,
    }


def revision_feedback(claims: Sequence[Claim], checks: Sequence[ClaimCheck]) -> str:
    """The message that sends the agent back, naming each ungrounded claim and what the
    evidence holds of its kind."""
    lines = [
        f"- {c.kind} {check['text']!r}: {check['detail']}"
        for c, check in zip(claims, checks, strict=True)
        if check["status"] == "ungrounded"
    ]
    return (
        "[grounding check] Your draft states facts that no tool result, thread message or "
        "cluster lookup shows:\n" + "\n".join(lines) + "\nState only values that appear in tool "
        "results (look them up with a tool if you need them), correct or drop these, and "
        "answer again."
    )
