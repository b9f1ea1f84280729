"""The investigation as a task timeline: progress events → `task_update` chunks.

Slack's streamed messages show tasks one after another, each `in_progress` and then
`complete` or `error` (a chunk that repeats a task's `id` updates it). Every tool call is a
task, titled as its tool declares (`graph.tools.Shown`: "Searching Tempo: …"), with its
result line and, when the result cites one, a Grafana Explore link; so is each guard:
the trace check ("Checking 3 trace IDs"), the grounding check ("Checking 7 facts"), the
action-claim check, each rubric pass, and a proposal. Model text never appears here: the
answer is added only when the turn delivers it, after every guard passed.

Pure: events in, chunks out, each validated with slack_sdk's own model. Everything shown
comes from the model's arguments or from telemetry, so it goes through `escape` and is cut
to a length.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.models.messages.chunk import TaskUpdateChunk

from bot.outbound.mrkdwn import clip_escaped, escape

Chunk = dict[str, Any]
TITLE_CHARS = 120  # a task's title, after escaping
OUTPUT_CHARS = 200  # a task's result line

_RUBRIC_OUTPUTS = {
    "satisfied": "satisfied",
    "needs_revision": "needs revision: sent back to the agent",
    "max_iterations_reached": "not passed within the passes allowed",
    "grader_error": "the grader failed",
}
_COUNTED = re.compile(r"^(\d+ \w+|No \w+) match")
_ACTION_REFUSED = frozenset({"refused", "rejected", "expired", "failed", "aborted"})


def _safe(text: Any, limit: int) -> str:
    """Untrusted text (model arguments, telemetry) as a short, escaped line."""
    return clip_escaped(escape(str(text)), limit)


def task(
    task_id: str,
    title: str,
    status: str,
    *,
    output: str | None = None,
    sources: list[dict[str, str]] | None = None,
) -> Chunk:
    """One `task_update` chunk, checked by slack_sdk's model (unknown keys, the fields)."""
    chunk: Chunk = TaskUpdateChunk(
        id=task_id, title=title, status=status, output=output or None, sources=sources or None
    ).to_dict()
    return chunk


@dataclass
class Timeline:
    """The tasks of one turn's stream. `update` turns one progress event into the chunks
    that show it; `finish` closes whatever is still running."""

    run: int = 1  # the turn's run: task ids of a resumed run never reuse a dead run's
    _open: dict[str, Chunk] = field(default_factory=dict)  # kind -> its running task
    _counts: dict[str, int] = field(default_factory=dict)  # kind -> tasks of that kind

    def _next_id(self, kind: str) -> str:
        n = self._counts.get(kind, 0) + 1
        self._counts[kind] = n
        return f"r{self.run}-{kind}-{n}"

    def dump(self) -> str:
        """The running tasks, to keep with the turn (a resumed run closes them)."""
        return json.dumps(self._open)

    def interrupted(self, dumped: str | None) -> list[Chunk]:
        """Chunks closing the tasks a dead (or handed-back) run left running, from its
        `dump`. Reading the thread and a wait for model capacity stay open: this run's next
        step ends them."""
        try:
            left = json.loads(dumped) if dumped else {}
        except ValueError:
            left = {}
        closing: list[Chunk] = []
        for kind, running in left.items() if isinstance(left, dict) else ():
            if not isinstance(running, dict) or not running.get("id"):
                continue
            if kind in ("context", "wait"):
                self._open[kind] = running
                continue
            closing.append(
                task(
                    str(running["id"]),
                    str(running.get("title") or "…"),
                    "error",
                    output="interrupted: the worker stopped, and the turn was resumed",
                    sources=running.get("sources"),
                )
            )
        return closing

    def _start(self, kind: str, title: str, sources: list[dict[str, str]] | None = None) -> Chunk:
        chunk = task(self._next_id(kind), title, "in_progress", sources=sources)
        self._open[kind] = chunk
        return chunk

    def _end(self, kind: str, status: str, output: str | None = None) -> list[Chunk]:
        running = self._open.pop(kind, None)
        if running is None:
            return []
        return [
            task(
                running["id"],
                running["title"],
                status,
                output=output,
                sources=running.get("sources"),
            )
        ]

    def opening(self, *, queued: bool = False) -> list[Chunk]:
        """The first task: reading the question and the thread, or waiting for the
        thread's earlier question to be answered first."""
        title = "Queued behind the question before yours" if queued else "Reading the thread"
        return [self._start("context", title)]

    def update(self, event: dict[str, Any]) -> list[Chunk]:
        shown = self._show(event)
        if shown and "context" in self._open:  # the first step of the investigation
            shown = [*self._end("context", "complete"), *shown]
        return shown

    def _show(self, event: dict[str, Any]) -> list[Chunk]:
        kind = event.get("type")
        if kind == "tool_started":
            tool = str(event.get("tool", "?"))
            raw = event.get("args")
            given = raw if isinstance(raw, dict) else {}
            # A tool's arguments for its title; one the call lacks reads "…".
            args = defaultdict(
                lambda: "…", {k: _safe(v, 80) for k, v in given.items() if v not in ("", None)}
            )
            args.setdefault("target", args.get("deployment") or args.get("pod") or "…")
            # The title is the tool's own template (its `Shown`, from the graph), the
            # arguments its values: a tool name the model made up ("x{0}",
            # "a{deployment:50000000}") has none, and is text, never a template.
            template = event.get("title")
            shown = (
                template.format_map(args)
                if isinstance(template, str)
                else "Running " + _safe(tool, 40)
            )
            return [
                *self._end("tool", "complete"),
                self._start("tool", clip_escaped(shown, TITLE_CHARS)),
            ]
        if kind == "tool_finished":
            failed = event.get("outcome") == "failed" or event.get("status") == "error"
            summary = event.get("summary")  # none for a tool whose own task follows
            if summary:  # "12 traces match { … } between …": the count says it
                counted = _COUNTED.match(str(summary))
                summary = counted.group(1) if counted else summary
            output = _safe(summary, OUTPUT_CHARS) if summary else None
            if (link := event.get("link")) and (running := self._open.get("tool")):
                running["sources"] = [{"type": "url", "url": str(link), "text": "Open in Grafana"}]
            return self._end("tool", "error" if failed else "complete", output)
        if kind == "verification_started":
            n = int(event.get("trace_ids") or 0)
            return [self._start("traces", f"Checking {n} trace ID{'s' * (n != 1)} in Tempo")]
        if kind == "verification_finished":
            missing = int(event.get("missing") or 0)
            sent_back = missing and event.get("outcome") == "revise"
            output = (
                f"{event.get('found', 0)} found, {missing} missing, "
                f"{event.get('unverified', 0)} unverified"
                + ("; sent back to the agent" if sent_back else "")
            )
            return self._end("traces", "error" if missing else "complete", output)
        if kind == "grounding_started":
            return [self._start("facts", "Checking the facts against the evidence")]
        if kind == "grounding_finished":
            ungrounded = int(event.get("ungrounded") or 0)
            running = self._open.get("facts")
            if running is not None:
                running["title"] = f"Checking {int(event.get('checked') or 0)} facts"
            output = (
                f"{event.get('grounded', 0)} grounded, {ungrounded} not in the evidence, "
                f"{event.get('unchecked', 0)} unchecked"
            )
            return self._end("facts", "error" if ungrounded else "complete", output)
        if kind == "claims_checked":
            unsupported = int(event.get("unsupported") or 0)
            started = self._start("claims", "Checking what the answer says about actions")
            status = "error" if unsupported else "complete"
            return [started, *self._end("claims", status, f"{unsupported} unsupported claim(s)")]
        if kind == "rubric_evaluation_start":
            n = int(event.get("iteration") or 0) + 1
            return [self._start("rubric", f"Grading against the rubric (pass {n})")]
        if kind == "rubric_evaluation_end":
            result = str(event.get("result") or "")
            output = _RUBRIC_OUTPUTS.get(result, _safe(result.replace("_", " "), OUTPUT_CHARS))
            status = "complete" if result in ("satisfied", "needs_revision") else "error"
            return self._end("rubric", status, output or None)
        if kind == "action_proposed":
            status = str(event.get("status") or "")
            return [
                task(
                    self._next_id("action"),
                    "Proposing an action",
                    "error" if status in _ACTION_REFUSED else "complete",
                    output=_safe(status.replace("_", " "), 60) or None,
                )
            ]
        if kind == "waiting_for_model":
            return [self._start("wait", "Waiting for model capacity")]
        if kind == "model_started":
            return self._end("wait", "complete")
        if kind in ("stopped", "forced_answer"):
            reason = _safe(event.get("reason") or "a limit", 80)
            return [task(self._next_id("stop"), f"Stopped: {reason}", "error")]
        if kind == "resumed":
            return [task(self._next_id("resumed"), "Resumed after a restart", "complete")]
        return []

    def finish(self, *, failed: bool = False) -> list[Chunk]:
        """Chunks that close every task still running (as `error` when the turn failed)."""
        closing: list[Chunk] = []
        for kind in list(self._open):
            closing += self._end(kind, "error" if failed else "complete")
        return closing
