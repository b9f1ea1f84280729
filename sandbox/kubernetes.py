"""A Kubernetes API simulator: Deployments, their ReplicaSets, the scale subresource; pods,
their logs and events (core/v1, read only).

Enough of apps/v1 for kubectl-style rollbacks and scaling through a real client:
- GET/PATCH deployments (JSON Patch, merge patch, strategic merge treated as merge patch),
  GET/PATCH/PUT `deployments/<name>/scale` (autoscaling/v1 Scale);
- GET replicasets with `labelSelector` (equality terms);
- `dryRun=All` validates and answers as if stored, but stores nothing;
- every stored write bumps `metadata.resourceVersion`; a patch carrying a stale
  resourceVersion (or a failing JSON Patch `test`) is 409 Conflict;
- a template change behaves like the deployment controller: the ReplicaSet with that
  template (ignoring `pod-template-hash`) becomes the newest revision, or a new one is made;
- a spec change starts a rollout: `metadata.generation` is bumped, and the new pods become
  available `rollout_delay_s` later (never, with `faults.pods_never_available`, and then the
  `Progressing` condition turns `ProgressDeadlineExceeded` after `progressDeadlineSeconds`);
- injectable faults: latency, a status for matching requests (403, 500, ...), requests held
  unanswered and unapplied, and stored writes followed by a dropped connection or a late
  answer — what a real API server under trouble does.

Read only, as the API server answers them (core/v1):
- GET pods with `labelSelector` (equality terms) and `fieldSelector` (`metadata.name`,
  `metadata.namespace`, `spec.nodeName`, `status.phase`; any other field is 400 "field label
  not supported"), `limit` with a `continue` token; GET one pod (404 when missing);
- GET `pods/<name>/log`: `container` (400 when a pod of several containers gets none, or
  one it lacks), `previous` (a Go boolean; 400 when the container never terminated),
  `tailLines` (the last N lines), then `limitBytes` (the first N bytes of what is left, a
  cut line and all); plain text, never JSON;
- GET events with `fieldSelector` on `involvedObject.{kind,name,namespace,uid}`, `reason`,
  `type`, `metadata.name` (`=`, `==`, `!=`), `limit`; events written like the kubelet's
  (core/v1, `eventTime` null).

`writes` lists every stored (not dry-run) change, so tests can count executions;
`requests` lists every request as it arrives, so tests can wait for one.

With `rules` (a Role's `rules`, as data), requests are authorized like the API server's RBAC
does for a ServiceAccount bound to that Role by a RoleBinding in each namespace of
`role_bindings` (None: each namespace that holds a Deployment): anything no rule grants, and
anything in a namespace without the binding, is 403 Forbidden; `rbac_used` collects each
(apiGroup, resource, verb) that was granted. With `accounts` (bearer token → ServiceAccount
name and its Role's rules), each request is authorized as the account its token names, and
a token that names none is 401 Unauthorized, as the API server's authenticator answers;
`rbac_used_by` collects what each account was granted, `calls_by` how many calls it made.

The deployment controller observes a new generation a step after the write, as the real
one does: until `observe_after_s` has passed, `status.observedGeneration` (in the write's
answer and in reads) is the previous generation, so a rollout check must wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

from sandbox.server import SimulatorServer

REVISION = "deployment.kubernetes.io/revision"
HASH_LABEL = "pod-template-hash"
_APPS = "/apis/apps/v1/namespaces/{ns}"
_CORE = "/api/v1/namespaces/{ns}"
_POD_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of generated name suffixes
# Go's strconv.ParseBool, which the API server parses boolean query parameters with.
_BOOLS = {v: True for v in ("1", "t", "T", "TRUE", "true", "True")} | {
    v: False for v in ("0", "f", "F", "FALSE", "false", "False")
}
POD_FIELDS = ("metadata.name", "metadata.namespace", "spec.nodeName", "status.phase")
EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.name",
    "involvedObject.namespace",
    "involvedObject.uid",
    "metadata.name",
    "metadata.namespace",
    "reason",
    "type",
)


@dataclass
class KubeFaults:
    latency_s: float = 0.0
    status: int | None = None  # answer matching requests with this status
    status_times: int = 0  # > 0: only the next this many matching requests (a blip)
    methods: tuple[str, ...] = ("GET", "PATCH", "PUT")
    path_contains: str = ""
    hang: tuple[str, ...] = ()  # these methods are held unanswered, and nothing is applied
    # After a write is stored: "drop" closes the connection without an answer; "late"
    # answers only after `late_s` (past any client timeout).
    after_write: Literal["", "drop", "late"] = ""
    late_s: float = 3600.0
    pods_never_available: bool = False  # a rollout's new pods never become available
    # The next `slow_writes` PATCH/PUT requests wait `slow_write_s` before the server looks
    # at them (a write in flight: sent, not yet applied).
    slow_writes: int = 0
    slow_write_s: float = 0.0


@dataclass
class KubeWrite:
    method: str
    path: str
    content_type: str
    body: Any


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return web.json_response(body, status=code)


def template_hash(template: dict[str, Any]) -> str:
    stripped = copy.deepcopy(template)
    stripped.get("metadata", {}).get("labels", {}).pop(HASH_LABEL, None)
    return hashlib.sha256(json.dumps(stripped, sort_keys=True).encode()).hexdigest()[:10]


def _without_hash(template: dict[str, Any]) -> dict[str, Any]:
    stripped = copy.deepcopy(template)
    stripped.get("metadata", {}).get("labels", {}).pop(HASH_LABEL, None)
    return stripped


def _revision(obj: dict[str, Any]) -> int:
    """The controller's reading: a missing or unparsable revision counts as 0."""
    try:
        return int((obj["metadata"].get("annotations") or {}).get(REVISION, 0))
    except ValueError:
        return 0


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class PatchConflict(Exception):
    pass


def json_patch(document: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 for add/replace/remove/test on object paths."""
    doc = copy.deepcopy(document)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for part in parts[:-1]:
            parent = parent.setdefault(part, {})
        last = parts[-1]
        kind = op["op"]
        if kind == "test":
            if parent.get(last) != op["value"]:
                raise PatchConflict(f"test failed at {op['path']}")
        elif kind in ("add", "replace"):
            if kind == "replace" and last not in parent:
                raise ValueError(f"replace: {op['path']} does not exist")
            parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            if last not in parent:
                raise ValueError(f"remove: {op['path']} does not exist")
            del parent[last]
        else:
            raise ValueError(f"unsupported JSON Patch op {kind!r}")
    return doc


def pod_name(replicaset: str, index: int) -> str:
    """The name `add_pods` gives a ReplicaSet's `index`-th pod (stable, like a hash suffix)."""
    digest = hashlib.sha256(f"{replicaset}/{index}".encode()).digest()
    return f"{replicaset}-" + "".join(_POD_SUFFIX[b % len(_POD_SUFFIX)] for b in digest[:5])


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _field(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


class SelectorError(ValueError):
    pass


def parse_selector(raw: str, fields: tuple[str, ...] | None = None) -> list[tuple[str, str, bool]]:
    """`a=b,c!=d` as (key, value, equal) terms. With `fields`, a field selector: keys other
    than those are refused as the API server refuses them."""
    terms = []
    for term in filter(None, (t.strip() for t in raw.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            equal = False
        elif "=" in term:
            key, value = term.replace("==", "=", 1).split("=", 1)
            equal = True
        else:
            raise SelectorError(f"unable to parse requirement: {term!r}: only =, == and != here")
        key = key.strip()
        if fields is not None and key not in fields:
            raise SelectorError(f"field label not supported: {key}")
        terms.append((key, value.strip(), equal))
    return terms


def _selected(terms: list[tuple[str, str, bool]], get: Any) -> bool:
    return all((get(k) == v) == equal for k, v, equal in terms)


def _page(request: web.Request, items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """`limit` and `continue` as the API server pages a list (the token is an offset here)."""
    start = int(request.query.get("continue") or 0)
    limit = int(request.query.get("limit") or 0)
    if limit <= 0:
        return items[start:], ""
    end = start + limit
    return items[start:end], (str(end) if end < len(items) else "")


def write_kubeconfig(path: Path, server: str, token: str = "sandbox-token") -> Path:
    """A kubeconfig whose only cluster is `server` (e.g. a simulator's URL), as the holder of
    `token` (a ServiceAccount's, when the simulator has `accounts`)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sim", "cluster": {"server": server}}],
        "users": [{"name": "sim", "user": {"token": token}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim"}}],
        "current-context": "sim",
    }
    path.write_text(json.dumps(config))
    return path


@dataclass
class _Rollout:
    started: float  # time.monotonic()
    old_available: int  # pods of the previous spec that keep serving meanwhile
    new_template: bool


@dataclass
class KubernetesSimulator(SimulatorServer):
    faults: KubeFaults = field(default_factory=KubeFaults)
    writes: list[KubeWrite] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path) on arrival
    rollout_delay_s: float = 0.0  # how long a rollout's new pods take to become available
    rules: list[dict[str, Any]] | None = None  # a Role's rules; None: everything is allowed
    rbac_used: set[tuple[str, str, str]] = field(default_factory=set)
    accounts: dict[str, tuple[str, list[dict[str, Any]]]] = field(default_factory=dict)
    rbac_used_by: dict[str, set[tuple[str, str, str]]] = field(default_factory=dict)
    calls_by: dict[str, int] = field(default_factory=dict)
    log_queries: list[dict[str, str]] = field(default_factory=list)  # of each log request
    role_bindings: set[str] | None = None  # namespaces bound to the Role; None: with Deployments
    observe_after_s: float = 0.05  # until then, a write's new generation is not yet observed

    def __post_init__(self) -> None:
        super().__init__()
        self.deployments: dict[tuple[str, str], dict[str, Any]] = {}
        self.replicasets: dict[tuple[str, str], dict[str, Any]] = {}
        self._versions = itertools.count(1000)
        self._rollouts: dict[tuple[str, str], _Rollout] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        # (namespace, pod, container, previous) -> the log text
        self.logs: dict[tuple[str, str, str, bool], str] = {}
        self._unobserved: dict[tuple[str, str], tuple[float, int]] = {}  # -> (when, previous)

    # --- fixtures -------------------------------------------------------------------
    def _bump(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))

    def add_deployment(
        self,
        namespace: str,
        name: str,
        images: list[str],
        replicas: int = 3,
        paused: bool = False,
        change_causes: list[str] | None = None,
        first_revision: int = 1,
        spacing_h: float = 1.0,
        envs: list[dict[str, str]] | None = None,
        now: float | None = None,
        created_at: list[float] | None = None,
    ) -> dict[str, Any]:
        """A Deployment whose revisions `first_revision`.. ran `images` (with environment
        `envs`, if given) in order, `spacing_h` hours apart, the last (current) one
        `spacing_h` hours before `now` (default: the wall clock's) — or each created at its
        `created_at` (Unix seconds), when given."""
        uid = str(uuid.uuid4())
        labels = {"app": name}
        causes = change_causes or [f"deploy {image.rsplit(':', 1)[-1]}" for image in images]
        step_s = 3600 * spacing_h
        start = (time.time() if now is None else now) - step_s * len(images)
        last = first_revision + len(images) - 1
        for revision, (image, cause, env) in enumerate(
            zip(images, causes, envs or [{}] * len(images), strict=True), start=first_revision
        ):
            container: dict[str, Any] = {"name": name, "image": image}
            if env:
                container["env"] = [{"name": k, "value": v} for k, v in env.items()]
            template: dict[str, Any] = {
                "metadata": {"labels": dict(labels)},
                "spec": {"containers": [container]},
            }
            pod_hash = template_hash(template)
            template["metadata"]["labels"][HASH_LABEL] = pod_hash
            at = start + step_s * (revision - first_revision)
            if created_at is not None:
                at = created_at[revision - first_revision]
            created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
            rs: dict[str, Any] = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{name}-{pod_hash}",
                    "namespace": namespace,
                    "uid": str(uuid.uuid4()),
                    "labels": {**labels, HASH_LABEL: pod_hash},
                    "annotations": {
                        REVISION: str(revision),
                        "kubernetes.io/change-cause": cause,
                        "deployment.kubernetes.io/desired-replicas": str(replicas),
                    },
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": name,
                            "uid": uid,
                            "controller": True,
                        }
                    ],
                    "creationTimestamp": created,
                },
                "spec": {
                    "replicas": replicas if revision == last else 0,
                    "selector": {"matchLabels": {**labels, HASH_LABEL: pod_hash}},
                    "template": template,
                },
                "status": {"replicas": replicas if revision == last else 0},
            }
            self._bump(rs)
            self.replicasets[(namespace, rs["metadata"]["name"])] = rs
        current = self._current_rs(namespace, uid)
        deployment: dict[str, Any] = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid,
                "generation": last,
                "labels": dict(labels),
                "annotations": {
                    REVISION: str(last),
                    "kubernetes.io/change-cause": causes[-1],
                },
                "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)),
            },
            "spec": {
                "replicas": replicas,
                "paused": paused,
                "progressDeadlineSeconds": 600,
                "selector": {"matchLabels": dict(labels)},
                "template": _without_hash(current["spec"]["template"]),
            },
            "status": {},
        }
        self._settle(deployment)
        self._bump(deployment)
        self.deployments[(namespace, name)] = deployment
        return deployment

    def add_pods(
        self,
        namespace: str,
        deployment: str,
        count: int | None = None,
        *,
        nodes: tuple[str, ...] = ("node-a1", "node-b2"),
        age_s: float = 3600.0,
        now: float | None = None,
    ) -> list[dict[str, Any]]:
        """Running, ready pods of the Deployment's current ReplicaSet (its replicas, unless
        `count`), spread over `nodes`, started `age_s` before `now`."""
        found = self.deployments[(namespace, deployment)]
        rs = self._current_rs(namespace, found["metadata"]["uid"])
        template = rs["spec"]["template"]
        started = _utc((time.time() if now is None else now) - age_s)
        made = []
        for i in range(found["spec"]["replicas"] if count is None else count):
            name = pod_name(rs["metadata"]["name"], i)
            digest = hashlib.sha256(name.encode()).digest()
            containers = copy.deepcopy(template["spec"]["containers"])
            pod: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": str(uuid.uuid4()),
                    "labels": dict(template["metadata"]["labels"]),
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": rs["metadata"]["name"],
                            "uid": rs["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                    "creationTimestamp": started,
                },
                "spec": {"nodeName": nodes[i % len(nodes)], "containers": containers},
                "status": {
                    "phase": "Running",
                    "startTime": started,
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [
                        {
                            "name": c["name"],
                            "image": c["image"],
                            "imageID": c["image"].split(":")[0]
                            + "@sha256:"
                            + hashlib.sha256(c["image"].encode()).hexdigest(),
                            "containerID": f"containerd://{digest.hex()}",
                            "ready": True,
                            "restartCount": 0,
                            "state": {"running": {"startedAt": started}},
                            "lastState": {},
                        }
                        for c in containers
                    ],
                },
            }
            self._bump(pod)
            self.pods[(namespace, name)] = pod
            made.append(pod)
        return made

    def crash_loop(
        self,
        namespace: str,
        pod: str,
        *,
        reason: str = "OOMKilled",
        exit_code: int = 137,
        restarts: int = 5,
        finished: float | None = None,
        container: str | None = None,
    ) -> None:
        """The pod's container (the first, unless named) keeps dying: its last run ended
        with `reason`/`exit_code` at `finished`, and it waits in CrashLoopBackOff."""
        found = self.pods[(namespace, pod)]
        status = next(
            s
            for s in found["status"]["containerStatuses"]
            if container is None or s["name"] == container
        )
        end = time.time() if finished is None else finished
        status.update(
            ready=False,
            restartCount=restarts,
            state={
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off 5m0s restarting failed container={status['name']} "
                    f"pod={pod}_{namespace}({found['metadata']['uid']})",
                }
            },
            lastState={
                "terminated": {
                    "reason": reason,
                    "exitCode": exit_code,
                    "startedAt": _utc(end - 40),
                    "finishedAt": _utc(end),
                }
            },
        )
        found["status"]["conditions"] = [
            {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}
        ]
        self._bump(found)

    def not_ready(self, namespace: str, pod: str, reason: str = "NodeNotReady") -> None:
        """The pod is no longer ready though its containers did not die: the node
        controller marks it so when the pod's node stops reporting (NotReady)."""
        found = self.pods[(namespace, pod)]
        found["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": reason}]
        for status in found["status"]["containerStatuses"]:
            status["ready"] = False
        self._bump(found)

    def add_event(
        self,
        namespace: str,
        kind: str,
        name: str,
        reason: str,
        message: str,
        *,
        type: str = "Normal",
        count: int = 1,
        first: float | None = None,
        last: float | None = None,
        component: str = "kubelet",
    ) -> dict[str, Any]:
        """A core/v1 Event about `kind`/`name`, as the kubelet or a controller writes it."""
        at = time.time() if last is None else last
        event: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{name}.{uuid.uuid4().hex[:16]}",
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
            },
            "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
            "reason": reason,
            "message": message,
            "type": type,
            "count": count,
            "firstTimestamp": _utc(at if first is None else first),
            "lastTimestamp": _utc(at),
            "eventTime": None,
            "source": {"component": component},
        }
        self._bump(event)
        self.events.append(event)
        return event

    def set_log(
        self, namespace: str, pod: str, text: str, container: str = "", previous: bool = False
    ) -> None:
        """The log of the pod's container (the first, unless named); `previous`: of the
        container that ran before its last restart."""
        name = container or self.pods[(namespace, pod)]["spec"]["containers"][0]["name"]
        self.logs[(namespace, pod, name, previous)] = text

    def _owned(self, namespace: str, uid: str) -> list[dict[str, Any]]:
        return [
            rs
            for (ns, _), rs in self.replicasets.items()
            if ns == namespace
            and any(o.get("uid") == uid for o in rs["metadata"].get("ownerReferences", []))
        ]

    def _current_rs(self, namespace: str, uid: str) -> dict[str, Any]:
        return max(
            self._owned(namespace, uid),
            key=_revision,
        )

    def _settle(self, deployment: dict[str, Any]) -> None:
        replicas = deployment["spec"]["replicas"]
        deployment["status"] = {
            "observedGeneration": deployment["metadata"]["generation"],
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            ],
        }

    def _progress(self, deployment: dict[str, Any]) -> None:
        """The deployment controller's view of a rollout in flight, as of now."""
        key = (deployment["metadata"]["namespace"], deployment["metadata"]["name"])
        rollout = self._rollouts.get(key)
        if rollout is None:
            return
        elapsed = time.monotonic() - rollout.started
        if not self.faults.pods_never_available and elapsed >= self.rollout_delay_s:
            del self._rollouts[key]
            self._settle(deployment)
            return
        replicas = deployment["spec"]["replicas"]
        # Old pods keep serving until new ones are available (a surge-style rolling update).
        serving = min(rollout.old_available, replicas)
        old_pods = rollout.old_available if rollout.new_template else 0
        deadline = deployment["spec"].get("progressDeadlineSeconds", 600)
        progressing = (
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
            if elapsed >= deadline
            else {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}
        )
        deployment["status"] = {
            "observedGeneration": deployment["metadata"]["generation"],
            "replicas": replicas + old_pods,
            "updatedReplicas": replicas,
            "readyReplicas": serving,
            "availableReplicas": serving,
            "conditions": [progressing],
        }

    def _observe(self, deployment: dict[str, Any]) -> None:
        """The controller has not observed the latest write yet: the previous generation."""
        key = (deployment["metadata"]["namespace"], deployment["metadata"]["name"])
        lag = self._unobserved.get(key)
        if lag is None:
            return
        observed = lag[1]
        if time.monotonic() >= lag[0]:
            del self._unobserved[key]
            observed = deployment["metadata"]["generation"]
        deployment["status"] = {**deployment.get("status", {}), "observedGeneration": observed}

    def _roll(self, after: dict[str, Any]) -> None:
        """What the deployment controller does when the pod template changes."""
        namespace, uid = after["metadata"]["namespace"], after["metadata"]["uid"]
        owned = self._owned(namespace, uid)
        top = max(_revision(rs) for rs in owned)
        wanted = _without_hash(after["spec"]["template"])
        match = next((rs for rs in owned if _without_hash(rs["spec"]["template"]) == wanted), None)
        if match is None:
            pod_hash = template_hash(wanted)
            template = copy.deepcopy(wanted)
            template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = pod_hash
            match = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{after['metadata']['name']}-{pod_hash}",
                    "namespace": namespace,
                    "uid": str(uuid.uuid4()),
                    "labels": dict(template["metadata"]["labels"]),
                    "annotations": {},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": after["metadata"]["name"],
                            "uid": uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": dict(template["metadata"]["labels"])},
                    "template": template,
                },
                "status": {"replicas": 0},
            }
            self.replicasets[(namespace, match["metadata"]["name"])] = match
        for rs in owned:
            rs["spec"]["replicas"] = 0
            rs["status"]["replicas"] = 0
            self._bump(rs)
        match["metadata"].setdefault("annotations", {})[REVISION] = str(top + 1)
        match["spec"]["replicas"] = after["spec"]["replicas"]
        match["status"]["replicas"] = after["spec"]["replicas"]
        self._bump(match)
        after["metadata"].setdefault("annotations", {})[REVISION] = str(top + 1)

    # --- HTTP -----------------------------------------------------------------------
    def routes(self, app: web.Application) -> None:
        app.middlewares.append(self._middleware)
        base = _APPS
        app.router.add_get(base + "/deployments/{name}", self._get_deployment)
        app.router.add_patch(base + "/deployments/{name}", self._patch_deployment)
        app.router.add_get(base + "/deployments/{name}/scale", self._get_scale)
        app.router.add_patch(base + "/deployments/{name}/scale", self._patch_scale)
        app.router.add_put(base + "/deployments/{name}/scale", self._put_scale)
        app.router.add_get(base + "/replicasets", self._list_replicasets)
        core = _CORE
        app.router.add_get(core + "/pods", self._list_pods)
        app.router.add_get(core + "/pods/{name}", self._get_pod)
        app.router.add_get(core + "/pods/{name}/log", self._pod_log)
        app.router.add_get(core + "/events", self._list_events)

    def _authorize(self, request: web.Request) -> web.Response | None:
        """The RBAC authorizer: None when a rule grants the request, else 403 (401 for a
        token no account holds)."""
        account = "tracegate"
        rules = self.rules
        if self.accounts:
            token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if token not in self.accounts:
                return _status(401, "Unauthorized", "Unauthorized")
            account, rules = self.accounts[token]
            self.calls_by[account] = self.calls_by.get(account, 0) + 1
        if rules is None:
            return None
        # /apis/<group>/<version>/namespaces/<ns>/<resource>[/<name>[/<subresource>]], or
        # /api/v1/namespaces/... for the core group ("")
        parts = request.path.strip("/").split("/")
        if parts[0] == "api":
            parts = ["apis", "", *parts[1:]]
        group, namespace, resource = parts[1], parts[4], parts[5]
        name = parts[6] if len(parts) > 6 else ""
        if len(parts) > 7:
            resource = f"{resource}/{parts[7]}"
        verb = {"GET": "get" if name else "list", "PATCH": "patch", "PUT": "update"}.get(
            request.method, request.method.lower()
        )
        bound = self.role_bindings
        if bound is None:
            bound = {ns for ns, _ in self.deployments}
        for rule in rules if namespace in bound else []:
            if (
                group in rule.get("apiGroups", [])
                and resource in rule.get("resources", [])
                and verb in rule.get("verbs", [])
            ):
                self.rbac_used.add((group, resource, verb))
                self.rbac_used_by.setdefault(account, set()).add((group, resource, verb))
                return None
        kind = resource.split("/")[0] + (f".{group}" if group else "")
        return _status(
            403,
            "Forbidden",
            f'{kind} "{name}" is forbidden: User "system:serviceaccount:tracegate:'
            f'{account}" cannot {verb} resource "{resource}" in API group "{group}" in the '
            f'namespace "{namespace}"',
        )

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        forbidden = self._authorize(request)
        if forbidden is not None:
            return forbidden
        if request.method in self.faults.hang:
            await self.stopping.wait()
            return _status(503, "ServiceUnavailable", "simulator stopping")
        if self.faults.latency_s:
            await asyncio.sleep(self.faults.latency_s)
        fault = self.faults
        if fault.slow_writes and request.method in ("PATCH", "PUT"):
            fault.slow_writes -= 1
            await asyncio.sleep(fault.slow_write_s)
        if (
            fault.status is not None
            and request.method in fault.methods
            and fault.path_contains in request.path
        ):
            reason = {403: "Forbidden", 404: "NotFound", 409: "Conflict"}.get(
                fault.status, "InternalError"
            )
            injected = fault.status
            if fault.status_times > 0:
                fault.status_times -= 1
                if fault.status_times == 0:
                    fault.status = None  # the blip is over
            return _status(injected, reason, f"injected {injected} for {request.path}")
        if "dryRun" in request.query and request.query["dryRun"] != "All":
            return _status(
                400, "BadRequest", f"dryRun: Unsupported value: {request.query['dryRun']!r}"
            )
        writes = len(self.writes)
        response: web.StreamResponse = await handler(request)
        if len(self.writes) > writes and self.faults.after_write == "drop":
            assert request.transport is not None
            request.transport.close()  # applied, and the client never hears of it
        elif len(self.writes) > writes and self.faults.after_write == "late":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), self.faults.late_s)
        return response

    def _find(self, request: web.Request) -> dict[str, Any] | web.Response:
        ns, name = request.match_info["ns"], request.match_info["name"]
        found = self.deployments.get((ns, name))
        if found is None:
            return _status(404, "NotFound", f'deployments.apps "{name}" not found')
        return found

    async def _get_deployment(self, request: web.Request) -> web.Response:
        found = self._find(request)
        if isinstance(found, web.Response):
            return found
        self._progress(found)
        self._observe(found)
        return web.json_response(found)

    def _scale_of(self, deployment: dict[str, Any]) -> dict[str, Any]:
        meta = deployment["metadata"]
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
                "resourceVersion": meta["resourceVersion"],
            },
            "spec": {"replicas": deployment["spec"]["replicas"]},
            "status": {
                "replicas": deployment["status"].get("replicas", 0),
                "selector": ",".join(
                    f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items()
                ),
            },
        }

    async def _get_scale(self, request: web.Request) -> web.Response:
        found = self._find(request)
        return (
            found if isinstance(found, web.Response) else web.json_response(self._scale_of(found))
        )

    async def _apply(
        self, request: web.Request, current: dict[str, Any], updated: dict[str, Any]
    ) -> web.Response | None:
        """Validate and (unless dry run) store `updated`; None on success."""
        sent_version = updated["metadata"].get("resourceVersion")
        if sent_version is not None and sent_version != current["metadata"]["resourceVersion"]:
            name = current["metadata"]["name"]
            return _status(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on deployments.apps "{name}": the object has '
                "been modified; please apply your changes to the latest version",
            )
        replicas = updated["spec"].get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            return _status(422, "Invalid", f"spec.replicas: Invalid value: {replicas!r}")
        if request.query.get("dryRun") == "All":
            return None
        body = await request.text()
        self.writes.append(
            KubeWrite(request.method, request.path, request.content_type, json.loads(body))
        )
        new_template = updated["spec"]["template"] != current["spec"]["template"]
        if new_template:
            self._roll(updated)
        if updated["spec"] != current["spec"]:
            updated["metadata"]["generation"] = current["metadata"]["generation"] + 1
            self._progress(current)
            ns, name = current["metadata"]["namespace"], current["metadata"]["name"]
            self._rollouts[(ns, name)] = _Rollout(
                time.monotonic(), current["status"].get("availableReplicas", 0), new_template
            )
            self._progress(updated)
            previous = current["metadata"]["generation"]
            self._unobserved[(ns, name)] = (time.monotonic() + self.observe_after_s, previous)
            self._observe(updated)
        self._bump(updated)
        ns, name = current["metadata"]["namespace"], current["metadata"]["name"]
        self.deployments[(ns, name)] = updated
        return None

    async def _patch_deployment(self, request: web.Request) -> web.Response:
        found = self._find(request)
        if isinstance(found, web.Response):
            return found
        patch = await request.json()
        try:
            if request.content_type == "application/json-patch+json":
                updated = json_patch(found, patch)
            elif request.content_type in (
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
            ):
                updated = merge_patch(found, patch)
            else:
                return _status(415, "UnsupportedMediaType", f"{request.content_type}")
        except PatchConflict as exc:
            return _status(409, "Conflict", str(exc))
        except (ValueError, KeyError, TypeError) as exc:
            return _status(422, "Invalid", str(exc))
        if updated["metadata"].get("resourceVersion") == found["metadata"]["resourceVersion"]:
            updated["metadata"].pop("resourceVersion")  # unchanged: not a precondition
        error = await self._apply(request, found, updated)
        if error is not None:
            return error
        stored = self.deployments[(found["metadata"]["namespace"], found["metadata"]["name"])]
        return web.json_response(updated if request.query.get("dryRun") else stored)

    async def _write_scale(self, request: web.Request, scale: dict[str, Any]) -> web.Response:
        found = self._find(request)
        if isinstance(found, web.Response):
            return found
        updated = copy.deepcopy(found)
        updated["metadata"].pop("resourceVersion")
        version = scale.get("metadata", {}).get("resourceVersion")
        if version is not None:
            updated["metadata"]["resourceVersion"] = version
        updated["spec"]["replicas"] = scale.get("spec", {}).get("replicas")
        error = await self._apply(request, found, updated)
        if error is not None:
            return error
        if request.query.get("dryRun") == "All":
            updated["metadata"]["resourceVersion"] = found["metadata"]["resourceVersion"]
            return web.json_response(self._scale_of(updated))
        ns, name = found["metadata"]["namespace"], found["metadata"]["name"]
        return web.json_response(self._scale_of(self.deployments[(ns, name)]))

    async def _patch_scale(self, request: web.Request) -> web.Response:
        if request.content_type == "application/json-patch+json":
            return _status(415, "UnsupportedMediaType", "use a merge patch for scale")
        found = self._find(request)
        if isinstance(found, web.Response):
            return found
        return await self._write_scale(
            request, merge_patch(self._scale_of(found), await request.json())
        )

    async def _put_scale(self, request: web.Request) -> web.Response:
        return await self._write_scale(request, await request.json())

    async def _list_replicasets(self, request: web.Request) -> web.Response:
        namespace = request.match_info["ns"]
        try:
            wanted = parse_selector(request.query.get("labelSelector", ""))
        except SelectorError as exc:
            return _status(400, "BadRequest", str(exc))
        items = [
            rs
            for (ns, _), rs in sorted(self.replicasets.items())
            if ns == namespace
            and _selected(wanted, lambda k, r=rs: r["metadata"].get("labels", {}).get(k))
        ]
        return web.json_response(
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSetList",
                "metadata": {"resourceVersion": str(next(self._versions))},
                "items": items,
            }
        )

    # --- core/v1: pods, logs, events (read only) ------------------------------------
    async def _list_pods(self, request: web.Request) -> web.Response:
        namespace = request.match_info["ns"]
        try:
            labels = parse_selector(request.query.get("labelSelector", ""))
            fields = parse_selector(request.query.get("fieldSelector", ""), POD_FIELDS)
        except SelectorError as exc:
            return _status(400, "BadRequest", str(exc))
        items = [
            pod
            for (ns, _), pod in sorted(self.pods.items())
            if ns == namespace
            and _selected(labels, lambda k, p=pod: p["metadata"].get("labels", {}).get(k))
            and _selected(fields, lambda k, p=pod: _field(p, k))
        ]
        page, more = _page(request, items)
        meta = {"resourceVersion": str(next(self._versions))} | ({"continue": more} if more else {})
        return web.json_response(
            {"apiVersion": "v1", "kind": "PodList", "metadata": meta, "items": page}
        )

    def _find_pod(self, request: web.Request) -> dict[str, Any] | web.Response:
        ns, name = request.match_info["ns"], request.match_info["name"]
        found = self.pods.get((ns, name))
        if found is None:
            return _status(404, "NotFound", f'pods "{name}" not found')
        return found

    async def _get_pod(self, request: web.Request) -> web.Response:
        found = self._find_pod(request)
        return found if isinstance(found, web.Response) else web.json_response(found)

    async def _pod_log(self, request: web.Request) -> web.Response:
        self.log_queries.append(dict(request.query))
        found = self._find_pod(request)
        if isinstance(found, web.Response):
            return found
        pod = found["metadata"]["name"]
        names = [c["name"] for c in found["spec"]["containers"]]
        container = request.query.get("container", "")
        if not container:
            if len(names) > 1:
                return _status(
                    400,
                    "BadRequest",
                    f"a container name must be specified for pod {pod}, "
                    f"choose one of: [{' '.join(names)}]",
                )
            container = names[0]
        if container not in names:
            return _status(400, "BadRequest", f"container {container} is not valid for pod {pod}")
        query = request.query
        tail = limit = None
        try:
            if "tailLines" in query:
                tail = int(query["tailLines"])
            if "limitBytes" in query:
                limit = int(query["limitBytes"])
        except ValueError as exc:
            return _status(400, "BadRequest", f"invalid log options: {exc}")
        if tail is not None and tail < 0:
            return _status(422, "Invalid", "tailLines: Invalid value: must be >= 0")
        if limit is not None and limit < 1:
            return _status(422, "Invalid", "limitBytes: Invalid value: must be greater than 0")
        previous_text = query.get("previous", "false")
        if previous_text not in _BOOLS:
            return _status(400, "BadRequest", f'invalid boolean value "{previous_text}"')
        previous = _BOOLS[previous_text]
        status = next(s for s in found["status"]["containerStatuses"] if s["name"] == container)
        if previous and "terminated" not in (status.get("lastState") or {}):
            return _status(
                400,
                "BadRequest",
                f'previous terminated container "{container}" in pod "{pod}" not found',
            )
        waiting = (status.get("state") or {}).get("waiting")
        if not previous and waiting and not status.get("lastState"):
            return _status(
                400,
                "BadRequest",
                f'container "{container}" in pod "{pod}" is waiting to start: '
                + waiting.get("reason", "ContainerCreating"),
            )
        text = self.logs.get((request.match_info["ns"], pod, container, previous), "")
        lines = text.splitlines(keepends=True)
        if tail is not None:
            lines = lines[len(lines) - tail :] if tail else []
        body = "".join(lines).encode()
        if limit is not None:
            body = body[:limit]
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    async def _list_events(self, request: web.Request) -> web.Response:
        namespace = request.match_info["ns"]
        try:
            fields = parse_selector(request.query.get("fieldSelector", ""), EVENT_FIELDS)
        except SelectorError as exc:
            return _status(400, "BadRequest", str(exc))
        items = [
            event
            for event in self.events
            if event["metadata"]["namespace"] == namespace
            and _selected(fields, lambda k, e=event: _field(e, k))
        ]
        page, more = _page(request, items)
        meta = {"resourceVersion": str(next(self._versions))} | ({"continue": more} if more else {})
        return web.json_response(
            {"apiVersion": "v1", "kind": "EventList", "metadata": meta, "items": page}
        )
