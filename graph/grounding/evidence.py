"""Evidence: what the thread has seen, as facts indexed by kind.

A fact is one value a source showed — a pod name from a trace's `k8s.pod.name`, a version
from `service.version` or an image tag, a revision and its creation time from the rollout
history — with the source that showed it, so each grounded claim can be cited. Tools hand
their facts over beside their text (LangChain's content-and-artifact tools); the `tools`
node keeps them in the state's `evidence`, small values rather than whole tool outputs, for
the life of the thread (history compaction never loses them). The thread's context and the
question add what people and alerts said.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NotRequired, TypedDict, cast

from graph.grounding.claims import RESOURCE_KINDS as RESOURCE_KINDS  # the Tempo tool's
from graph.grounding.claims import find_claims, image_parts, normalise

MAX_FACTS = 3000  # a thread's evidence, newest kept
MAX_TIMES_PER_SOURCE = 60  # timestamps one tool result contributes (a trace's spans)
MAX_NAMES_PER_TEXT = 40  # name-like tokens one text contributes

ROLLOUT = "rollout"  # the pool of a revision's creation time
TEXT = "text"  # the basis of a fact read out of free text
QUESTION_TIME = "the time of the question"  # when it was asked: no event of the incident
CITE = "cite"  # the kind of a citation: where a tool call's facts can be seen again


class Fact(TypedDict):
    kind: str  # a claim kind (graph/grounding/claims.py)
    value: str  # normalised as claims are
    source: str  # where it was seen: "get_trace 4bf9…: k8s.pod.name"
    subject: NotRequired[str]  # the service or Deployment a version/revision/image is of
    role: NotRequired[str]  # "current": the Deployment's current revision / its images
    pool: NotRequired[str]  # times: "rollout" for a revision's creation
    revision: NotRequired[str]  # images and versions: the revision that ran them
    # "text": only written in text people or workloads wrote (a message, a log line, an
    # event's message) -- weaker than a record (a span's resource, the rollout history)
    basis: NotRequired[str]
    where: NotRequired[str]  # a citation (kind CITE): the link or command that shows it


def fact(kind: str, value: str, source: str, **extra: str) -> Fact:
    made = {"kind": kind, "value": normalise(kind, value), "source": source}
    if extra.get("subject"):
        made["subject"] = extra["subject"].lower()
    made |= {key: extra[key] for key in ("role", "pool", "revision", "basis") if extra.get(key)}
    return cast(Fact, made)


def citation(source: str, where: str) -> Fact:
    """Where the facts of `source` (a tool call, "get_trace 4bf9…") can be seen again: a
    Grafana Explore link, or the kubectl command that shows the same."""
    return {"kind": CITE, "value": source.lower(), "source": source, "where": where}


def source_call(source: str) -> str:
    """The tool call a fact's source names: "get_trace 4bf9…" of "get_trace 4bf9…: k8s.pod.name"."""
    return source.partition(": ")[0]


def merge_evidence(left: list[Fact] | None, right: list[Fact] | None) -> list[Fact]:
    """The state's reducer: new facts appended once each, the newest MAX_FACTS kept."""
    merged = list(left or [])
    seen = {_identity(f) for f in merged}
    for item in right or []:
        if _identity(item) not in seen:
            seen.add(_identity(item))
            merged.append(item)
    return merged[-MAX_FACTS:]


def _identity(item: Fact) -> tuple[str, ...]:
    return (
        item["kind"],
        item["value"],
        item.get("subject", ""),
        item.get("role", ""),
        item.get("revision", ""),
        item.get("basis", ""),
    )


def iso(ns_or_s: float) -> str:
    seconds = ns_or_s / 1e9 if ns_or_s > 1e12 else ns_or_s
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str) -> float | None:
    try:
        at = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError:
        return None
    return at.timestamp() if at.tzinfo else at.replace(tzinfo=UTC).timestamp()


def image_facts(
    image: str, source: str, subject: str, role: str = "", revision: str = ""
) -> list[Fact]:
    """The image, and its tag (not the port of `host:5000/app`) as a version."""
    made = [fact("image", image, source, subject=subject, role=role, revision=revision)]
    if tag := image_parts(image)[1]:
        made.append(fact("version", tag, source, subject=subject, role=role, revision=revision))
    return made


# A name as an answer writes it in a code span: a token with a hyphen or a digit and a
# letter, like `new-pricing-engine` or `PricingEngineV2` (see claims.py, _code_names).
_NAME_TOKEN = re.compile(r"(?<![\w.\-/])(?=[\w.\-]*[a-zA-Z])(?=[\w.\-]*[\-\d])[a-zA-Z][\w.\-]*\w")


def text_facts(text: str, source: str) -> list[Fact]:
    """What a person, an alert or an error message stated: every claim found in the text,
    and every name-like token in it (one an answer may quote in a code span, of a kind
    the text does not say: a feature flag, a host, a job), as a fact."""
    facts = [fact(c.kind, c.value, source, basis=TEXT) for c in find_claims(text)]
    named = dict.fromkeys(m.group() for m in _NAME_TOKEN.finditer(text))
    tokens = list(named)[:MAX_NAMES_PER_TEXT]
    return facts + [fact("name", token, source, basis=TEXT) for token in tokens]


def times_from(values: Iterable[float], source: str) -> list[Fact]:
    """Timestamps as facts, at most MAX_TIMES_PER_SOURCE, spread over the range."""
    ordered = sorted(set(int(v / 1e9) if v > 1e12 else int(v) for v in values))
    if len(ordered) > MAX_TIMES_PER_SOURCE:
        step = len(ordered) / MAX_TIMES_PER_SOURCE
        ordered = [ordered[int(i * step)] for i in range(MAX_TIMES_PER_SOURCE)] + [ordered[-1]]
    return [fact("time", iso(t), source) for t in ordered]


@dataclass
class Evidence:
    """The facts of a thread, indexed for the grounding check."""

    facts: Sequence[Fact]
    _by_kind: dict[str, dict[str, list[Fact]]] = field(init=False, default_factory=dict)
    _subjects: frozenset[str] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.add(self.facts)

    def add(self, more: Iterable[Fact]) -> None:
        self._subjects = None
        for item in more:
            self._by_kind.setdefault(item["kind"], {}).setdefault(item["value"], []).append(item)

    def find(self, kinds: Iterable[str], value: str, subject: str | None = None) -> Fact | None:
        """The first fact of one of `kinds` with `value` (and, if given, of `subject`): a
        record before a value only read in free text."""
        written: Fact | None = None
        for kind in kinds:
            for item in self._by_kind.get(kind, {}).get(value, []):
                if subject is None or item.get("subject", "") == subject:
                    if item.get("basis") != TEXT:
                        return item
                    written = written or item
        return written

    def where(self, source: str) -> str:
        """The link or command that shows what `source` saw ("" when none is known)."""
        cited = self._by_kind.get(CITE, {}).get(source_call(source).lower())
        return cited[0].get("where", "") if cited else ""

    def values(self, kind: str, subject: str | None = None, role: str | None = None) -> list[str]:
        """The values of `kind`; given a `subject`, those of it (in `role`, if given)."""
        if subject is None:
            return list(self._by_kind.get(kind, {}))
        facts = self.facts_of(kind, subject)
        return list(dict.fromkeys(f["value"] for f in facts if role in (None, f.get("role"))))

    def facts_of(self, kind: str, subject: str | None) -> list[Fact]:
        """Every fact of `kind` (of `subject`, if given)."""
        return [
            item
            for items in self._by_kind.get(kind, {}).values()
            for item in items
            if subject is None or item.get("subject") == subject
        ]

    def subjects(self) -> frozenset[str]:
        """Services and Deployments: what versions, revisions and images are of."""
        if self._subjects is None:
            named = set(self.values("service")) | set(self.values("deployment"))
            for kind in ("version", "revision", "image"):
                for items in self._by_kind.get(kind, {}).values():
                    named.update(i["subject"] for i in items if i.get("subject"))
            self._subjects = frozenset(named)
        return self._subjects

    def times(
        self, pool: str | None = None, subject: str | None = None
    ) -> list[tuple[float, Fact]]:
        """Timestamps (of one pool, and of one subject, if given) with a fact for each."""
        out = []
        for value, items in self._by_kind.get("time", {}).items():
            at = parse_iso(value)
            if at is None:
                continue
            for item in items:
                if (pool is None or item.get("pool", "") == pool) and (
                    subject is None or item.get("subject") == subject
                ):
                    out.append((at, item))
                    break
        return out
