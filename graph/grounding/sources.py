"""Live look-ups: a claim not in the evidence is checked at its source, all at once, bounded.

Deployments, their revisions, images and versions, and ReplicaSet names are read from the
cluster through the same read API the rollout-history tool uses; pods by name; service
names from Tempo's tag values. Nodes and times are not looked up: they are grounded by the
evidence (the pod, event, metric and log tools hand them over as facts) or not at all. A
look-up that did not run — past MAX_LOOKUPS, a source that cannot be reached, that timed
out or answers nonsense — leaves the claims that needed it *unchecked*, never ungrounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gates.cluster import ClusterError, KubernetesCluster, NotFound
from graph.grounding.claims import Claim
from graph.grounding.evidence import Evidence, Fact, citation, fact
from graph.links import kubectl
from graph.tools.kubernetes import rollout_facts
from graph.tools.tempo import TempoClient, TempoQueryError, TempoUnavailable

MAX_LOOKUPS = 8  # Deployments (and pods) read for one draft; the rest are left unchecked
MAX_NAMESPACES = 3  # namespaces a bare Deployment name is looked for in
SERVICE_TAG = "resource.service.name"
SERVICES = "services"  # the look-up of Tempo's service names


@dataclass
class LookupResult:
    facts: list[Fact] = field(default_factory=list)
    # look-up key -> why it could not be done (the source did not answer)
    failed: dict[str, str] = field(default_factory=dict)


def lookups_for(
    claim: Claim, subject: str | None, evidence: Evidence, namespaces: Sequence[str] = ()
) -> list[str]:
    """The look-ups that could settle a claim the evidence does not hold: in the claim's
    own namespace, else those the evidence names, else `namespaces` (the configured ones)."""
    where = [claim.namespace] if claim.namespace else [*evidence.values("namespace"), *namespaces]
    namespaces = list(dict.fromkeys(where))[:MAX_NAMESPACES]
    keys = [SERVICES] if claim.kind in ("workload", "service") else []
    name = ""  # the Deployment to read, if any
    if claim.kind in ("deployment", "workload", "service"):
        name = claim.value
    elif claim.kind == "replicaset":
        name = claim.value.rsplit("-", 1)[0]
    elif claim.kind in ("revision", "version", "image") and subject:
        name = subject
    elif claim.kind == "image":  # of no subject: the Deployment named like its repository
        name = claim.value.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]
    elif claim.kind == "pod" and "-" in claim.value:
        return [f"pod {ns}/{claim.value}" for ns in namespaces]
    return keys + [f"deployment {ns}/{name}" for ns in namespaces if name]


class LiveSources:
    """The cluster and Tempo, asked for what a draft states and the evidence lacks."""

    def __init__(
        self,
        cluster: KubernetesCluster | None,
        tempo: TempoClient | None,
        namespaces: Iterable[str] = (),
    ) -> None:
        self._cluster = cluster
        self._tempo = tempo
        # where a Deployment the evidence does not place is looked for (ALLOWED_NAMESPACES)
        self.namespaces = sorted(namespaces)

    async def look_up(self, keys: Iterable[str]) -> LookupResult:
        wanted = list(dict.fromkeys(keys))
        reads = [k for k in wanted if k.startswith(("deployment ", "pod "))]
        result = LookupResult()
        skipped = f"not looked up: more than {MAX_LOOKUPS} look-ups for one answer"
        result.failed.update(dict.fromkeys(reads[MAX_LOOKUPS:], skipped))
        tasks = [self._kubernetes(key, result) for key in reads[:MAX_LOOKUPS]]
        if SERVICES in wanted:
            tasks.append(self._services(result))
        await asyncio.gather(*tasks)
        return result

    async def _kubernetes(self, key: str, result: LookupResult) -> None:
        """One Deployment's rollout history, or whether one pod exists."""
        kind, _, where = key.partition(" ")
        namespace, _, name = where.partition("/")
        if self._cluster is None:
            result.failed[key] = "tracegate has no cluster access configured"
            return
        source = f"live lookup of Kubernetes {key}"
        try:
            if kind == "deployment":
                snap = await self._cluster.snapshot(namespace, name)
                result.facts += rollout_facts(namespace, name, snap, source)
            else:
                await self._cluster.pod(namespace, name)
                shown = kubectl("get", "pod", name, "-n", namespace)
                result.facts += [fact("pod", name, source), citation(source, shown)]
        except NotFound:
            return  # asked and answered: there is no such Deployment or pod
        except ClusterError as exc:
            result.failed[key] = f"the Kubernetes API could not be read ({exc})"

    async def _services(self, result: LookupResult) -> None:
        if self._tempo is None:
            result.failed[SERVICES] = "tracegate has no Tempo configured"
            return
        try:
            names = await self._tempo.tag_values(SERVICE_TAG)
        except (TempoUnavailable, TempoQueryError) as exc:
            result.failed[SERVICES] = f"Tempo's service names could not be read ({exc})"
            return
        where = f"live lookup of Tempo's {SERVICE_TAG} values"
        result.facts += [fact("service", name, where) for name in names]
