"""Duplicate: the same action on the same state, already pending or done, in this incident."""

from __future__ import annotations

from gates.model import GateDecision, fingerprint
from gates.rules.base import GateContext, allow, refuse

LIVE = frozenset({"pending_approval", "approved", "executing"})


class DuplicateGate:
    name = "duplicate"

    async def check(self, ctx: GateContext) -> GateDecision:
        if ctx.recheck:
            return allow(self.name, "re-check of the request itself")
        if ctx.fetched_snapshot is None:
            return allow(self.name, "no cluster state to compare")
        fp = fingerprint(ctx.request, ctx.fetched_snapshot)
        existing = await ctx.store.by_fingerprint(ctx.request.thread_key, fp)
        if existing is None or existing.id == ctx.request.id:
            return allow(self.name, "first of its kind in this incident")
        done = existing.status == "succeeded" and not (
            existing.outcome and existing.outcome.dry_run
        )
        if existing.status in LIVE or done:
            return refuse(
                self.name, f"the same action is already {existing.status} as {existing.id}"
            )
        return allow(self.name, f"an earlier identical request ended {existing.status}")
