"""The answer as a streamed message: a live task timeline, then the checked answer.

Where Slack allows it (`SLACK_STREAMING=auto`, the default, or `on`), a turn's first
message is a stream (`chat.startStream`, a reply in the thread, for the person who asked)
instead of a placeholder. Progress events become `task_update` chunks
(the timeline, below), appended at most once per PROGRESS_INTERVAL. The answer is added
once, by `chat.stopStream`, when the turn delivers it: after every guard has passed. No
model text is streamed before that.

Falling back, by itself:
- `chat.startStream` refused (a workspace or token that cannot stream: `unknown_method`,
  `method_deprecated`, `not_allowed_token_type`, `missing_scope`…; or rate limited, or
  its answer lost): this turn gets a placeholder and its edits. In `auto` a refusal that
  says the workspace cannot stream is remembered for STREAM_REFUSAL_MEMORY_S, so other
  turns do not each try first.
- An append refused because Slack closed the stream (`message_not_in_streaming_state`,
  after a few minutes it does not document): the timeline stops there; the answer is
  written over the message with `chat.update`, as for a placeholder.
- `chat.stopStream` refused the same way (Slack closed it, or an earlier stop whose answer
  was lost did): the answer goes in with `chat.update`. A retried stop is therefore safe.

A worker that dies mid-stream: the tasks it had open are kept with the turn (Redis), so
the run that resumes the turn closes them ("interrupted"), goes on in the same stream and
stops it with the answer: one message, never left "thinking".

`chat.startStream` is never retried blindly (a retry could start a second stream;
`NotForPosts`); a start whose answer was lost leaves at most an empty stream, which Slack
closes, and the turn goes on with a placeholder.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal

from slack_sdk.errors import SlackApiError
from slack_sdk.models.messages.chunk import TaskUpdateChunk
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound.mrkdwn import clip_escaped, escape
from graph.checkpoint import Fence

log = logging.getLogger(__name__)

StreamingMode = Literal["auto", "on", "off"]
SaveTasks = Callable[[str], Awaitable[None]]

# Errors of chat.startStream that say this workspace or token cannot stream at all.
CANNOT_STREAM = frozenset(
    {
        "unknown_method",
        "method_deprecated",
        "deprecated_endpoint",
        "not_allowed_token_type",
        "missing_scope",
        "not_allowed",
        "access_denied",
        "enterprise_is_restricted",
        "team_access_not_granted",
    }
)
STREAM_REFUSAL_MEMORY_S = 3600.0
# The stream is no longer open: Slack closed it, or an earlier stop did.
NOT_STREAMING = "message_not_in_streaming_state"


@dataclass(eq=False)
class Streaming:
    """Whether a turn should stream: SLACK_STREAMING, and (in `auto`) a refusal of the
    workspace remembered for a while."""

    mode: StreamingMode
    _refused_until: float = field(default=float("-inf"), init=False)

    def wanted(self) -> bool:
        return self.mode == "on" or (
            self.mode == "auto" and time.monotonic() >= self._refused_until
        )

    async def start(
        self,
        client: AsyncWebClient,
        *,
        channel: str,
        thread_ts: str,
        team: str,
        user: str,
        chunks: list[Chunk],
    ) -> str | None:
        """The ts of a stream started in the thread for `user`, or None: fall back to a
        placeholder (refused, rate limited, or its answer lost)."""
        try:
            started = await client.chat_startStream(
                channel=channel,
                thread_ts=thread_ts,
                recipient_team_id=team,  # required in channels: the person it is for
                recipient_user_id=user,
                task_display_mode="timeline",
                chunks=chunks,
            )
        except SlackApiError as exc:
            error = str(exc.response.get("error") or exc.response.status_code)
            if self.mode == "auto" and error in CANNOT_STREAM:
                self._refused_until = time.monotonic() + STREAM_REFUSAL_MEMORY_S
                log.warning(
                    "Slack refused streaming (%s): answers use a placeholder and edits for the "
                    "next %.0f s (SLACK_STREAMING=off to stop trying)",
                    error,
                    STREAM_REFUSAL_MEMORY_S,
                )
            log.info("no stream in %s (%s): using a placeholder", thread_ts, error)
            return None
        except Exception as exc:  # a lost answer: a stream may exist, and cannot be found
            log.warning("chat.startStream failed (%s); using a placeholder", type(exc).__name__)
            return None
        return str(started["ts"])


@dataclass(eq=False)
class StreamProgress:
    """One run's view of a turn's stream: its timeline, chunks not sent yet, and whether
    Slack still has the stream open."""

    client: AsyncWebClient
    channel: str
    ts: str
    timeline: Timeline
    _: KW_ONLY
    interval_s: float
    fence: Fence
    save_tasks: SaveTasks
    pending: list[Chunk] = field(default_factory=list)
    open: bool = field(default=True, init=False)  # False once Slack says the stream is closed
    _last_at: float = field(default=float("-inf"), init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _later: asyncio.Task[None] | None = field(default=None, init=False)

    async def progress(self, event: dict[str, Any]) -> None:
        """Show one progress event: its chunks now, or with the next append."""
        self.pending += self.timeline.update(event)
        if not self.pending or not self.open:
            return
        wait = self._last_at + self.interval_s - time.monotonic()
        if wait <= 0:
            await self.flush()
        elif self._later is None or self._later.done():
            self._later = asyncio.create_task(self._flush_after(wait))

    async def _flush_after(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        try:
            await self.flush()
        except Exception as exc:  # cosmetic, like every progress update
            log.warning("stream append of %s failed: %s", self.ts, exc)

    async def flush(self) -> None:
        """Append what is pending (one call), and keep the open tasks with the turn."""
        async with self._lock:
            if not self.pending or not self.open:
                return
            await self.fence()  # a run that lost its thread must not write to the stream
            # The running tasks are kept before Slack shows them: a process killed between
            # the two leaves no task the resumed run does not know to close. Until both
            # are done the chunks stay pending (Redis down: sent with the next flush).
            await self.save_tasks(self.timeline.dump())
            chunks, self.pending = self.pending, []
            try:
                await self.client.chat_appendStream(channel=self.channel, ts=self.ts, chunks=chunks)
            except Exception as exc:
                gone = (NOT_STREAMING, "message_not_found")
                if isinstance(exc, SlackApiError) and exc.response.get("error") in gone:
                    self.open = False  # the answer will be written over it (chat.update)
                    log.info("the stream %s was closed: no more progress in it", self.ts)
                    return
                self.pending = chunks + self.pending  # tried again with the next append
                raise
            finally:
                self._last_at = time.monotonic()

    async def close(self) -> None:
        """Stop the timer (the run ends); pending chunks go with the stop."""
        if self._later is not None:
            self._later.cancel()
            await asyncio.gather(self._later, return_exceptions=True)

    async def stop(self, blocks: list[dict[str, Any]], *, failed: bool = False) -> bool:
        """Finish the stream with the answer's blocks under the timeline; False when the
        stream is no longer open (the caller writes the answer over it instead)."""
        await self.close()
        if not self.open:
            return False
        chunks = [*self.pending, *self.timeline.finish(failed=failed)]
        try:
            await self.client.chat_stopStream(
                channel=self.channel, ts=self.ts, chunks=chunks or None, blocks=blocks
            )
        except SlackApiError as exc:
            if exc.response.get("error") == NOT_STREAMING:
                self.open = False
                return False
            raise
        self.pending = []
        return True


# --- the timeline ---------------------------------------------------------------------------
# The investigation as a task timeline: progress events → `task_update` chunks.
#
# Slack's streamed messages show tasks one after another, each `in_progress` and then
# `complete` or `error` (a chunk that repeats a task's `id` updates it). Every tool call is a
# task, titled as its tool declares (`graph.tools.Shown`: "Searching Tempo: …"), with its
# result line and, when the result cites one, a Grafana Explore link; so is each guard:
# the trace check ("Checking 3 trace IDs"), the grounding check ("Checking 7 facts"), the
# action-claim check, each rubric pass, and a proposal. Model text never appears here: the
# answer is added only when the turn delivers it, after every guard passed.
#
# Pure: events in, chunks out, each validated with slack_sdk's own model. Everything shown
# comes from the model's arguments or from telemetry, so it goes through `escape` and is cut
# to a length.
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
