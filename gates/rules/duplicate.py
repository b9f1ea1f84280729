"""Duplicate: the same action on the same state, already pending or done, in this incident.

Expired, rejected, aborted and failed requests do not count: asking again is the remedy.
"""

from __future__ import annotations

import time

from gates.model import GateDecision, fingerprint
from gates.rules.base import GateContext, allow, refuse

# A `proposed` holder has passed its gates and judge and claimed the fingerprint (the claim
# comes last, `ActionPipeline.propose`): it is about to be pending. If its process died
# there, the reconciler refuses it after ACTION_LEASE and the fingerprint is free again.
LIVE = frozenset({"proposed", "pending_approval", "approved", "executing"})


class DuplicateGate:
    name = "duplicate"

    async def check(self, ctx: GateContext) -> GateDecision:
        if ctx.recheck:
            return allow(self.name, "re-check of the request itself")
        # After the blast radius gate: the Deployment is read (else that gate refused).
        fp = fingerprint(ctx.request, ctx.fetched_snapshot)
        holder = await ctx.store.fingerprint_holder(ctx.request.thread_key, fp)
        ctx.fingerprint_seen = holder  # the proposal claims the fingerprint against it
        existing = await ctx.store.find(holder) if holder else None  # None: past retention
        if existing is None or existing.id == ctx.request.id:
            return allow(self.name, "first of its kind in this incident")
        done = existing.status == "succeeded" and not (
            existing.outcome and existing.outcome.dry_run
        )
        lapsed = existing.status == "pending_approval" and time.time() >= existing.expires_at
        if (existing.status in LIVE and not lapsed) or done:
            return refuse(
                self.name, f"the same action is already {existing.status} as {existing.id}"
            )
        return allow(self.name, f"an earlier identical request ended {existing.status}")
