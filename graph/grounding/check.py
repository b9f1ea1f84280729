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
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from os.path import commonprefix
from typing import Literal, TypedDict

from graph.grounding import times
from graph.grounding.claims import Claim, find_claims, image_parts
from graph.grounding.evidence import QUESTION_TIME, ROLLOUT, Evidence, Fact, iso

ClaimStatus = Literal["grounded", "ungrounded", "unchecked"]
MAX_HELD = 8  # values of a kind named in feedback


class ClaimCheck(TypedDict):
    kind: str
    text: str  # as the draft wrote it
    status: ClaimStatus
    source: str  # grounded: where the value was seen; otherwise ""
    detail: str  # ungrounded: what the evidence holds instead; unchecked: why
    # grounded: "text" when the value was only seen in text people or workloads wrote
    # (a thread message, a log line, an event's message); "" for a record
    basis: str
    where: str  # grounded: the link or command that shows the source ("" when none)


@dataclass(frozen=True)
class Judgement:
    """One claim's judgement; `held` lists what the evidence has of its kind instead."""

    status: ClaimStatus | None  # None: not in the evidence (a source may still know)
    source: str = ""
    basis: str = ""  # grounded: "text" when only free text showed it
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
    r"|start(?:ed|s)?|began|begin\w*|broke|crash\w*|oom\w*|killed|restart\w*|evicted"
    r"|back(?:ing)?[\s-]?off|unhealthy|unready|down|outage|degraded|paged|exhausted"
    r"|throttl\w*|saturat\w*|terminated|stopped|recovered|resolved|died|panick?\w*)\b",
    re.I,
)


_OF = re.compile(r"[\s`*_]*+(?:\(|,)?[\s`*_]*+(?:(?:of|for|in|on|from)\s++(?:the\s++)?)?[\s`*_]*+")


def _grounded(item: Fact | None) -> Judgement | None:
    return Judgement("grounded", item["source"], basis=item.get("basis", "")) if item else None


def subject_of(claim: Claim, draft: str, subjects: frozenset[str]) -> str | None:
    """The service or Deployment a claim is of: the one named right after it with "of",
    "for" or in parentheses ("revision 42 of payment-api", "1.42.0 (payment-api)"), else the
    nearest named before it in its clause, else right after it ("1.42.0, payment-api"), else
    the nearest before it in its sentence ("- **cart**: version 5.2.0")."""
    start, end = claim.sentence
    sentence = draft[start:end].lower()
    at, after = claim.start - start, claim.end - start
    # where the clause holding the claim begins (after a ; — or ": ")
    breaks = _CLAUSE_BREAK.finditer(sentence, max(0, at - MAX_CLAUSE), at)
    opens = max((m.end() for m in breaks), default=0)
    best: tuple[int, str] | None = None
    for named_start, named_end, name in _named(sentence, subjects):
        if named_end <= at:
            distance = at - named_end + (0 if opens <= named_start else 2000)
        elif named_start >= after and (between := _OF.fullmatch(sentence, after, named_start)):
            explicit = re.search(r"\(|\b(?:of|for)\b", between.group())
            distance = -1 if explicit else 1000 + named_start - after
        else:
            continue
        if best is None or distance < best[0]:
            best = (distance, name)
    if best:
        return best[1]
    # In pasted output (a fenced block: kubectl's tables, JSON, YAML), the one named nearest
    # before it in the block: `deployment.apps/cart` over its revisions, `"deployment":
    # "cart"` beside `"revision": 11`.
    opened = draft.rfind(FENCE, max(0, claim.start - MAX_BLOCK_REACH), claim.start)
    inside = opened >= 0 and not draft.count(FENCE, 0, opened) % 2
    named = _named(draft[opened : claim.start].lower(), subjects) if inside else ()
    return max(named)[2] if named else _structured_subject(draft, claim.start, subjects)


FENCE = "```"
MAX_BLOCK_REACH = 2000  # characters of a pasted block read back for its subject


_TABLE_ROW = re.compile(r"[ \t]*+\|")
# "**Deployment:** cart", "Service: payment-api": a key naming what the block is about
_KEY_LINE = re.compile(r"[ \t]*+(?:[-*•][ \t]+)?[*_]*([\w .-]{1,40}?)[*_]*:[*_]*[ \t]")
_SUBJECT_KEYS = frozenset({"deployment", "service", "workload", "app", "component", "name"})


def _structured_subject(draft: str, at: int, subjects: frozenset[str]) -> str | None:
    """On a table row: the one service or Deployment the row names anywhere, else the one
    the table's header and the line introducing it name. On a "Key: value" line: the one
    its block's "Deployment:" (or "Service:") line names. Never a guess between two."""
    line_start = draft.rfind("\n", 0, at) + 1
    line_end = draft.find("\n", at)
    line = draft[line_start : line_end if line_end >= 0 else len(draft)]
    key = _KEY_LINE.match(line)
    if not _TABLE_ROW.match(line) and not key:
        return None
    named = {name for _, _, name in _named(line.lower(), subjects)}
    if named:
        return named.pop() if len(named) == 1 else None
    blank = draft.rfind("\n\n", 0, line_start)
    block_start = blank + 2 if blank >= 0 else 0
    above = draft[max(block_start, line_start - MAX_BLOCK_REACH) : line_start].lower()
    if _TABLE_ROW.match(line):  # and the line that introduces the table, across a blank
        intro = draft[max(0, block_start - 300) : block_start].strip().rsplit("\n", 1)[-1]
        named = {name for _, _, name in _named(intro.lower() + "\n" + above, subjects)}
        return named.pop() if len(named) == 1 else None
    for previous in reversed(above.splitlines()):
        found = _KEY_LINE.match(previous)
        if found and found.group(1).strip().lower() in _SUBJECT_KEYS:
            named = {name for _, _, name in _named(previous, subjects)}
            return named.pop() if len(named) == 1 else None
    return None


@functools.lru_cache(maxsize=512)
def _named(sentence: str, subjects: frozenset[str]) -> tuple[tuple[int, int, str], ...]:
    """Where each subject is named in a sentence (each sentence is scanned once a draft)."""
    return tuple(
        (m.start(), m.end(), name)
        for name in sorted(subjects)
        for m in re.finditer(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", sentence)
    )


def _name(claim: Claim, evidence: Evidence) -> Judgement:
    kinds = _NAMES_FOR[claim.kind]
    found = _grounded(evidence.find(kinds, claim.value))
    if found:
        return found
    if claim.kind in ("pod", "workload") and "-" not in claim.value:  # "pods `h4kzp`": a suffix
        ending = [p for p in evidence.values("pod") if p.endswith("-" + claim.value)]
        if len(ending) == 1:
            return _grounded(evidence.find(["pod"], ending[0])) or Judgement(None)
    if claim.kind == "replicaset":  # a pod of it was seen: its name is the pod's prefix
        for pod in evidence.values("pod"):
            if pod.rsplit("-", 1)[0] == claim.value:
                return _grounded(evidence.find(["pod"], pod)) or Judgement(None)
    # the nearest names first: those that agree with it the furthest from the start
    near = sorted(
        evidence.values(kinds[0]),
        key=lambda v: -len(commonprefix([v, claim.value])),  # noqa: RUF071 (names, no paths)
    )
    return Judgement(None, held=tuple(near))


def image_matches(claimed: str, image: str) -> bool:
    """Whether a written image reference names `image`, part by part: each part written
    must be the image's (a repository by its trailing path, a digest by its prefix)."""
    repository, tag, digest = image_parts(claimed)
    own_repository, own_tag, own_digest = image_parts(image)
    digest, own_digest = digest.removeprefix("sha256:"), own_digest.removeprefix("sha256:")
    if tag and tag != own_tag:
        return False
    if digest and not (len(digest) >= 7 and own_digest.startswith(digest)):
        return False
    if repository and not (
        own_repository == repository or own_repository.endswith("/" + repository)
    ):
        return False
    return bool(repository or tag or digest)


def _image(claim: Claim, subject: str | None, evidence: Evidence) -> Judgement:
    own = evidence.values("image", subject) if subject else []
    for image in own or evidence.values("image"):
        if image_matches(claim.value, image):
            return _grounded(evidence.find(["image"], image)) or Judgement(None)
    if own and subject:  # of the service named, none of its images: whose is it?
        other = next((i for i in evidence.values("image") if image_matches(claim.value, i)), None)
        found = evidence.find(["image"], other) if other else None
        return _not_own(claim, subject, own, found, evidence)
    return Judgement(None, held=tuple(own or evidence.values("image")))


def _not_own(
    claim: Claim, subject: str | None, own: list[str], found: Fact | None, evidence: Evidence
) -> Judgement:
    """A version or image that is none of `subject`'s own: ungrounded when it is another's
    (`found`), or when the evidence holds `subject`'s rollout history (every revision it
    kept, with what each ran: what it lacks, the Deployment did not run)."""
    owner = found.get("subject") if found else None
    why = f"{claim.text} is {owner}'s, not {subject}'s" if owner else ""
    history = subject and any(f.get("revision") for f in evidence.facts_of("version", subject))
    if not owner and history:
        what = "image " if claim.kind == "image" else ""
        why = f"{subject}'s rollout history has no {what}{claim.text}"
    return Judgement("ungrounded" if why else None, held=tuple(own), why=why)


def _version(claim: Claim, subject: str | None, evidence: Evidence) -> Judgement:
    own = evidence.values("version", subject) if subject else []
    current = evidence.values("version", subject, "current") if subject else []
    if claim.role == "current" and current and claim.value not in current:
        why = f"{subject}'s current version is {', '.join(current)}"
        return Judgement("ungrounded", held=tuple(current), why=why)
    if claim.role == "previous" and claim.value in current and len(own) > len(current):
        why = f"{claim.text} is {subject}'s current version, not an earlier one"
        return Judgement("ungrounded", held=tuple(own), why=why)
    if own:
        if claim.value in own:
            return _grounded(evidence.find(["version"], claim.value, subject)) or Judgement(None)
        return _not_own(claim, subject, own, evidence.find(["version"], claim.value), evidence)
    if subject:  # the service named runs no version the evidence knows: ask its source
        return Judgement(None, why=f"no version of {subject} in the evidence")
    found = _grounded(evidence.find(["version"], claim.value))
    return found or Judgement(None, held=tuple(evidence.values("version")))


def _revision(claim: Claim, subject: str | None, evidence: Evidence) -> Judgement:
    with_history = {s for s in evidence.subjects() if evidence.values("revision", s)}
    if subject not in with_history:
        subject = next(iter(with_history)) if len(with_history) == 1 else None
    if subject is None:  # any Deployment's, in the role the sentence gives it
        for other in with_history:
            current = evidence.values("revision", other, "current")
            newest = max(map(int, current)) if current else None
            if claim.value not in evidence.values("revision", other):
                continue
            if claim.role == "current" and newest is not None and int(claim.value) != newest:
                continue
            if claim.role == "previous" and newest is not None and int(claim.value) >= newest:
                continue
            return _grounded(evidence.find(["revision"], claim.value, other)) or Judgement(None)
        held = tuple(evidence.values("revision"))
        if not with_history:  # no rollout history read: only what a message said, if any
            return _grounded(evidence.find(["revision"], claim.value)) or Judgement(None, held=held)
        if evidence.find(["revision"], claim.value):
            role = f"{claim.role} " if claim.role else ""
            why = f"revision {claim.value} is no Deployment's {role}revision"
            return Judgement("ungrounded", held=tuple(h for h in held if h != claim.value), why=why)
        return Judgement(None, held=held)
    known = evidence.values("revision", subject)
    current = evidence.values("revision", subject, "current")
    held = tuple(sorted(known, key=int))
    if claim.value not in known:
        return Judgement(None, why=f"{subject}'s revisions are {', '.join(held)}")
    if claim.role == "current" and current and claim.value not in current:
        why = f"{subject}'s current revision is {max(current, key=int)}, not {claim.value}"
        return Judgement("ungrounded", held=held, why=why)
    if claim.role == "previous" and current and int(claim.value) >= max(map(int, current)):
        why = f"revision {claim.value} is {subject}'s current one, not an earlier one"
        return Judgement("ungrounded", held=held, why=why)
    return _grounded(evidence.find(["revision"], claim.value, subject)) or Judgement(None)


_CLAUSE_BREAK = re.compile(r";|\s[-–—]\s|:\s|\s\|\s|\x1f")


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
    """The part of the claim's sentence between clause breaks (; — -) around it. A time
    that opens its clause ("14:01 — errors start", "- Nov 28, 13:10: deploy") is the time
    of the clause after it: a timeline's entry."""
    start, end = claim.sentence
    before = draft[max(start, claim.start - MAX_CLAUSE) : claim.start]
    after = draft[claim.end : min(end, claim.end + MAX_CLAUSE)]
    breaks = list(_CLAUSE_BREAK.finditer(before))
    head = before[breaks[-1].end() :] if breaks else before
    tail = _CLAUSE_BREAK.search(after)
    if tail and not _WORDS_BEFORE.search(head):
        following = _CLAUSE_BREAK.search(after, tail.end())
        return head + claim.text + after[: following.start() if following else len(after)]
    return head + claim.text + (after[: tail.start()] if tail else after)


# words in a clause before its time other than a date, a weekday or a list's mark
_WORDS_BEFORE = re.compile(
    r"\b(?!(?:on|at|mon|tue|wed|thu|fri|sat|sun|" + times.MONTH_ABBREVIATIONS + r")\w*\b)"
    r"[a-z]{2,}",
    re.IGNORECASE,
)


MAX_CLAUSE = 300  # characters read either side of a time for its clause
DATE_REACH = 32  # characters before a time where its date may stand
CARRY_LINES = 40  # lines above a time read for the zone or date its block states
_ADJACENT_END = re.compile(r",?\s*(?:at\s+|@\s*|on\s+)?$")


def _stated(draft: str, claim: Claim, today: date) -> tuple[str | None, date | None]:
    """The zone and the date stated for a time by its surroundings: a date right before it
    ("Nov 28, 14:10", "on 2026-11-28 at 14:10"); else the zone and date its line, its
    heading, its list's introduction or its table's header states ("Timeline (PT)", "All
    times UTC", "## 2026-11-28"), the nearest first."""
    line_start = draft.rfind("\n", 0, claim.start) + 1
    before = draft[max(line_start, claim.start - DATE_REACH) : claim.start]
    found = times.date_in(before, today.year, today)
    day = found[0] if found and _ADJACENT_END.fullmatch(before, found[2]) else None
    zone = times.declared_zone(draft[line_start : claim.start])
    lines = draft[:line_start].rsplit("\n", CARRY_LINES + 1)[-CARRY_LINES - 1 : -1]
    blank = 0
    for line in reversed(lines):
        if not line.strip():
            blank += 1
            if blank > 1:
                break
            continue
        if zone is None:
            zone = times.declared_zone(line)
        if day is None and not _HAS_CLOCK.search(line):
            found = times.date_in(line, today.year)
            day = found[0] if found else None
    if zone is None:  # "All times are UTC." anywhere before
        zone = next(
            (z for at, z in reversed(times.declared_zones(draft)) if at < claim.start), None
        )
    return zone, day


_HAS_CLOCK = re.compile(r"\d:\d\d")
_YESTERDAY = re.compile(r"\byesterday\b", re.IGNORECASE)


def _time(claim: Claim, draft: str, evidence: Evidence, tolerance_s: float) -> Judgement:
    seen = evidence.times()
    newest = max((at for at, _ in seen), default=0.0)
    zone_name, day = _stated(draft, claim, datetime.fromtimestamp(newest, UTC).date())
    try:
        carried = times.zone(zone_name) if zone_name else None
        written = times.read(claim.text, day, carried)
    except times.Ambiguous as exc:
        return Judgement("unchecked", why=f"{exc} names more than one time zone")
    if written is None:
        return Judgement("unchecked", why=f"{claim.text} is not a time tracegate can read")
    yesterday = bool(_YESTERDAY.search(draft[claim.sentence[0] : claim.start]))
    undated = written.day is None and not yesterday  # its clock is claimed, not its day
    written = written.dated(newest, tolerance_s, 1 if yesterday else 0)
    about = _about(draft, claim)
    if about == "rollout":
        subject = subject_of(claim, draft, evidence.subjects())
        pool = (evidence.times(ROLLOUT, subject) if subject else []) or evidence.times(ROLLOUT)
        revisions = {c.value for c in find_claims(_clause(draft, claim)) if c.kind == "revision"}
        if len(revisions) == 1:  # "revision 42 rolled out at 13:10": that revision's rollout
            own = [(at, f) for at, f in pool if f.get("revision") in revisions]
            pool = own or pool
    elif about == "symptom":  # errors, alerts, events: not when someone asked about them
        pool = [(at, f) for at, f in seen if f["source"] != QUESTION_TIME]
    else:  # a time of both or neither: "errors began (13:10 vs 14:01)"
        pool = seen
    near = sorted(pool, key=lambda pair: pair[0])
    for at, item in near:
        if written.near(at, tolerance_s) or (undated and written.clock_near(at, tolerance_s)):
            return Judgement("grounded", item["source"], basis=item.get("basis", ""))
    held = tuple(iso(at) for at, _ in (near[:2] + near[-2:] if len(near) > 4 else near))
    if about is None:  # a time not tied to an event: no proof it is wrong
        return Judgement("unchecked", held=held, why="no event in the evidence at that time")
    what = "rollout times" if about == "rollout" else "times of errors, alerts or events"
    return Judgement("ungrounded", held=held, why=f"no {what} in the evidence within the tolerance")


def judge(
    claim: Claim, draft: str, evidence: Evidence, tolerance_s: float, revision: Claim | None
) -> Judgement:
    """One claim against the evidence, no source asked; `revision` is the revision claim a
    version or image is written with, if any."""
    if claim.kind in _NAMES_FOR:
        return _name(claim, evidence)
    if claim.kind == "time":
        return _time(claim, draft, evidence, tolerance_s)
    subject = subject_of(claim, draft, evidence.subjects())
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
) -> Judgement | None:
    """A version or image written with its revision ("revision 41 (1.41.3)") must be that
    revision's; None when the evidence does not say what the revision ran."""
    ran = [f for f in evidence.facts_of(claim.kind, subject) if f.get("revision") == revision.value]
    if not ran:
        return None
    matches = image_matches if claim.kind == "image" else operator.eq
    if found := next((f for f in ran if matches(claim.value, f["value"])), None):
        return _grounded(found)
    held = tuple(sorted({f["value"] for f in ran}))
    why = f"revision {revision.value} ran {', '.join(held)}"
    return Judgement("ungrounded", held=held, why=why)


def order_of(claim: Claim, subject: str, evidence: Evidence) -> int | None:
    """Where a version or revision stands in a Deployment's rollout history: the newest
    revision that ran it."""
    if claim.kind == "revision":
        known = evidence.values("revision", subject)
        return int(claim.value) if claim.value in known else None
    ran = [
        int(f["revision"])
        for f in evidence.facts_of("version", subject)
        if f["value"] == claim.value and f.get("revision", "").isdigit()
    ]
    return max(ran) if ran else None


def check_of(claim: Claim, judgement: Judgement, evidence: Evidence) -> ClaimCheck:
    """A claim's judgement as the state keeps it, with the citation of its source."""
    status: ClaimStatus = judgement.status or "ungrounded"
    if status == "grounded":
        detail = ""
    elif judgement.why and status == "unchecked":
        detail = judgement.why
    else:
        held = ", ".join(judgement.held[:MAX_HELD]) + " …" * (len(judgement.held) > MAX_HELD)
        parts = (judgement.why, f"the evidence holds {held}" if held else "")
        detail = "; ".join(part for part in parts if part) or f"no {claim.kind} in the evidence"
    return {
        "kind": claim.kind,
        "text": claim.text,
        "status": status,
        "source": judgement.source,
        "detail": detail,
        "basis": judgement.basis if status == "grounded" else "",
        "where": evidence.where(judgement.source) if status == "grounded" else "",
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
