"""Claim extraction: the fact-identifiers a draft states, by kind. Deterministic, no model.

A *claim* is a value an engineer could act on: a Kubernetes name (namespace, Deployment,
ReplicaSet, pod, node), a service name as traces name it, a container image, a version, a
rollout revision, or the time of an event. Trace IDs have their own guard; counts and
percentages are not claims (out of scope: a "12 of 14" is not checked).

Answers are read the way models write them (Markdown, Slack mrkdwn, code spans, links,
lists, tables): link targets, URLs, mentions and trace IDs are masked before anything is
read, emphasis and code marks are read as spaces, and positions stay those of the draft,
so a claim can be cut or marked where it stands.

How names are recognised, since prose gives no types:
- by shape: a pod's `<replicaset>-<5>` and a ReplicaSet's `<deployment>-<pod-template-hash>`
  suffixes (a hash with a digit in it), an image reference with a tag or digest;
- by a kind word next to them: "deployment payment-api", "the payment-api deployment",
  `deployment/payment-api`, "pod postgres-0", "namespace shop", "node gke-pool-1-ab12";
  a plain word *before* a kind word ("the payment service") is loose talk, not a name, and
  is not a claim;
- by an attribute: `k8s.pod.name=…`, `service.version: …`, `namespace=…`;
- by a code span holding one name-like token with a hyphen or a digit (`` `orders-api` ``).
Versions are `1.42.0`-shaped (three parts, with an optional `-rc1`/`+build.7` suffix) or
`v`-prefixed (`v2.3`); two-part numbers without a `v` are read as numbers.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from graph.grounding.times import ZONES
from graph.sentences import sentence_spans
from graph.trace_ids import TRACE_ID_PATTERN

ClaimKind = Literal[
    "pod",
    "replicaset",
    "deployment",
    "service",
    "workload",  # a name whose kind the text does not say (a code span)
    "namespace",
    "node",
    "image",
    "version",
    "revision",
    "time",
]
Role = Literal["current", "previous"]


@dataclass(frozen=True)
class Claim:
    kind: ClaimKind
    value: str  # normalised: lower case; a version without its "v"; a time as written
    text: str  # as the draft writes it
    start: int
    end: int
    sentence: tuple[int, int]  # the sentence it stands in (the unit removed)
    role: Role | None = None  # revisions and versions: "current revision 42"
    namespace: str | None = None  # from a `namespace/name` form


# --- masking --------------------------------------------------------------------------

MAX_CLAIMS = 200  # claims judged in one draft; more are left unchecked (the answer says so)
_SLACK_LINK = re.compile(r"<([^<>|\s]+)\|([^<>]*)>|<([@#!][^<>]*|[a-z]+:[^<>\s]*)>")
_MD_LINK = re.compile(r"\[([^\[\]\n]*)\]\(([^()\[\]\s]*)\)")
_URL = re.compile(r"\b(?:https?|ftp)://[^\s<>|)\]]+")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_EMPHASIS = re.compile(r"[*~`]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_CELL = "\x1f"  # a table's pipe, read as a boundary no pattern crosses (not as a space)


def _blank(chars: list[str], start: int, end: int) -> None:
    for i in range(start, end):
        if chars[i] != "\n":
            chars[i] = " "


def _scan(draft: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The draft, same length, with what is not prose blanked; where code spans' contents are."""
    chars = list(draft)
    for match in _SLACK_LINK.finditer(draft):
        if match.group(1) is not None:  # <url|label>: the label is read, the url is not
            _blank(chars, match.start(), match.start(2))
            _blank(chars, match.end() - 1, match.end())
        else:
            _blank(chars, match.start(), match.end())
    for match in _MD_LINK.finditer(draft):
        _blank(chars, match.start(), match.start() + 1)
        _blank(chars, match.end(1), match.end())
    text = "".join(chars)
    for pattern in (_URL, TRACE_ID_PATTERN):
        for match in pattern.finditer(text):
            _blank(chars, match.start(), match.end())
    text = "".join(chars)
    code = tuple((m.start(1), m.end(1)) for m in _CODE_SPAN.finditer(text))
    for match in _EMPHASIS.finditer(text):
        chars[match.start()] = " "
    return "".join(chars).replace("|", _CELL), code


# --- patterns -------------------------------------------------------------------------

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DOTTED = r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?"
_NOT_IN_NAME_BEFORE = r"(?<![\w./:@-])"
_NOT_IN_NAME_AFTER = r"(?![\w/@-]|\.\w)"

_SUFFIX = r"(?:-[0-9a-z](?:[0-9a-z.-]{0,40}[0-9a-z])?)?(?:\+[0-9a-z](?:[0-9a-z.-]{0,40}[0-9a-z])?)?"
_VERSION_BODY = rf"\d++\.\d++\.\d++{_SUFFIX}|v\d++(?:\.\d++)++{_SUFFIX}"
_IMAGE = re.compile(
    _NOT_IN_NAME_BEFORE
    + r"((?:[a-z0-9][a-z0-9.-]{0,252}(?::\d+)?/){0,8}[a-z0-9][a-z0-9._-]{0,254})"
    + r"(?::([a-z0-9_](?:[a-z0-9_.-]{0,126}[a-z0-9_])?))?(@sha256:[0-9a-f]{7,64})?"
    + _NOT_IN_NAME_AFTER,
    re.IGNORECASE,
)
# Zones as models write them: upper case ("PT", "CEST"), or "utc"/"gmt" in any case.
_ZONE = (
    rf"(?:(?-i:{'|'.join(sorted((z.upper() for z in ZONES), key=len, reverse=True))})"
    r"|(?i:utc|gmt))"
)
_SHIFT = r"[+-]\d{1,2}(?::?\d{2})?"
_ISO_TIME = re.compile(
    r"(?<![\w:.-])(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.\d{1,9})?"
    rf"(\s?{_ZONE}(?:{_SHIFT})?\b|[+-]\d{{2}}:?\d{{2}})?(?!\w|:\d)",
    re.ASCII,
)
_CLOCK = re.compile(
    r"(?<![\w:.-])([01]?\d|2[0-3]):([0-5]\d)(?::([0-5]\d)(?:\.\d{1,9})?)?(?:\s?(?i:[ap]\.?m\b\.?))?"
    rf"(?:\s?({_ZONE})(?:{_SHIFT})?\b|\s?([+-]\d{{2}}:?\d{{2}}))?"
    r"(?!\w|[:.]\d)",
    re.ASCII,
)
# A number followed by one of these counts something: "revision 11, 3 pods" lists no
# revision 3.
_COUNTED = (
    r"(?![ \t]*+(?:pods?|replicas?|containers?|restarts?|nodes?|instances?|errors?|requests?"
    r"|traces?|spans?|calls?|lines?|events?|times|minutes?|mins?|hours?|hrs?|h|days?|seconds?"
    r"|secs?|s|ms|percent|%|x)\b)"
)
_REVISION = re.compile(
    r"(?:\b(?:revisions?|revs?\.?)(?:[ \t]++(?:is|was|number|no\.)|[ \t]++(?:of|for)[ \t]++"
    r"[\w`*.-]{1,63}(?=[ \t]*+[:=])|[ \t]++(?:of|for)[ \t]++[\w`*.-]{1,63}[ \t]++(?:is|was))?"
    r"[\"']?[ \t]*+[#:=]?[ \t]*+[\"']?"  # JSON and YAML: "revision": 11, revision: "11"
    r"|(?<![\w.-])(?-i:r)(?=\d)"
    r"|\b(?:roll(?:ed|ing)?[ \t]+(?:[\w`*-]+[ \t]+)?back|rollback|revert(?:ed|ing)?)[ \t]++"
    r"(?:[\w`*-]+[ \t]++){0,2}?(?:from|to)[ \t]++(?=\d++(?![.,]\d)" + _COUNTED + r"))(\d++)"
    r"(?![.,]\d)(?![\w-]|\.\w)"
    r"((?:[ \t]*+(?:,|and\b|or\b|to\b|->|→|–|-)[ \t]*+(?:rev(?:ision)?[ \t]*+)?#?\d++\b"
    rf"(?![.,]\d){_COUNTED})*+)",
    re.IGNORECASE,
)
# (after a name's "@" too: "payment-api@1.42.0"; never a digest's "@sha256:")
_VERSION = re.compile(rf"(?:(?<![\w.:/@-])|(?<=\w@))({_VERSION_BODY})(?![.]?\w|-\w)", re.IGNORECASE)
_CUE_VERSION = re.compile(
    rf"\b(?:version|release|build)[ \t]++(v?\d++(?:\.\d++)*+{_SUFFIX})(?![.]?\w)", re.IGNORECASE
)
_POD_SHAPE = re.compile(
    _NOT_IN_NAME_BEFORE + rf"({_LABEL}-([a-z0-9]{{6,10}})-[a-z0-9]{{5}})" + _NOT_IN_NAME_AFTER
)
_RS_SHAPE = re.compile(_NOT_IN_NAME_BEFORE + rf"({_LABEL}-([a-z0-9]{{8,10}}))" + _NOT_IN_NAME_AFTER)
_CUES: dict[str, ClaimKind] = {
    **dict.fromkeys(("deployment", "deployments", "deploy", "deployment.apps"), "deployment"),
    **dict.fromkeys(("service", "services", "svc"), "service"),
    **dict.fromkeys(("pod", "pods", "po"), "pod"),
    **dict.fromkeys(("replicaset", "replicasets", "rs"), "replicaset"),
    **dict.fromkeys(("namespace", "namespaces", "ns"), "namespace"),
    **dict.fromkeys(("node", "nodes"), "node"),
}
_CUE_WORDS = "|".join(sorted((re.escape(c) for c in _CUES), key=len, reverse=True))
# "deployment/payment-api", "pod/payment-api-…", "ns/shop"
_KIND_SLASH = re.compile(rf"(?<![\w/.-])({_CUE_WORDS})/({_DOTTED})(?![\w/-])", re.IGNORECASE)
# "deployment payment-api", "namespace: shop", "pods payment-api-… and …"
_CUE_BEFORE = re.compile(
    rf"(?<![\w.-])({_CUE_WORDS})\b[ \t]*+:?[ \t]*+({_DOTTED})(?:/({_LABEL}))?(?![\w/-])",
    re.IGNORECASE,
)
# "the payment-api deployment": only a name with a hyphen or a digit counts
_CUE_AFTER = re.compile(rf"(?<![\w./:@-])({_DOTTED})[ \t]++({_CUE_WORDS})(?![\w/-])", re.IGNORECASE)
# Workload attributes on a span's resource, and the kind of fact each is.
RESOURCE_KINDS: dict[str, ClaimKind] = {
    "service.name": "service",
    "service.version": "version",
    "k8s.namespace.name": "namespace",
    "k8s.deployment.name": "deployment",
    "k8s.replicaset.name": "replicaset",
    "k8s.pod.name": "pod",
    "k8s.node.name": "node",
    "container.image.name": "image",
}
_ATTRIBUTES: dict[str, ClaimKind] = {
    **RESOURCE_KINDS,
    "pod": "pod",
    "deployment": "deployment",
    "namespace": "namespace",
    "node": "node",
    "service": "service",
    "version": "version",
    "image": "image",
}
_ATTRIBUTE = re.compile(
    r"(?<![\w.])("
    + "|".join(re.escape(a) for a in sorted(_ATTRIBUTES, key=len, reverse=True))
    + r")[ \t]*+(==|=|:)[ \t]*+\"?([A-Za-z0-9][\w.:/@+-]{0,250}[A-Za-z0-9])\"?"
)
_CODE_NAME = re.compile(rf"\s*+({_DOTTED})\s*+")


# Words that follow a kind word without being a name ("service is down", "pods fail").
def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NOT_NAMES = _words(
    """
    a an the this that these those its it their each every all any some no one two three
    is was are were be been being has had have and or but to of in on at for from with by
    as is that which who where when while than then also only still already now not never
    name names named called level levels restarts restart restarted logs log version
    versions revision revisions image images owner owners label labels selector status
    errors error latency latencies account accounts mesh side map spec template crashed
    crashing failed failing healthy unhealthy ready running pending terminated returned
    returns calls called took takes started starts rolled rolling scaled scaling went goes
    shows showed hit hits did does do got gets fail fails throw throws belong belongs
    serve serves problem problems dashboard dashboards issue issues rollout rollouts
    history lines side here there first last next same other another itself refuses refuse
    answers answer respond responds stays stay keeps keep looks look seems seem needs
    """
)
_ROLE_WORDS: dict[str, Role] = {
    **dict.fromkeys(
        ("current", "currently", "now", "latest", "new", "newest", "running"), "current"
    ),
    **dict.fromkeys(("previous", "prior", "earlier", "older", "old", "last-good"), "previous"),
}
_ROLE_AFTER = re.compile(r"\s*\(\s*(current|previous)\b", re.IGNORECASE)
_BACK_TO = re.compile(r"\b(?:back|undo|revert(?:ing)?|return(?:ing)?)\s+to\s*(?:the\s+)?$", re.I)
# "payment-api is on revision 41", "runs 1.40.2", "is at v1.42.0": the present state
_IS_ON = re.compile(
    r"\b(?:is|are|runs?|running|now)\s+(?:on|at)?\s*(?:the\s+)?(?:revision|rev|version|image)?"
    r"[\s#:]*$",
    re.I,
)
# "revision 41 is the current one", "1.40.2 right now", "revision 41 (the previous one)"
_ROLE_LATER = re.compile(
    r"\s+(?:is|was)\s+(?:the\s+)?(current|latest|previous|prior)\b|\s+(right\s+now|currently)\b",
    re.I,
)


_ROLE_BREAK = re.compile(r"[;:.!?\n\x1f]|\s[-–—]\s")


# "the previous version of cart was 5.1.0", "current revision for cart: 11"
_ROLE_OF = re.compile(
    r"\b(current|latest|new|newest|previous|prior|earlier|older|old|last-good)[\s*_`]+"
    r"(?:version|revision|rev|release|image|tag|build)[\s*_`]+(?:of|for)[\s*_`]+[\w.-]+"
    r"[\s*_`]*+(?:is|was|:|=)[\s*_`#]*+$",
    re.IGNORECASE,
)


def _role(scan: str, start: int, end: int) -> Role | None:
    if of := _ROLE_OF.search(scan, max(0, start - 100), start):
        return _ROLE_WORDS[of.group(1).lower()]
    after = _ROLE_AFTER.match(scan, end) or _ROLE_LATER.match(scan, end)
    if after:
        return _ROLE_WORDS[(after.group(1) or "current").lower()]
    before = _ROLE_BREAK.split(scan[max(0, start - 40) : start])[-1]  # this clause only
    if _BACK_TO.search(before):
        return "previous"
    if _IS_ON.search(before):
        return "current"
    words = re.findall(r"[a-z-]+", before.lower())[-3:]
    return next((_ROLE_WORDS[word] for word in reversed(words) if word in _ROLE_WORDS), None)


def _plain_word(name: str) -> bool:
    return not re.search(r"[-\d.]", name)


# Kinds whose real names always carry a hyphen, a digit or a dot (generated suffixes, cloud
# node names): a plain word next to their kind word is prose ("pods fail", "node problem").
_SHAPED_KINDS = frozenset({"pod", "replicaset", "node"})


def _plain_name(kind: ClaimKind, name: str, cue: str) -> bool:
    """Whether a plain word after a kind word names something: "namespace shop", "service
    checkout" do; "deployment moved", "deploy lines up", "services refuse" do not."""
    word = name.lower()
    if kind == "pod" and POD_SUFFIX.fullmatch(word) and cue.lower().startswith("pod"):
        return True  # "pod h4kzp"
    if kind in _SHAPED_KINDS or word in _NOT_NAMES:
        return False
    if re.search(r"(?:ed|ing|ly)$", word):  # a verb or an adverb: "rolled", "serving"
        return False
    # after a plural kind word comes a verb ("pods belong", "services refuse"), a list of
    # names has its own pass; "namespaces shop and ..." is read as a list too
    return kind == "namespace" or not cue.lower().endswith("s")


def _name_claim(name: str) -> bool:
    name = name.lower()
    return not (name in _NOT_NAMES or name in _CUES or len(name) < 2 or name.isdigit())


class _Collector:
    """Claims in order, none overlapping another (the first pattern to take a span keeps it)."""

    def __init__(self, draft: str) -> None:
        self.draft = draft
        self.scan, self.code = _scan(draft)
        self.sentences = sentence_spans(draft)
        self.taken: list[tuple[int, int]] = []
        self.claims: list[Claim] = []

    def free(self, start: int, end: int) -> bool:
        """No claim taken yet overlaps [start, end) (taken spans are kept sorted)."""
        at = bisect.bisect_left(self.taken, (start, end))
        before = self.taken[at - 1] if at else None
        after = self.taken[at] if at < len(self.taken) else None
        return (before is None or before[1] <= start) and (after is None or after[0] >= end)

    def add(
        self,
        kind: ClaimKind,
        start: int,
        end: int,
        value: str | None = None,
        *,
        role: Role | None = None,
        namespace: str | None = None,
    ) -> None:
        if start >= end or not self.free(start, end):
            return
        text = self.draft[start:end]
        bisect.insort(self.taken, (start, end))
        at = bisect.bisect_right(self.sentences, (start, 1 << 62)) - 1  # the sentence it is in
        inside = at >= 0 and self.sentences[at][0] <= start < self.sentences[at][1]
        self.claims.append(
            Claim(
                kind=kind,
                value=normalise(kind, value if value is not None else text),
                text=text,
                start=start,
                end=end,
                sentence=self.sentences[at] if inside else (start, start),
                role=role,
                namespace=namespace.lower() if namespace else None,
            )
        )

    def in_code(self, start: int, end: int) -> bool:
        return any(s <= start and end <= e for s, e in self.code)


def image_parts(reference: str) -> tuple[str, str, str]:
    """(repository, tag, digest) of `registry/app:1.42.0`, `app:1.42.0`, `:1.42.0`,
    `app@sha256:…`; a port in the registry host (`host:5000/app`) is not a tag."""
    reference, _, digest = reference.partition("@")
    repository, sep, tag = reference.rpartition(":")
    if not sep or "/" in tag:
        repository, tag = reference, ""
    return repository, tag, digest


def normalise(kind: ClaimKind | str, value: str) -> str:
    """A value as it is compared: names in lower case (Kubernetes names are); a version
    without its "v" and an image's tag in the case written (tags and semver pre-release
    and build parts are case-sensitive)."""
    value = value.strip().strip("\"'`")
    if kind == "version":
        return value[1:] if value[:1] in "vV" and value[1:2].isdigit() else value
    if kind == "image":
        repository, tag, digest = image_parts(value)
        return (
            repository.lower()
            + (f":{tag}" if tag else "")
            + (f"@{digest.lower()}" if digest else "")
        )
    return value.lower()


def _images(c: _Collector) -> None:
    for m in _IMAGE.finditer(c.scan):
        repository, tag, digest = m.group(1), m.group(2), m.group(3)
        if not (tag or digest) or not re.search(r"[a-z]", repository, re.I):
            continue
        versioned = tag is not None and re.fullmatch(r"v?\d+(?:[._-]\w+)*", tag, re.I)
        if digest or ("/" in repository and tag) or versioned:
            c.add("image", m.start(), m.end())


def _attributes(c: _Collector) -> None:
    for m in _ATTRIBUTE.finditer(c.scan):
        key, separator, value = m.group(1).lower(), m.group(2), m.group(3)
        kind = _ATTRIBUTES[key]
        # "version: the ..." is a label in prose; "service=checkout" and "pod: a-1" are not
        if "." not in key and separator == ":" and not re.search(r"[-\d]", value):
            continue
        if kind == "version" and not re.match(r"v?\d", value, re.I):
            continue
        if kind not in ("version", "image") and not _name_claim(value):
            continue
        tag_alone = "/" not in value and ":" not in value  # "image :42"
        if kind == "image" and separator == ":" and c.scan[m.start(2) - 1].isspace() and tag_alone:
            c.add("image", m.start(2), m.end(3), ":" + value)
            continue
        c.add(kind, m.start(3), m.end(3))


def _times(c: _Collector) -> None:
    for pattern in (_ISO_TIME, _CLOCK):
        for m in pattern.finditer(c.scan):
            c.add("time", m.start(), m.end())


# `kubectl rollout history` pasted: a REVISION column, each row's number a revision
_HISTORY_HEADER = re.compile(r"^[ \t]*+REVISION[ \t]++CHANGE-CAUSE[ \t]*+$", re.MULTILINE)
_HISTORY_ROW = re.compile(r"[ \t]*+(\d++)(?:[ \t][^\n]*+)?(?:\n|$)")


# A Markdown table: its header row, the separator under it, and its body rows (in the
# scanned text a table's bars are \x1f, a clause break).
_TABLE = re.compile(
    r"^[ \t]*+(\x1f[^\n]*\x1f)[ \t]*+\n[ \t]*+\x1f[ \t:\x1f-]*-[ \t:\x1f-]*\x1f[ \t]*+\n"
    r"((?:[ \t]*+\x1f[^\n]*(?:\n|$))*)",
    re.MULTILINE,
)
_REVISION_HEADER = re.compile(r"[\s*_`]*(?:revisions?|rev)(?:\s*(?:#|no\.?|number))?[\s*_`]*", re.I)
_CELL_NUMBER = re.compile(r"[\s*_`]*#?(\d++)[\s*_`]*(?:\([^)|]*\))?[\s*_`]*")


def _cells(row: str, at: int) -> list[tuple[int, str]]:
    """A table row's cells with where each starts (`at`: where the row starts)."""
    cells, start = [], row.index("\x1f") + 1
    for part in row[start:].split("\x1f")[:-1]:
        cells.append((at + start, part))
        start += len(part) + 1
    return cells


def _table_revisions(c: _Collector) -> None:
    """The numbers in a table's Revision column ("| Revision | Image |")."""
    for table in _TABLE.finditer(c.scan):
        header = _cells(table.group(1), table.start(1))
        columns = [i for i, (_, cell) in enumerate(header) if _REVISION_HEADER.fullmatch(cell)]
        if not columns:
            continue
        at = table.start(2)
        for row in table.group(2).splitlines(keepends=True):
            cells = _cells(row, at) if row.count("\x1f") >= 2 else []
            for i in columns:
                if i < len(cells) and (m := _CELL_NUMBER.fullmatch(cells[i][1])):
                    start = cells[i][0] + m.start(1)
                    role = _role(c.scan, start, start + len(m.group(1)))
                    c.add("revision", start, start + len(m.group(1)), role=role)
            at += len(row)


def _revisions(c: _Collector) -> None:
    for header in _HISTORY_HEADER.finditer(c.scan):
        at = header.end() + 1
        while row := _HISTORY_ROW.match(c.scan, at):
            c.add("revision", row.start(1), row.end(1))
            at = row.end()
    for m in _REVISION.finditer(c.scan):
        c.add("revision", m.start(1), m.end(1), role=_role(c.scan, m.start(), m.end(1)))
        for more in re.finditer(r"\d+", m.group(2) or ""):
            c.add("revision", m.start(2) + more.start(), m.start(2) + more.end())


def _versions(c: _Collector) -> None:
    for m in _CUE_VERSION.finditer(c.scan):
        value = m.group(1)
        if "." in value or value.lower().startswith("v"):
            c.add("version", m.start(1), m.end(1), role=_role(c.scan, m.start(), m.end()))
    for m in _VERSION.finditer(c.scan):
        c.add("version", m.start(1), m.end(1), role=_role(c.scan, m.start(), m.end()))


def _shaped(c: _Collector) -> None:
    for m in _POD_SHAPE.finditer(c.scan):
        if re.search(r"\d", m.group(2)) or _cued(c.scan, m.start(), m.end(), "pod"):
            c.add("pod", m.start(1), m.end(1))
    for m in _RS_SHAPE.finditer(c.scan):
        suffix = m.group(2)
        hashed = re.search(r"\d", suffix) and re.search(r"[a-z]", suffix)
        if _cued(c.scan, m.start(), m.end(), "pod"):  # "pod payment-api-7c9f8d6b5"
            c.add("pod", m.start(1), m.end(1))
        elif hashed or _cued(c.scan, m.start(), m.end(), "replicaset"):
            c.add("replicaset", m.start(1), m.end(1))


def _cued(scan: str, start: int, end: int, kind: ClaimKind) -> bool:
    before = re.findall(r"[\w.]+", scan[max(0, start - 20) : start].lower())[-1:]
    after = re.findall(r"[\w.]+", scan[end : end + 20].lower())[:1]
    return any(_CUES.get(w) == kind for w in before + after)


_LIST_ITEM = re.compile(rf"[ \t]*+(?:,|and\b|or\b|&)[ \t]*+({_DOTTED})(?![\w/-])", re.IGNORECASE)


def _cue_names(c: _Collector) -> None:
    for m in _KIND_SLASH.finditer(c.scan):
        c.add(_CUES[m.group(1).lower()], m.start(2), m.end(2))
    # A name before a kind word ("the `shop` namespace"); a plain word outside a code span is
    # none ("the payment service": loose talk, not a name).
    before = [
        m
        for m in _CUE_AFTER.finditer(c.scan)
        if _name_claim(m.group(1)) and (not _plain_word(m.group(1)) or c.in_code(*m.span(1)))
    ]
    # "the `shop` namespace: checkout, ...": a kind word with its name before it names no
    # other after it
    named_before = {m.start(2) for m in before}
    for m in _CUE_BEFORE.finditer(c.scan):
        if m.start(1) in named_before:
            continue
        kind = _CUES[m.group(1).lower()]
        name, second = m.group(2), m.group(3)
        if second and kind == "deployment":  # "deployment shop/payment-api"
            c.add("namespace", m.start(2), m.end(2))
            c.add("deployment", m.start(3), m.end(3), namespace=name)
        elif _name_claim(name) and (
            not _plain_word(name)
            or c.in_code(m.start(2), m.end(2))
            or _plain_name(kind, name, m.group(1))
        ):
            c.add(kind, m.start(2), m.end(2))
        # a list after a plural kind word: "pods a-1, b-2 and c-3"
        listed = m.group(1).lower().endswith("s") and not second
        position = m.end(2)
        while listed and (item := _LIST_ITEM.match(c.scan, position)):
            if _plain_word(item.group(1)) or not _name_claim(item.group(1)):
                break
            c.add(kind, item.start(1), item.end(1))
            position = item.end()
    for m in before:
        kind = _CUES[m.group(2).lower()]
        # "payment-api pods": a workload's pods; a pod's own name has a suffix
        if kind not in ("pod", "replicaset") or re.search(r"-\d+$", m.group(1)):
            c.add(kind, m.start(1), m.end(1))


# The alphabet of the random suffix Kubernetes gives a ReplicaSet's pods (no vowels, no
# 0, 1 or 3): "h4kzp" in "pods `h4kzp` and `w9t2r`" is a pod's suffix.
POD_SUFFIX = re.compile(r"[bcdfghjklmnpqrstvwxz2456789]{5}")


def _code_names(c: _Collector) -> None:
    for start, end in c.code:
        m = _CODE_NAME.fullmatch(c.scan, start, end)
        if m and POD_SUFFIX.fullmatch(m.group(1)):
            c.add("pod", m.start(1), m.end(1))
        elif m and re.search(r"[-\d]", m.group(1)) and re.search(r"[a-z]", m.group(1)):
            name = m.group(1)
            if name.count(".") and not re.search(r"-", name):
                continue  # `service.name`, `http.status_code`: attribute keys, not names
            c.add("workload", m.start(1), m.end(1))


_LOOKALIKE = re.compile(r"(?<![\w.-])[\w.\u2010\u2011-]*[\w][\w.\u2010\u2011-]*")
_ASCII_NAME = re.compile(r"[a-z]", re.ASCII)  # a name has a Latin letter; "2–5" is a range


def _lookalikes(c: _Collector) -> None:
    """A name written with a letter of another script or a typographic hyphen (a Cyrillic
    letter for a Latin one in a pod's suffix, U+2010 or U+2011 for "-") reads as a real name and is
    none: it is a claim, and no evidence (all ASCII) grounds it."""
    for m in _LOOKALIKE.finditer(c.scan):
        token = m.group()
        if token.isascii() or not _ASCII_NAME.search(token):
            continue
        odd = [ch for ch in token if not ch.isascii()]
        if all(ch.isalpha() or ch in "\u2010\u2011" for ch in odd) and (
            "-" in token or any(ch in "\u2010\u2011" for ch in odd)
        ):
            c.add("workload", m.start(), m.end())


# Order matters: a span is the first pattern's (an ISO time keeps its date from the images,
# an image its tag from the versions, a pod its name from the code-span names).
_PASSES = (
    _times,
    _images,
    _attributes,
    _table_revisions,
    _revisions,
    _versions,
    _shaped,
    _cue_names,
    _code_names,
    _lookalikes,
)


def node_family(name: str) -> tuple[str, int, str]:
    """What the names of a cluster's nodes share: the first word, the number of parts and
    the domain ("node-a1": node, 2, ""; "ip-10-0-1-23.ec2.internal": ip, 5, ec2.internal)."""
    host, _, domain = name.partition(".")
    parts = host.split("-")
    return parts[0], len(parts), domain


_HOST = re.compile(
    r"(?<![\w./:@-])([a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:\.[a-z0-9-]+)*)(?![\w/@-]|\.\w)"
)


def _bare_nodes(c: _Collector, nodes: Sequence[str]) -> None:
    """Node names written alone ("sits on node-a1", "| node-b2 |"): a name shaped like the
    nodes the evidence knows (the same first word, parts and domain, with a digit)."""
    families = {node_family(n) for n in nodes}
    if not families:
        return
    for m in _HOST.finditer(c.scan):
        name = m.group(1)
        if (name in nodes or re.search(r"\d", name)) and node_family(name) in families:
            c.add("node", m.start(1), m.end(1))


MAX_NEAR = 400  # tokens compared with the known names in one draft


def _distance_at_most(a: str, b: str, limit: int) -> bool:
    """Whether `a` and `b` are within `limit` edits (Levenshtein, banded)."""
    if abs(len(a) - len(b)) > limit:
        return False
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
        if min(current) > limit:
            return False
        previous = current
    return previous[-1] <= limit


_TOKEN = re.compile(r"(?<![\w./:@-])([a-z0-9][a-z0-9.-]*[a-z0-9])(?![\w/@-]|\.\w)")


def _extends(a: str, b: str) -> bool:
    """One name is the other with a part added: `postgres-0` of `postgres`, `cart-v2`."""
    short, long = sorted((a, b), key=len)
    return long.startswith(short) and long[len(short) : len(short) + 1] in ("-", ".")


def _near_known(c: _Collector, known: Mapping[ClaimKind, Sequence[str]]) -> None:
    """A name one or two characters off a name the evidence knows ("nore-b1" beside
    node-b1, a pod suffix `jpepk` beside `jpnpk`): the near miss a model writes when it
    misremembers. It is a claim of that name's kind, so it is checked and not passed over."""
    by_length: dict[int, list[tuple[str, ClaimKind]]] = {}
    for kind, names in known.items():
        for name in names:
            by_length.setdefault(len(name), []).append((name, kind))
    seen = 0
    for m in _TOKEN.finditer(c.scan):
        token = m.group(1)
        coded = c.in_code(m.start(1), m.end(1))
        if len(token) < 4 or not (coded or re.search(r"[-\d]", token)) or token.isdigit():
            continue
        if not c.free(m.start(1), m.end(1)):
            continue
        seen += 1
        if seen > MAX_NEAR:
            return
        limit = 1 if len(token) < 12 else 2
        for size in range(len(token) - limit, len(token) + limit + 1):
            match = next(
                (
                    kind
                    for name, kind in by_length.get(size, [])
                    if name != token
                    and not _extends(token, name)
                    and _distance_at_most(token, name, limit)
                ),
                None,
            )
            if match is not None:
                c.add(match, m.start(1), m.end(1))
                break


def find_claims(draft: str, known: Mapping[ClaimKind, Sequence[str]] | None = None) -> list[Claim]:
    """Every fact-identifier `draft` states, in order of position. `known` holds the names
    the evidence knows by kind: a bare name shaped like its nodes is read as a node's, and
    a name a character or two off a known one as a claim of that kind."""
    collector = _Collector(draft)
    for extract in _PASSES:
        extract(collector)
    if known:
        _bare_nodes(collector, known.get("node", ()))
        _near_known(collector, known)
    return sorted(collector.claims, key=lambda claim: claim.start)
