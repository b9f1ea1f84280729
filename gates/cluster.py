"""The Kubernetes side of actions, through kubernetes_asyncio (kubeconfig or in-cluster).

`snapshot` reads what a human is shown and what the gates judge; `workload_pods`, `pod`,
`events` and `pod_log` read (never change) what the investigation tools show; `plan_scale` and
`plan_rollback` compute a change from fresh reads and return it unsent, so everything that
can fail before the write fails before it. Every write carries the resourceVersion the gates
just checked, so a change that slips in between the check and the write is refused by the
API server (409) instead of being overwritten. The rollback follows kubectl's client-side
algorithm (pkg/polymorphichelpers/rollback.go).
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from gates.model import ClusterSnapshot, Revision

REVISION = "deployment.kubernetes.io/revision"
CHANGE_CAUSE = "kubernetes.io/change-cause"
HASH_LABEL = "pod-template-hash"
FENCE = "tracegate.io/fenced-by"  # a reconciler's no-op write (see KubernetesCluster.fence)
PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
# kubectl keeps the Deployment's own values of these when it copies a ReplicaSet's annotations.
ANNOTATIONS_TO_SKIP = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION,
        "deployment.kubernetes.io/revision-history",
        "deployment.kubernetes.io/desired-replicas",
        "deployment.kubernetes.io/max-replicas",
        "deprecated.deployment.rollback.to",
    }
)


# Kubernetes object names (RFC 1123): a namespace is a DNS label, a Deployment or a pod a DNS
# subdomain. Names from the model are checked before they reach a URL path or a field
# selector, where a comma would add a term of its own choosing.
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)


def name_refusal(namespace: str, **names: str) -> str | None:
    """Why these are not Kubernetes object names (`namespace` a DNS-1123 label, the others,
    by kind, DNS-1123 subdomains; an empty one is not given); None when they are."""
    if not DNS1123_LABEL.fullmatch(namespace):
        return (
            f"namespace {namespace!r} is not a Kubernetes name (lowercase letters, digits "
            "and '-', at most 63)"
        )
    for kind, name in names.items():
        if name and not DNS1123_SUBDOMAIN.fullmatch(name):
            return (
                f"{kind} {name!r} is not a Kubernetes name (lowercase letters, digits, '-' "
                "and '.', at most 253)"
            )
    return None


class ClusterError(Exception):
    """The API refused or failed; the message is the API server's own."""


class NotFound(ClusterError):
    """The API server answered 404: the Deployment, pod or container is not there."""


class NothingToUndo(ClusterError):
    pass


def _api_error(exc: ApiException) -> ClusterError:
    """The API server's refusal in its own words; NotFound for a 404."""
    try:
        message = f"HTTP {exc.status}: {json.loads(exc.body or b'').get('message', exc.reason)}"
    except (TypeError, ValueError):
        message = f"HTTP {exc.status}: {exc.reason}"
    return NotFound(message) if exc.status == 404 else ClusterError(message)


def _without_hash(template: dict[str, Any]) -> dict[str, Any]:
    stripped = copy.deepcopy(template)
    labels = stripped.get("metadata", {}).get("labels") or {}
    labels.pop(HASH_LABEL, None)
    return stripped


class KubernetesCluster:
    def __init__(self, api: client.ApiClient, timeout_s: float) -> None:
        self._api = api
        self._apps = client.AppsV1Api(api)
        self._core = client.CoreV1Api(api)
        self._timeout = timeout_s

    @classmethod
    async def connect(cls, kubeconfig: str | None, timeout_s: float) -> KubernetesCluster:
        """From a kubeconfig file, or in-cluster service-account credentials when None."""
        configuration = client.Configuration()
        try:
            if kubeconfig:
                await config.load_kube_config(
                    config_file=kubeconfig, client_configuration=configuration
                )
            else:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException as exc:
            # E.g. "Invalid kube-config file. Expected key current-context": the file is not
            # a usable kubeconfig; say which one instead of a traceback.
            raise ClusterError(f"{kubeconfig or 'in-cluster config'}: {exc}") from None
        return cls(client.ApiClient(configuration), timeout_s)

    async def close(self) -> None:
        await self._api.close()

    async def _call(self, coro: Any) -> Any:
        try:
            async with asyncio.timeout(self._timeout):
                return await coro
        except TimeoutError as exc:
            raise ClusterError(
                f"the Kubernetes API did not answer within {self._timeout:g}s"
            ) from exc
        except ApiException as exc:
            raise _api_error(exc) from exc
        except (OSError, aiohttp.ClientError) as exc:
            # ServerDisconnectedError is a ClientConnectionError, not an OSError.
            raise ClusterError(f"cannot reach the Kubernetes API: {exc!r}") from exc

    async def _read(self, coro: Any) -> Any:
        """What a read answered, as plain data (the API's own camelCase JSON)."""
        return self._api.sanitize_for_serialization(await self._call(coro))

    async def _deployment_and_selector(
        self, namespace: str, name: str
    ) -> tuple[dict[str, Any], str]:
        """The Deployment, and its selector's matchLabels as a label selector."""
        deployment = await self._read(self._apps.read_namespaced_deployment(name, namespace))
        labels = deployment["spec"]["selector"].get("matchLabels", {})
        return deployment, ",".join(f"{k}={v}" for k, v in labels.items())

    async def _deployment_and_history(
        self, namespace: str, name: str
    ) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]:
        """The Deployment and its ReplicaSets with a parsable revision, oldest first."""
        deployment, selector = await self._deployment_and_selector(namespace, name)
        listed = await self._read(
            self._apps.list_namespaced_replica_set(namespace, label_selector=selector)
        )
        uid = deployment["metadata"]["uid"]
        owned = [
            (revision, rs)
            for rs in listed.get("items", [])
            if any(
                o.get("uid") == uid and o.get("controller")
                for o in rs["metadata"].get("ownerReferences") or []
            )
            and (revision := revision_of(rs)) is not None
        ]
        return deployment, sorted(owned, key=lambda pair: pair[0])

    async def snapshot(self, namespace: str, name: str) -> ClusterSnapshot:
        deployment, owned = await self._deployment_and_history(namespace, name)
        status = deployment.get("status") or {}
        return ClusterSnapshot(
            replicas=deployment["spec"].get("replicas", 1),
            ready_replicas=status.get("readyReplicas", 0),
            paused=bool(deployment["spec"].get("paused")),
            current_revision=revision_of(deployment) or 0,
            resource_version=deployment["metadata"]["resourceVersion"],
            images=_images(deployment["spec"]["template"]),
            template_hash=template_hash(deployment["spec"]["template"]),
            revisions=[
                Revision(
                    revision=revision,
                    images=_images(rs["spec"]["template"]),
                    template_hash=template_hash(rs["spec"]["template"]),
                    change_cause=(rs["metadata"].get("annotations") or {}).get(CHANGE_CAUSE, ""),
                    created=rs["metadata"].get("creationTimestamp", ""),
                    replicaset=rs["metadata"].get("name", ""),
                )
                for revision, rs in owned
            ],
        )

    async def workload_pods(
        self, namespace: str, name: str, limit: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Up to `limit` of the pods the Deployment's selector matches, and whether there
        are more."""
        _, selector = await self._deployment_and_selector(namespace, name)
        listed = await self._read(
            self._core.list_namespaced_pod(namespace, label_selector=selector, limit=limit)
        )
        return listed.get("items") or [], bool((listed.get("metadata") or {}).get("continue"))

    async def pod(self, namespace: str, name: str) -> dict[str, Any]:
        pod: dict[str, Any] = await self._read(self._core.read_namespaced_pod(name, namespace))
        return pod

    async def events(
        self, namespace: str, limit: int, pod: str | None = None
    ) -> tuple[list[dict[str, Any]], bool]:
        """Up to `limit` core/v1 events of the namespace, or of one pod in it (events.k8s.io/v1
        would hand the kubelet's events over with `eventTime: null`, which the generated
        client refuses), and whether there are more."""
        options: dict[str, Any] = {"limit": limit}
        if pod is not None:
            if refusal := name_refusal(namespace, pod=pod):
                raise ValueError(refusal)
            options["field_selector"] = f"involvedObject.kind=Pod,involvedObject.name={pod}"
        listed = await self._read(self._core.list_namespaced_event(namespace, **options))
        return listed.get("items") or [], bool((listed.get("metadata") or {}).get("continue"))

    async def pod_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        tail_lines: int,
        limit_bytes: int,
        previous: bool,
    ) -> str:
        """The last `tail_lines` lines of a container's log, at most `limit_bytes` of them.

        Read raw: the generated client parses a body that happens to be JSON (a log of one
        structured line) and hands back its Python repr instead of the text.
        """
        response = await self._call(
            self._core.read_namespaced_pod_log(
                pod,
                namespace,
                container=container,
                tail_lines=tail_lines,
                limit_bytes=limit_bytes,
                previous=previous,
                _preload_content=False,
            )
        )
        try:
            body = await self._call(response.read())
        finally:
            response.release()
        if not 200 <= response.status <= 299:
            error = ApiException(status=response.status, reason=response.reason)
            error.body = body
            raise _api_error(error) from error
        return str(body.decode("utf-8", errors="replace"))

    async def rollout_status(self, namespace: str, name: str) -> RolloutStatus:
        """What `kubectl rollout status` looks at."""
        deployment = await self._read(self._apps.read_namespaced_deployment(name, namespace))
        status = deployment.get("status") or {}
        return RolloutStatus(
            generation=deployment["metadata"].get("generation", 0),
            observed_generation=status.get("observedGeneration", 0),
            replicas=deployment["spec"].get("replicas", 1),
            pods=status.get("replicas", 0),
            updated=status.get("updatedReplicas", 0),
            available=status.get("availableReplicas", 0),
            deadline_exceeded=any(
                c.get("type") == "Progressing" and c.get("reason") == PROGRESS_DEADLINE_EXCEEDED
                for c in status.get("conditions") or []
            ),
        )

    def plan_scale(
        self, namespace: str, name: str, replicas: int, resource_version: str
    ) -> PlannedWrite:
        body = {"metadata": {"resourceVersion": resource_version}, "spec": {"replicas": replicas}}
        what = f"{namespace}/{name} to {replicas} replicas"
        scale = partial(self._apps.patch_namespaced_deployment_scale, name, namespace, body)
        return self._planned(f"scaled {what}", f"would scale {what}", scale, resource_version)

    def _planned(
        self, done: str, would: str, patch: Callable[..., Awaitable[Any]], resource_version: str
    ) -> PlannedWrite:
        """The write `patch()` (all but dry_run given) sends, unsent."""

        async def send(dry_run: bool) -> None:
            # dryRun=All: the API server validates and admits the change, and stores nothing.
            await self._call(patch(dry_run="All") if dry_run else patch())

        return PlannedWrite(done, would, send, resource_version)

    async def fence(self, namespace: str, name: str, resource_version: str, marker: str) -> None:
        """Make a write conditional on `resource_version` impossible from now on: a no-op
        annotation change, itself conditional on that version (a write still in flight will
        get 409). Its own 409 is no failure: the Deployment had already changed."""
        fenced = f"/metadata/annotations/{FENCE.replace('/', '~1')}"
        patch = [
            {"op": "replace", "path": "/metadata/resourceVersion", "value": resource_version},
            {"op": "add", "path": fenced, "value": marker},
        ]
        try:
            await self._call(self._apps.patch_namespaced_deployment(name, namespace, patch))
        except ClusterError as exc:
            if "HTTP 409" not in str(exc):
                raise

    async def plan_rollback(
        self, namespace: str, name: str, target: Revision, resource_version: str
    ) -> PlannedWrite:
        """kubectl's patch back to `target`, the revision pinned when it was proposed."""
        deployment, owned = await self._deployment_and_history(namespace, name)
        if deployment["spec"].get("paused"):
            raise ClusterError(
                f"{namespace}/{name} is paused; resume it before rolling back (kubectl refuses too)"
            )
        chosen = next(
            (
                rs
                for revision, rs in owned
                if revision == target.revision
                and template_hash(rs["spec"]["template"]) == target.template_hash
            ),
            None,
        )
        if chosen is None:
            raise NothingToUndo(
                f"{namespace}/{name} no longer has revision {target.revision} as proposed; "
                "ask again"
            )
        template = _without_hash(chosen["spec"]["template"])
        if template == _without_hash(deployment["spec"]["template"]):
            raise NothingToUndo(
                f"{namespace}/{name} already runs revision {target.revision}'s template"
            )
        annotations = rollback_annotations(deployment, chosen)
        patch = [
            # Not in kubectl: refuse (409) if the Deployment changed since the gates ran.
            {"op": "replace", "path": "/metadata/resourceVersion", "value": resource_version},
            {"op": "replace", "path": "/spec/template", "value": template},
            {"op": "replace", "path": "/metadata/annotations", "value": annotations},
        ]
        what = f"{namespace}/{name} to revision {target.revision} ({', '.join(target.images)})"
        apply = partial(self._apps.patch_namespaced_deployment, name, namespace, patch)
        return self._planned(
            f"rolled back {what}", f"would roll back {what}", apply, resource_version
        )


@dataclass(frozen=True)
class PlannedWrite:
    """A change computed from fresh reads and not sent yet: `send` is the only call that
    writes, so anything that fails before it provably changed nothing."""

    done: str  # the outcome once the cluster shows it
    would: str  # the outcome of a dry run
    send: Callable[[bool], Awaitable[None]]  # dry_run → None
    resource_version: str = ""  # the write applies only to this version of the Deployment


@dataclass(frozen=True)
class RolloutStatus:
    generation: int
    observed_generation: int
    replicas: int  # wanted
    pods: int  # status.replicas: old and new
    updated: int
    available: int
    deadline_exceeded: bool

    @property
    def healthy(self) -> bool:
        return (
            self.observed_generation >= self.generation
            and self.updated == self.replicas
            and self.pods == self.updated  # no old pods left
            and self.available == self.replicas
            and not self.deadline_exceeded
        )

    def describe(self) -> str:
        old = self.pods - self.updated
        return f"{self.available}/{self.replicas} available" + (
            f", {old} old pods not replaced yet" if old > 0 else ""
        )


def revision_of(obj: dict[str, Any]) -> int | None:
    """kubectl's `deploymentutil.Revision`: no annotation is revision 0; an annotation that
    does not parse makes the object unusable (None), and kubectl skips it."""
    value = (obj["metadata"].get("annotations") or {}).get(REVISION)
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        return None


def rollback_annotations(deployment: dict[str, Any], replica_set: dict[str, Any]) -> dict[str, str]:
    """kubectl: the ReplicaSet's annotations, but the Deployment's own values of the skip list."""
    own, copied = (o["metadata"].get("annotations") or {} for o in (deployment, replica_set))
    kept = {k: v for k, v in own.items() if k in ANNOTATIONS_TO_SKIP}
    return kept | {k: v for k, v in copied.items() if k not in ANNOTATIONS_TO_SKIP}


def template_hash(template: dict[str, Any]) -> str:
    """Equal for two pod templates kubectl would call equal (ignoring `pod-template-hash`)."""
    canonical = json.dumps(_without_hash(template), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _images(template: dict[str, Any]) -> list[str]:
    return [c.get("image", "") for c in (template.get("spec") or {}).get("containers", [])]
