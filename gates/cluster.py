"""The Kubernetes side of actions, through kubernetes_asyncio (kubeconfig or in-cluster).

`snapshot` reads what a human is shown; `scale` and `rollout_undo` change it. Every write
carries the resourceVersion the gates just checked, so a change that slips in between the
check and the write is refused by the API server (409) instead of being overwritten.
`rollout_undo` follows kubectl's client-side algorithm (pkg/polymorphichelpers/rollback.go).
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from gates.model import ClusterSnapshot, Revision

REVISION = "deployment.kubernetes.io/revision"
CHANGE_CAUSE = "kubernetes.io/change-cause"
HASH_LABEL = "pod-template-hash"
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


class ClusterError(Exception):
    """The API refused or failed; the message is the API server's own."""


class DeploymentNotFound(ClusterError):
    pass


class NothingToUndo(ClusterError):
    pass


def _api_message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or b"")
        return f"HTTP {exc.status}: {body.get('message', exc.reason)}"
    except (TypeError, ValueError):
        return f"HTTP {exc.status}: {exc.reason}"


def _without_hash(template: dict[str, Any]) -> dict[str, Any]:
    stripped = copy.deepcopy(template)
    labels = stripped.get("metadata", {}).get("labels") or {}
    labels.pop(HASH_LABEL, None)
    return stripped


class KubernetesCluster:
    def __init__(self, api: client.ApiClient, timeout_s: float) -> None:
        self._api = api
        self._apps = client.AppsV1Api(api)
        self._timeout = timeout_s

    @classmethod
    async def connect(cls, kubeconfig: str | None, timeout_s: float) -> KubernetesCluster:
        """From a kubeconfig file, or in-cluster service-account credentials when None."""
        configuration = client.Configuration()
        if kubeconfig:
            await config.load_kube_config(
                config_file=kubeconfig, client_configuration=configuration
            )
        else:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
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
            if exc.status == 404:
                raise DeploymentNotFound(_api_message(exc)) from exc
            raise ClusterError(_api_message(exc)) from exc
        except OSError as exc:  # aiohttp connection errors
            raise ClusterError(f"cannot reach the Kubernetes API: {exc}") from exc

    def _plain(self, obj: Any) -> Any:
        return self._api.sanitize_for_serialization(obj)

    async def _deployment_and_history(
        self, namespace: str, name: str
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        deployment = self._plain(
            await self._call(self._apps.read_namespaced_deployment(name, namespace))
        )
        labels = deployment["spec"]["selector"].get("matchLabels", {})
        selector = ",".join(f"{k}={v}" for k, v in labels.items())
        listed = self._plain(
            await self._call(
                self._apps.list_namespaced_replica_set(namespace, label_selector=selector)
            )
        )
        uid = deployment["metadata"]["uid"]
        owned = [
            rs
            for rs in listed.get("items", [])
            if any(
                o.get("uid") == uid and o.get("controller")
                for o in rs["metadata"].get("ownerReferences") or []
            )
        ]
        owned.sort(key=lambda rs: int((rs["metadata"].get("annotations") or {}).get(REVISION, 0)))
        return deployment, owned

    async def snapshot(self, namespace: str, name: str) -> ClusterSnapshot:
        deployment, owned = await self._deployment_and_history(namespace, name)
        annotations = deployment["metadata"].get("annotations") or {}
        containers = deployment["spec"]["template"]["spec"].get("containers", [])
        return ClusterSnapshot(
            replicas=deployment["spec"].get("replicas", 1),
            ready_replicas=(deployment.get("status") or {}).get("readyReplicas", 0),
            paused=bool(deployment["spec"].get("paused")),
            current_revision=int(annotations.get(REVISION, 0)),
            resource_version=deployment["metadata"]["resourceVersion"],
            images=[c.get("image", "") for c in containers],
            revisions=[
                Revision(
                    revision=int(rs["metadata"]["annotations"].get(REVISION, 0)),
                    images=[
                        c.get("image", "") for c in rs["spec"]["template"]["spec"]["containers"]
                    ],
                    change_cause=rs["metadata"]["annotations"].get(CHANGE_CAUSE, ""),
                    created=rs["metadata"].get("creationTimestamp", ""),
                )
                for rs in owned
            ],
        )

    async def scale(
        self, namespace: str, name: str, replicas: int, resource_version: str, dry_run: bool
    ) -> str:
        body = {"metadata": {"resourceVersion": resource_version}, "spec": {"replicas": replicas}}
        scale = self._apps.patch_namespaced_deployment_scale
        # dryRun=All: the API server validates and admits the change, and stores nothing.
        await self._call(
            scale(name, namespace, body, dry_run="All") if dry_run else scale(name, namespace, body)
        )
        verb = "would scale" if dry_run else "scaled"
        return f"{verb} {namespace}/{name} to {replicas} replicas"

    async def rollout_undo(
        self,
        namespace: str,
        name: str,
        to_revision: int | None,
        resource_version: str,
        dry_run: bool,
    ) -> str:
        deployment, owned = await self._deployment_and_history(namespace, name)
        if deployment["spec"].get("paused"):
            raise ClusterError(
                f"{namespace}/{name} is paused; resume it before rolling back (kubectl refuses too)"
            )
        by_revision = {
            int((rs["metadata"].get("annotations") or {}).get(REVISION, 0)): rs for rs in owned
        }
        if to_revision:
            target = by_revision.get(to_revision)
            if target is None:
                raise NothingToUndo(f"{namespace}/{name} has no revision {to_revision}")
        else:  # kubectl: the second-highest revision among the owned ReplicaSets
            if len(by_revision) < 2:
                raise NothingToUndo(f"{namespace}/{name} has no previous revision")
            target = by_revision[sorted(by_revision)[-2]]
        revision = int(target["metadata"]["annotations"][REVISION])
        template = _without_hash(target["spec"]["template"])
        if template == _without_hash(deployment["spec"]["template"]):
            raise NothingToUndo(f"{namespace}/{name} already runs revision {revision}'s template")
        kept = deployment["metadata"].get("annotations") or {}
        annotations = {k: v for k, v in kept.items() if k in ANNOTATIONS_TO_SKIP}
        annotations.update(
            {
                k: v
                for k, v in (target["metadata"].get("annotations") or {}).items()
                if k not in ANNOTATIONS_TO_SKIP
            }
        )
        patch = [
            # Not in kubectl: refuse (409) if the Deployment changed since the gates ran.
            {"op": "replace", "path": "/metadata/resourceVersion", "value": resource_version},
            {"op": "replace", "path": "/spec/template", "value": template},
            {"op": "replace", "path": "/metadata/annotations", "value": annotations},
        ]
        apply = self._apps.patch_namespaced_deployment
        await self._call(
            apply(name, namespace, patch, dry_run="All")
            if dry_run
            else apply(name, namespace, patch)
        )
        images = ", ".join(c.get("image", "") for c in template["spec"]["containers"])
        verb = "would roll back" if dry_run else "rolled back"
        return f"{verb} {namespace}/{name} to revision {revision} ({images})"
