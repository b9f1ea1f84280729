"""The answer as a streamed message: a live task timeline, then the checked answer.

Where Slack allows it (`SLACK_STREAMING=auto`, the default, or `on`), a turn's first
message is a stream (`chat.startStream`, a reply in the thread, for the person who asked)
instead of a placeholder. Progress events become `task_update` chunks
(`bot.outbound.timeline`), appended at most once per PROGRESS_INTERVAL. The answer is added
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
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound.timeline import Chunk, Timeline
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
