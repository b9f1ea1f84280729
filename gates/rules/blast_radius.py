"""Blast radius: how much one click may change, judged on the live Deployment."""

from __future__ import annotations

from gates.cluster import ClusterError, NotFound
from gates.model import GateDecision, rollback_target
from gates.rules.base import GateContext, allow, refuse


class BlastRadiusGate:
    name = "blast_radius"

    async def check(self, ctx: GateContext) -> GateDecision:
        r, p = ctx.request, ctx.policy
        try:
            now = await ctx.snapshot()
        except NotFound:
            return refuse(self.name, f"deployment {r.target} does not exist")
        except ClusterError as exc:
            return refuse(self.name, f"cannot read {r.target}: {exc}")
        if r.action == "scale":
            assert r.replicas is not None  # validation ran first
            if r.replicas == 0:
                return refuse(self.name, "scaling to 0 takes the service down; not from chat")
            if r.replicas == now.replicas:
                # Nothing to change, and an outcome read back from the cluster would prove nothing.
                return refuse(self.name, f"{r.target} already runs {now.replicas} replicas")
            if r.replicas > p.max_replicas:
                return refuse(
                    self.name, f"{r.replicas} replicas exceeds MAX_REPLICAS ({p.max_replicas})"
                )
            ceiling = max(1, now.replicas) * p.max_scale_factor
            if r.replicas > ceiling:
                return refuse(
                    self.name,
                    f"{now.replicas} → {r.replicas} is more than {p.max_scale_factor:g}× "
                    "the current replicas (MAX_SCALE_FACTOR)",
                )
            return allow(self.name, f"{now.replicas} → {r.replicas} replicas")
        if now.paused:
            return refuse(self.name, f"{r.target} is paused; a rollback would not roll out")
        # At approval the target is the one pinned (and shown) at proposal.
        target = r.target_revision or rollback_target(now.revisions, r.to_revision)
        if target is None:
            wanted = f"revision {r.to_revision}" if r.to_revision else "previous revision"
            return refuse(self.name, f"{r.target} has no {wanted} to roll back to")
        # kubectl's only refusal: the target's pod template is the one running now.
        if target.template_hash == now.template_hash:
            return refuse(
                self.name, f"{r.target} already runs revision {target.revision}'s pod template"
            )
        same = " — same images, other pod settings" if target.images == now.images else ""
        return allow(
            self.name,
            f"revision {now.current_revision} ({', '.join(now.images)}) → "
            f"{target.revision} ({', '.join(target.images)}){same}",
        )
