"""The trace guard: every trace ID in a draft is checked in Tempo before it is posted.

Deterministic, no model involved. Missing IDs send the agent back with feedback naming
them; IDs still missing when revisions run out are removed from the answer; IDs that
could not be checked (Tempo down, slow, 5xx) are marked unverified, never passed as found.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from graph.grounding.evidence import Fact
from graph.state import TraceCheck
from graph.tools.tempo import TempoClient, TempoQueryError, TempoUnavailable, trace_facts
from graph.trace_ids import rewrite_trace_ids

REMOVED_PLACEHOLDER = "[trace ID removed]"
UNVERIFIED_MARK = " (unverified: Tempo could not be reached)"


class TraceVerifier:
    """Checks trace IDs in Tempo concurrently, at most `concurrency` requests at a time.

    A trace found is read whole: what it shows (versions, pods, times) is evidence for the
    grounding check, so a draft citing a trace may state what that trace holds."""

    def __init__(self, client: TempoClient, concurrency: int) -> None:
        self._client = client
        self._slots = asyncio.Semaphore(concurrency)

    async def _check_one(self, trace_id: str) -> tuple[TraceCheck, list[Fact]]:
        async with self._slots:
            try:
                spans = await self._client.fetch(trace_id)
            except (TempoUnavailable, TempoQueryError) as exc:
                return {"status": "unverified", "detail": str(exc)}, []
        if spans is None:
            return {"status": "missing", "detail": "Tempo has no such trace"}, []
        return {"status": "found", "detail": f"{len(spans)} spans"}, trace_facts(
            trace_id, spans, self._client.link(trace_id)
        )

    async def check(self, trace_ids: Iterable[str]) -> tuple[dict[str, TraceCheck], list[Fact]]:
        """Normalised ids in, a result for each out (same order), and the facts of the
        traces found."""
        ids = list(trace_ids)
        results = await asyncio.gather(*(self._check_one(t) for t in ids))
        checks = {t: check for t, (check, _) in zip(ids, results, strict=True)}
        return checks, [f for _, facts in results for f in facts]


def ids_with(checks: dict[str, TraceCheck], status: str) -> list[str]:
    return [trace_id for trace_id, check in checks.items() if check["status"] == status]


def revision_feedback(missing: list[str]) -> str:
    """The message that sends the agent back when it cited traces that do not exist."""
    listed = ", ".join(missing)
    return (
        f"[trace guard] Your draft cites trace IDs that do not exist in Tempo: {listed}. "
        "Do not cite them. Call query_tempo_traces to find real traces, cite trace IDs "
        "verbatim from tool results only, and answer again."
    )


def finalise_answer(draft: str, checks: dict[str, TraceCheck]) -> tuple[str, int]:
    """The text to post: missing IDs removed (and counted), unverified ones marked."""
    text, removed = rewrite_trace_ids(
        draft, ids_with(checks, "missing"), lambda _: REMOVED_PLACEHOLDER
    )
    text, _ = rewrite_trace_ids(
        text, ids_with(checks, "unverified"), lambda token: token + UNVERIFIED_MARK
    )
    if removed:
        plural = "s" if removed != 1 else ""
        text += (
            f"\n\n_{removed} trace ID reference{plural} removed: Tempo has no such trace, "
            "so citing it would mislead._"
        )
    return text, removed
