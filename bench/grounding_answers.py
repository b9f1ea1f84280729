"""Answers written from a world's evidence, in the styles models write, true or with one
fact changed to a near miss of its kind.

The facts are drawn from what the real tools returned for an eval world
(bench/grounding_worlds.py): a Deployment's current and earlier releases (revision,
version, image, when it was created), its pods, their ReplicaSet and node, the alert's
start. Each is written by a template of its kind in one of several styles (prose, bullets,
a table row, code spans, mrkdwn emphasis, a heading or a timeline whose zone is stated
once), and times in one of the zones and formats people write. A *near miss* is the same
sentence with one value changed the way a model gets it wrong: one character, the
neighbouring revision, another service's version, an hour off, the right clock in the
wrong zone, a node that does not exist, a role reversed.

A `Pick` draws the choices: Hypothesis' `data.draw` in the property tests
(tests/test_grounding_properties.py), a seeded `random.Random` in `make bench-grounding`.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar
from zoneinfo import ZoneInfo

from graph.grounding.evidence import Fact, parse_iso

T = TypeVar("T")
TOLERANCE_S = 300


class Pick(Protocol):
    def choice(self, options: Sequence[T]) -> T: ...

    def integer(self, low: int, high: int) -> int: ...


class RandomPick:
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def choice(self, options: Sequence[T]) -> T:
        return options[self._rng.randrange(len(options))]

    def integer(self, low: int, high: int) -> int:
        return self._rng.randint(low, high)


# --- what a world's evidence holds -------------------------------------------------------


@dataclass(frozen=True)
class Release:
    deployment: str
    revision: int
    version: str
    image: str
    created: float | None


@dataclass
class Truth:
    namespace: str
    releases: dict[str, list[Release]] = field(default_factory=dict)  # oldest first
    pods: dict[str, list[str]] = field(default_factory=dict)  # a Deployment's running pods
    node_of: dict[str, str] = field(default_factory=dict)
    replicaset_of: dict[str, str] = field(default_factory=dict)  # the pods' ReplicaSet
    nodes: list[str] = field(default_factory=list)
    alert_start: float | None = None
    times: list[float] = field(default_factory=list)  # every event time in the evidence
    rollout_times: list[float] = field(default_factory=list)

    def deployments(self) -> list[str]:
        """Deployments with two releases or more, and pods."""
        return sorted(d for d, r in self.releases.items() if len(r) >= 2 and self.pods.get(d))

    def current(self, deployment: str) -> Release:
        return self.releases[deployment][-1]


_REVISION_SOURCE = re.compile(r"^get_rollout_history ([^/]+)/(\S+): revision (\d+)")
_POD_SOURCE = re.compile(r"^get_workload_pods ([^/]+)/(\S+): pod (\S+)$")


def truth_of(facts: Sequence[Fact], namespace: str) -> Truth:
    truth = Truth(namespace)
    revisions: dict[tuple[str, int], dict[str, str]] = {}
    for f in facts:
        if m := _REVISION_SOURCE.match(f["source"]):
            entry = revisions.setdefault((m.group(2), int(m.group(3))), {})
            if f["kind"] in ("image", "version"):
                entry[f["kind"]] = f["value"]
            if f["kind"] == "time" and f["source"].endswith(": created"):
                entry["created"] = f["value"]
        if (m := _POD_SOURCE.match(f["source"])) and f["kind"] == "node":
            pod, deployment = m.group(3), m.group(2)
            truth.pods.setdefault(deployment, []).append(pod)
            truth.node_of[pod] = f["value"]
            truth.replicaset_of[pod] = pod.rsplit("-", 1)[0]
        if f["kind"] == "time" and (at := parse_iso(f["value"])) is not None:
            truth.times.append(at)
            if f.get("pool") == "rollout":
                truth.rollout_times.append(at)
            if f["source"].startswith("alert "):
                truth.alert_start = at
        if f["kind"] == "node" and f["value"] not in truth.nodes:
            truth.nodes.append(f["value"])
    for (deployment, number), entry in sorted(revisions.items()):
        if "image" in entry and "version" in entry:
            created = parse_iso(entry["created"]) if "created" in entry else None
            release = Release(deployment, number, entry["version"], entry["image"], created)
            truth.releases.setdefault(deployment, []).append(release)
    truth.nodes.sort()
    return truth


# --- writing values --------------------------------------------------------------------

ZONES: dict[str, str] = {  # the name written -> the zone it means
    "PT": "America/Los_Angeles",
    "ET": "America/New_York",
    "CT": "America/Chicago",
    "MT": "America/Denver",
    "CET": "Europe/Berlin",
    "IST": "Asia/Kolkata",
    "JST": "Asia/Tokyo",
}
UTC_NAMES = ("UTC", "Z", "GMT", "utc")


def _zone_label(at: float, zone: str, exact: bool) -> str:
    """ "PT", or the name the zone has at that instant ("PST", "CEST") when `exact`."""
    if zone in UTC_NAMES:
        return zone
    name = datetime.fromtimestamp(at, ZoneInfo(ZONES[zone])).tzname() or zone
    return name if exact and zone not in ("IST", "JST") else zone


def local(at: float, zone: str) -> datetime:
    tz = UTC if zone in UTC_NAMES else ZoneInfo(ZONES[zone])
    return datetime.fromtimestamp(at, tz)


def clock(at: float, zone: str, style: str, dated: bool, now: float, exact: bool = False) -> str:
    """A time as people write it in `zone`, with its date when `dated` (always, in the
    ISO style)."""
    when = local(at, zone)
    label = _zone_label(at, zone, exact)
    if style == "iso":
        if zone in UTC_NAMES:
            return when.strftime("%Y-%m-%dT%H:%M:%SZ")
        return when.isoformat(timespec="seconds")
    if style == "12h":
        text = when.strftime("%I:%M %p").lstrip("0")
    elif style == "seconds":
        text = when.strftime("%H:%M:%S")
    else:
        text = when.strftime("%H:%M")
    text = f"{text}Z" if label == "Z" and style != "12h" else f"{text} {label.replace('Z', 'UTC')}"
    if not dated:
        return text
    date = when.strftime(
        {"month": "%b %-d,", "weekday": "%a %b %-d,", "day-first": "%-d %B", "iso": "%Y-%m-%d"}[
            style_date(style)
        ]
    )
    return f"{date} {text}"


def style_date(style: str) -> str:
    return {"12h": "month", "seconds": "iso", "minutes": "weekday"}.get(style, "day-first")


def one_character(value: str, pick: Pick, alphabet: str = "abcdefghjkmnpqrstvwxz23456789") -> str:
    """`value` with one of its letters or digits after the first replaced."""
    spots = [i for i, ch in enumerate(value) if ch.isalnum() and i > 0]
    at = pick.choice(spots)
    choices = [c for c in (alphabet if value[at].isalpha() else "0123456789") if c != value[at]]
    return value[:at] + pick.choice(choices) + value[at + 1 :]


def bumped(version: str, pick: Pick) -> str:
    parts = version.split(".")
    at = pick.integer(0, len(parts) - 1)
    digits = re.match(r"\d+", parts[at])
    number = int(digits.group()) if digits else 0
    parts[at] = (
        str(number + pick.choice([1, 2, 3])) + parts[at][len(digits.group()) if digits else 0 :]
    )
    return ".".join(parts)


# --- sentences of each kind ---------------------------------------------------------------


@dataclass(frozen=True)
class Sentence:
    kind: str
    true: str
    invented: str  # the same sentence with one value changed
    value: str  # the changed value, as written (it appears once in `invented`)
    also: str = ""  # a second value the change makes wrong (of two swapped)


Writer = Callable[[Pick, Truth, float], Sentence | None]


def _bold(name: str, pick: Pick) -> str:
    return pick.choice([name, f"`{name}`", f"*{name}*", f"**{name}**"])


def version_current(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    d = pick.choice(truth.deployments())
    cur = truth.current(d).version
    others = [
        r.version
        for o in truth.deployments()
        if o != d
        for r in truth.releases[o]
        if r.version not in {x.version for x in truth.releases[d]}
    ]
    wrong = pick.choice([bumped(cur, pick), *others[:3]]) if others else bumped(cur, pick)
    if wrong in {r.version for r in truth.releases[d]}:
        return None
    prefix = pick.choice(["", "v"])
    name = _bold(d, pick)
    template = pick.choice(
        [
            "{d} is running {v}.",
            "{d} runs `{v}` right now.",
            "The current version of {d} is {v}.",
            "- {d}: version {v}",
            "| {d} | {v} |",
            "{d} is on version {v}.",
        ]
    )

    def write(v: str) -> str:
        return template.format(d=name, v=prefix + v)

    return Sentence("version", write(cur), write(wrong), prefix + wrong)


def version_roles(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    d = pick.choice(truth.deployments())
    releases = truth.releases[d]
    cur, prev = releases[-1].version, releases[-2].version
    if cur == prev:
        return None
    name = _bold(d, pick)
    template, reversed_ = pick.choice(
        [
            ("{d} was upgraded from {prev} to {cur}.", "{d} was upgraded from {cur} to {prev}."),
            ("{d} went from {prev} to {cur}.", "{d} went from {cur} to {prev}."),
            (
                "The previous version of {d} was {prev}; it now runs {cur}.",
                "The previous version of {d} was {cur}; it now runs {prev}.",
            ),
            ("Roll {d} back to {prev}.", "Roll {d} back to {cur}."),
        ]
    )
    true = template.format(d=name, prev=prev, cur=cur)
    invented = reversed_.format(d=name, prev=prev, cur=cur)
    # the value whose role is wrong: the first version written in the reversed sentence
    if "back to" in template:
        first = cur
    else:
        first = cur if invented.index(cur) < invented.index(prev) else prev
    if invented.count(first) != 1:
        return None
    return Sentence("version role", true, invented, first, cur if first == prev else prev)


def revision(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    d = pick.choice(truth.deployments())
    releases = truth.releases[d]
    cur, prev = releases[-1].revision, releases[-2].revision
    existing = {r.revision for r in releases}
    name = _bold(d, pick)
    pods = len(truth.pods.get(d, []))
    style = pick.choice(["revision ", "rev ", "revision #", "r", "Revision: "])
    options: list[tuple[str, str, str]] = [
        # (template, the value changed, the changed value)
        (f"{{d}} is on {style}{{cur}}.", "cur", str(cur + 1)),
        (f"{{d}} is on {style}{{cur}}.", "cur", str(prev)),
        ("Current revision of {d}: {cur}", "cur", str(prev)),
        (f"{{d}} {style}{{cur}}, {pods} pods, was rolled out last.", "cur", str(cur + 1)),
        (f"Roll {{d}} back to {style}{{prev}}.", "prev", str(cur)),
        ("The previous revision of {d} was {prev}.", "prev", str(cur)),
        ("| {d} | revision {cur} (current) | {prev} |", "cur", str(cur + 1)),
    ]
    template, key, wrong = pick.choice(options)
    if key == "cur" and wrong == str(cur + 1) and cur + 1 in existing:
        return None
    values = {"d": name, "cur": str(cur), "prev": str(prev)}
    true = template.format(**values)
    invented = template.format(**(values | {key: wrong}))
    if invented.count(wrong) != 1 or wrong in name:
        return None
    return Sentence("revision", true, invented, wrong)


def image(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    d = pick.choice(truth.deployments())
    release = truth.current(d)
    full = release.image
    repository, _, tag = full.rpartition(":")
    short = repository.rsplit("/", 1)[-1]
    form = pick.choice(["full", "name", "tag"])
    wrong_tag = bumped(tag, pick) if re.match(r"\d", tag) else one_character(tag, pick)
    if form == "full":
        true_ref, wrong_ref = full, f"{repository}:{wrong_tag}"
    elif form == "name":
        true_ref, wrong_ref = f"{short}:{tag}", f"{short}:{wrong_tag}"
    else:
        true_ref, wrong_ref = f":{tag}", f":{wrong_tag}"
    if wrong_tag in {r.version for r in truth.releases[d]}:
        return None
    name = _bold(d, pick)
    template = pick.choice(
        [
            "{d} runs image `{ref}`.",
            "{d} (image {ref}) is the one failing.",
            "Pods of {d} run {ref}.",
            "- **Image:** `{ref}` ({d})",
        ]
    )
    if form == "tag":
        template = pick.choice(["{d} (image {ref}) is the one failing.", "{d} runs image {ref}."])
    true = template.format(d=name, ref=true_ref)
    return Sentence("image", true, template.format(d=name, ref=wrong_ref), wrong_ref)


def pod(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    d = pick.choice(truth.deployments())
    name = pick.choice(truth.pods[d])
    suffix = name.rsplit("-", 1)[1]
    short = pick.choice([True, False])
    shown = suffix if short else name
    wrong_suffix = one_character(suffix, pick)
    if any(p.endswith("-" + wrong_suffix) for p in truth.node_of):
        return None
    wrong = wrong_suffix if short else name.rsplit("-", 1)[0] + "-" + wrong_suffix
    template = pick.choice(
        [
            "Pod `{p}` restarted first.",
            "The errors come from pod {p}.",
            "- `{p}`: failing",
            "{d} pod `{p}` is the noisiest.",
        ]
    )
    if short:
        template = pick.choice(["The errors come from {d} pod `{p}`.", "Pods of {d}: `{p}` fails."])
    return Sentence(
        "pod",
        template.format(p=shown, d=d),
        template.format(p=wrong, d=d),
        wrong,
    )


def node(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    d = pick.choice(truth.deployments())
    p = pick.choice(truth.pods[d])
    where = truth.node_of[p]
    wrong = one_character(where, pick)
    if wrong in truth.nodes:
        return None
    template = pick.choice(
        [
            "{p} runs on node {n}.",
            "{p} is scheduled on {n}.",
            "- `{p}` on `{n}`",
            "| {p} | {n} |",
            "The failing pod {p} sits on {n}.",
        ]
    )
    return Sentence("node", template.format(p=p, n=where), template.format(p=p, n=wrong), wrong)


def replicaset(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    d = pick.choice(truth.deployments())
    rs = truth.replicaset_of[truth.pods[d][0]]
    wrong = rs.rsplit("-", 1)[0] + "-" + one_character(rs.rsplit("-", 1)[1], pick)
    known = set(truth.replicaset_of.values())
    if wrong in known:
        return None
    template = pick.choice(
        ["ReplicaSet `{rs}` holds the failing pods.", "The pods belong to ReplicaSet {rs}."]
    )
    return Sentence("replicaset", template.format(rs=rs), template.format(rs=wrong), wrong)


def deployment(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    d = pick.choice(truth.deployments())
    wrong = pick.choice([d + "-worker", one_character(d, pick), d + "s"])
    if wrong in truth.releases:
        return None
    template = pick.choice(
        [
            "Deployment `{d}` is the one to look at.",
            "The `{d}` deployment rolled out last.",
            "kubectl -n {ns} rollout undo deployment/{d}",
        ]
    )
    ns = truth.namespace
    return Sentence(
        "deployment", template.format(d=d, ns=ns), template.format(d=wrong, ns=ns), wrong
    )


def _far_from(at: float, times: Sequence[float]) -> bool:
    return all(abs(at - t) > TOLERANCE_S + 60 for t in times)


def rollout_time(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    d = pick.choice(truth.deployments())
    release = pick.choice(truth.releases[d])
    if release.created is None:
        return None
    at = release.created
    zone = pick.choice([*UTC_NAMES, *ZONES])
    style = pick.choice(["minutes", "seconds", "12h", "iso"])
    exact = pick.choice([True, False])
    dated = now - at > 18 * 3600 or pick.choice([True, False])
    miss = pick.choice(["hour", "zone"])
    if miss == "hour":
        wrong_at = at + pick.choice([-3600, 3600, 7200])
        wrong = clock(wrong_at, zone, style, dated, now, exact)
    else:  # the same clock, labelled as another zone's
        other = pick.choice([z for z in ("UTC", *ZONES) if z != zone])
        right = clock(at, zone, style, dated, now, exact)
        wrong = right.replace(_zone_label(at, zone, exact), _zone_label(at, other, exact))
        if style == "iso" or wrong == right:
            return None
        shift = local(at, zone).utcoffset() or timedelta(0)
        wrong_at = at + (shift - (local(at, other).utcoffset() or timedelta(0))).total_seconds()
    right = clock(at, zone, style, dated, now, exact)
    if wrong_at is not None and not _far_from(wrong_at, truth.rollout_times):
        return None
    template = pick.choice(
        [
            "Revision {rev} of {d} was rolled out at {t}.",
            "{d} {v} was deployed {on}{t}.",
            "- {t} — {d} {v} rolled out",
            "| {t} | {d} deployed {v} |",
        ]
    )
    on = "on " if dated and style != "iso" else "at "
    values = {"rev": release.revision, "d": d, "v": release.version, "on": on}
    true, invented = template.format(t=right, **values), template.format(t=wrong, **values)
    if invented == true or invented.count(wrong) != 1:
        return None
    return Sentence("time", true, invented, wrong)


def alert_time(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    if truth.alert_start is None:
        return None
    at = truth.alert_start
    zone = pick.choice([*UTC_NAMES, *ZONES])
    style = pick.choice(["minutes", "seconds", "12h"])
    wrong_at = at + pick.choice([-3600, 3600, -7200])
    if not _far_from(wrong_at, truth.times):
        return None
    dated = pick.choice([True, False])
    template = pick.choice(
        [
            "The alert fired at {t}.",
            "The HighErrorRate alert has been firing since {t}.",
            "- {t}: the alert fired",
        ]
    )
    right, wrong = clock(at, zone, style, dated, now), clock(wrong_at, zone, style, dated, now)
    return Sentence("time", template.format(t=right), template.format(t=wrong), wrong)


def _fenced(lines: list[str], language: str = "") -> str:
    return "\n".join([f"```{language}", *lines, "```"])


def pasted_kubectl(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    """kubectl's own output pasted in a code block: `get pods -o wide` or `rollout
    history`, with one pod, node, revision or version in it changed."""
    d = pick.choice(truth.deployments())
    if pick.choice(["pods", "history"]) == "pods":
        pods = sorted(truth.pods[d])[:3]
        target = pick.choice(pods)
        width = max(len(p) for p in pods) + 3
        header = f"{'NAME':<{width}}READY   STATUS    RESTARTS   AGE   IP           NODE"

        def rows(pod: str, node: str) -> list[str]:
            shown = [(pod, node) if p == target else (p, truth.node_of[p]) for p in pods]
            return [
                f"{name:<{width}}1/1     Running   {i}          {12 + i}m   10.0.{i}.17    {on}"
                for i, (name, on) in enumerate(shown)
            ]

        true_rows = rows(target, truth.node_of[target])
        if pick.choice(["pod", "node"]) == "pod":
            wrong = target.rsplit("-", 1)[0] + "-" + one_character(target.rsplit("-", 1)[1], pick)
            if wrong in truth.node_of:
                return None
            bad_rows, kind = rows(wrong, truth.node_of[target]), "pod"
        else:
            wrong = one_character(truth.node_of[target], pick)
            if wrong in truth.nodes:
                return None
            bad_rows, kind = rows(target, wrong), "node"
        command = f"$ kubectl -n {truth.namespace} get pods -o wide"
        true = _fenced([command, header, *true_rows])
        return Sentence(kind, true, _fenced([command, header, *bad_rows]), wrong)
    releases = truth.releases[d][-4:]
    existing = {r.revision for r in truth.releases[d]}
    changed = pick.choice(releases)

    def history(revision: int, version: str) -> str:
        lines = [
            f"$ kubectl -n {truth.namespace} rollout history deployment/{d}",
            f"deployment.apps/{d}",
            "REVISION  CHANGE-CAUSE",
        ]
        for r in releases:
            shown, cause = (revision, version) if r is changed else (r.revision, r.version)
            lines.append(f"{shown:<10}deploy {cause}")
        return _fenced(lines)

    if pick.choice(["revision", "version"]) == "revision":
        wrong_revision = max(existing) + pick.integer(1, 5)
        invented = history(wrong_revision, changed.version)
        return Sentence(
            "revision", history(changed.revision, changed.version), invented, str(wrong_revision)
        )
    wrong_version = bumped(changed.version, pick)
    if wrong_version in {r.version for r in truth.releases[d]}:
        return None
    invented = history(changed.revision, wrong_version)
    return Sentence("version", history(changed.revision, changed.version), invented, wrong_version)


def pasted_json(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    """A trace's resource or a Deployment's state pasted as JSON, one value changed."""
    d = pick.choice(truth.deployments())
    target = pick.choice(truth.pods[d])
    current = truth.current(d)
    values = {
        "service.name": d,
        "service.version": current.version,
        "k8s.deployment.name": d,
        "k8s.pod.name": target,
        "k8s.node.name": truth.node_of[target],
    }
    key = pick.choice(["service.version", "k8s.pod.name", "k8s.node.name"])
    if key == "service.version":
        wrong, kind = bumped(current.version, pick), "version"
        if wrong in {r.version for r in truth.releases[d]}:
            return None
    elif key == "k8s.pod.name":
        wrong, kind = (
            target.rsplit("-", 1)[0] + "-" + one_character(target.rsplit("-", 1)[1], pick),
            "pod",
        )
        if wrong in truth.node_of:
            return None
    else:
        wrong, kind = one_character(truth.node_of[target], pick), "node"
        if wrong in truth.nodes:
            return None
    pretty = pick.choice([True, False])

    def dump(shown: dict[str, str]) -> str:
        text = json.dumps({"resource": shown}, indent=2 if pretty else None)
        return _fenced(text.split("\n"), "json")

    return Sentence(kind, dump(values), dump(values | {key: wrong}), wrong)


def structured(pick: Pick, truth: Truth, now: float) -> Sentence | None:
    """A block of the answer's own: a rollout table with a Revision column (introduced by
    a line naming the Deployment, or not) or "Key: value" lines, one value changed."""
    d = pick.choice(truth.deployments())
    releases = [r for r in truth.releases[d][-3:] if r.created is not None]
    if len(releases) < 2:
        return None
    cur, target = releases[-1], pick.choice(releases)
    pod_name = pick.choice(truth.pods[d])
    if pick.choice(["table", "keys"]) == "table":
        intro = pick.choice(["", f"Rollout history of `{d}`:\n\n", f"**{d}**\n"])

        def table(revision: int, tag: str, at: float) -> str:
            rows = []
            for r in releases:
                repository, own_tag = r.image.rsplit(":", 1)
                shown = (revision, tag, at) if r is target else (r.revision, own_tag, r.created)
                rows.append(
                    f"| {shown[0]} | `{repository}:{shown[1]}` | {_utc_minute(shown[2] or 0)} |"
                )
            return (
                intro + "| Revision | Image | Deployed (UTC) |\n|---|---|---|\n" + "\n".join(rows)
            )

        tag = target.image.rsplit(":", 1)[1]
        true = table(target.revision, tag, target.created or 0)
        what = pick.choice(["revision", "image", "time"])
        if what == "revision":
            wrong = str(max(r.revision for r in truth.releases[d]) + pick.integer(1, 5))
            invented = table(int(wrong), tag, target.created or 0)
        elif what == "image":
            wrong = bumped(tag, pick) if re.match(r"\d", tag) else one_character(tag, pick)
            if wrong in {r.image.rsplit(":", 1)[1] for r in truth.releases[d]}:
                return None
            invented = table(target.revision, wrong, target.created or 0)
        else:
            at = (target.created or 0) + pick.choice([-7200, 3600, 7200])
            if not _far_from(at, truth.rollout_times):
                return None
            wrong, invented = _utc_minute(at), table(target.revision, tag, at)
        kind = "image" if what == "image" else what
        return Sentence(kind, true, invented, wrong)
    values = {
        "Deployment": d,
        "Revision": str(cur.revision),
        "Image": f"`{cur.image}`",
        "Pod": f"`{pod_name}`",
        "Node": truth.node_of[pod_name],
    }
    key = pick.choice(["Revision", "Image", "Node"])
    if key == "Revision":
        wrong = str(max(r.revision for r in truth.releases[d]) + pick.integer(1, 5))
        changed, kind = wrong, "revision"
    elif key == "Image":
        tag = cur.image.rsplit(":", 1)[1]
        bad = bumped(tag, pick) if re.match(r"\d", tag) else one_character(tag, pick)
        if bad in {r.image.rsplit(":", 1)[1] for r in truth.releases[d]}:
            return None
        wrong = cur.image.rsplit(":", 1)[0] + ":" + bad
        changed, kind = f"`{wrong}`", "image"
    else:
        wrong = one_character(truth.node_of[pod_name], pick)
        if wrong in truth.nodes:
            return None
        changed, kind = wrong, "node"
    bold = pick.choice([True, False])

    def lines(shown: dict[str, str]) -> str:
        return "\n".join(f"**{k}:** {v}" if bold else f"{k}: {v}" for k, v in shown.items())

    return Sentence(kind, lines(values), lines(values | {key: changed}), wrong)


def _utc_minute(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M")


WRITERS: dict[str, Writer] = {
    "version": version_current,
    "version role": version_roles,
    "revision": revision,
    "image": image,
    "pod": pod,
    "node": node,
    "replicaset": replicaset,
    "deployment": deployment,
    "time": rollout_time,
    "alert time": alert_time,
    "pasted kubectl": pasted_kubectl,
    "pasted json": pasted_json,
    "table or keys": structured,
}


def sentence(pick: Pick, truth: Truth, now: float, kind: str | None = None) -> Sentence | None:
    writer = WRITERS[kind] if kind else pick.choice(list(WRITERS.values()))
    return writer(pick, truth, now)


# --- whole answers ------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    true: str
    invented: str
    value: str  # the invented value, as written in `invented`
    kind: str
    also: str = ""


def answer(pick: Pick, truth: Truth, now: float, kind: str | None = None) -> Answer | None:
    """An answer of 1-4 true sentences, and the same answer with the first sentence's value
    changed (the sentence of `kind`, if given)."""
    first = sentence(pick, truth, now, kind)
    if first is None:
        return None
    rest = [s for _ in range(pick.integer(0, 3)) if (s := sentence(pick, truth, now))]
    order = [first, *rest]
    at = pick.integer(0, len(order) - 1)
    order[0], order[at] = order[at], order[0]
    layout = pick.choice(LAYOUTS)
    true = _layout_named(layout, [s.true for s in order])
    invented = _layout_named(layout, [s.invented if s is first else s.true for s in order])
    if invented.count(first.value) != 1:
        return None
    return Answer(true, invented, first.value, first.kind, first.also)


LAYOUTS = ("prose", "bullets", "heading", "numbered")


def _layout_named(layout: str, lines: list[str]) -> str:
    pasted = [line for line in lines if "\n" in line]  # blocks, kept whole after the text
    table = [line for line in lines if line.startswith("|") and line not in pasted]
    rest = [line for line in lines if not line.startswith("|") and line not in pasted]
    if layout == "prose":
        body = " ".join(
            line.lstrip("- ") + ("" if line.rstrip()[-1:] in ".!?" else ".") for line in rest
        )
    elif layout == "bullets":
        body = "\n".join(line if line.startswith("- ") else f"- {line}" for line in rest)
    elif layout == "numbered":
        body = "\n".join(f"{i}. {line.lstrip('- ')}" for i, line in enumerate(rest, 1))
    else:
        body = "*What I found*\n" + "\n".join(rest)
    if table:
        body += "\n\n| what | value | more |\n|---|---|---|\n" + "\n".join(table)
    for block in pasted:
        body += "\n\n" + block
    return body.strip()
