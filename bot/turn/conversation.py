"""A mention (or a reply in a thread the bot is in) → a recorded turn → a placeholder → the answer.

`on_message` runs before Bolt acknowledges the event: the turn is in Redis before Slack hears
200, with its job. `prepare` and `run` are the worker's part: post the
placeholder, investigate (resuming the thread's checkpoint after a crash), store the answer
with the turn, then deliver it step by step — each step done once and retried on its own, so
a failure after the answer is posted never overwrites it.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound.blocks import (
    answer_message,
    failure_message,
    progress_text,
    rubric_report_blocks,
    section,
)
from bot.outbound.cards import Cards
from bot.outbound.charts import chart_key, draw, refusal, upload, uploaded
from bot.outbound.posts import find_tagged, post_once
from bot.outbound.stream import Streaming, StreamProgress
from bot.outbound.timeline import Timeline
from bot.process.jobs import Jobs
from bot.process.metrics import ALERTS_SKIPPED, EVENTS_DEDUPLICATED, TURNS_STARTED, observe_turn
from bot.turn.access import Access, Asker, AskingLimits
from bot.turn.context import ThreadReader
from bot.turn.store import POSTED_ALERT, Turn, TurnStore, turn_id_of
from bot.turn.threads import ThreadMemory, thread_key
from bot.turn.worker import TurnQueue, WorkerTiming, enqueue_turn, job_for_record
from graph.capacity import ModelBusy, wait_text
from graph.checkpoint import Fence
from graph.log_context import bind_log_context
from graph.runner import InvestigationResult, Investigator

if TYPE_CHECKING:
    from bot.turn.alert_desk import AlertDesk

log = logging.getLogger(__name__)

_MENTION = re.compile(r"<@[A-Z0-9]+>")
_RUBRIC_STATUS = re.compile(r"^\s*rubric\s+status\s*\??\s*$", re.IGNORECASE)

SHORTCUT_QUESTION = (
    "Investigate the message this was started from (see the thread context): what is "
    "happening, and why?"
)
RESOLVED_FIRST = (
    "The alert resolved before this investigation started, so it was not investigated "
    "(no model call was made). Mention me in this thread to ask anyway."
)
TAKEN, ANSWERED, INCOMPLETE, FAILED = "eyes", "white_check_mark", "warning", "x"


# A delivery step is retried while Slack is unavailable, on top of slack_sdk's own 429/5xx
# retries, for up to half an hour: an answer found during an outage is still worth posting.
DELIVERY_PATIENCE_S = 1800.0
DELIVERY_BACKOFF_S = 1.0
DELIVERY_BACKOFF_CAP_S = 30.0
GONE = ("message_not_found", "cant_update_message")  # the placeholder was deleted


@dataclass(frozen=True)
class Presentation:
    grafana_url: str | None
    datasource: str
    progress_interval_s: float
    rubric_max_iterations: int
    charts: bool = True  # SLACK_CHARTS: charts of the evidence under the answer


@dataclass(eq=False)
class Placeholder:
    """The "working on it" message, edited as progress arrives (throttled)."""

    client: AsyncWebClient
    channel: str
    ts: str
    interval_s: float
    max_passes: int
    fence: Fence
    _last_at: float = field(default=float("-inf"), init=False)
    _last_text: str = field(default="", init=False)

    async def progress(self, event: dict[str, Any]) -> None:
        text = progress_text(event, self.max_passes)
        now = time.monotonic()
        if text is None or text == self._last_text or now - self._last_at < self.interval_s:
            return
        self._last_at, self._last_text = now, text
        await self.fence()  # a run that lost its thread must not edit over the answer
        await self.client.chat_update(channel=self.channel, ts=self.ts, text=text)


async def _unfenced() -> None:
    """Giving up writes regardless of the lease (the turn is finished by this run)."""


def _since(turn: Turn) -> float:
    """The turn's messages are posted after the message it is about (Slack's clock: a
    shortcut's turn is stamped with ours)."""
    return float(turn.about or turn.ts)


def _transient(exc: Exception) -> bool:
    """Worth trying again: rate limits, Slack's 5xx, a connection that failed."""
    if isinstance(exc, SlackApiError):
        status = exc.response.status_code if exc.response is not None else 0
        return status == 429 or status >= 500 or exc.response.get("error") == "ratelimited"
    return isinstance(exc, (OSError, asyncio.TimeoutError)) or "aiohttp" in type(exc).__module__


def _turn(team: str, channel: str, root: str, ts: str, **fields: Any) -> Turn:
    """The turn asked at `ts` in the Slack thread `root` (its LangGraph thread: the key)."""
    key = thread_key(team, channel, root)
    return Turn(
        id=turn_id_of(key, ts), thread=key, team=team, channel=channel, root=root, ts=ts, **fields
    )


@dataclass(eq=False)
class Conversations:
    client: AsyncWebClient
    investigator: Investigator
    memory: ThreadMemory
    turns: TurnStore
    queue: TurnQueue
    timing: WorkerTiming
    jobs: Jobs
    cards: Cards
    presentation: Presentation
    max_attempts: int
    reader: ThreadReader
    access: Access  # who may ask (ALLOW_EXTERNAL_USERS, ALLOW_GUEST_USERS)
    limits: AskingLimits  # how often (INVESTIGATIONS_PER_USER/CHANNEL_PER_HOUR)
    model_wait_max_s: float = 600.0  # MODEL_WAIT_MAX: a turn waits this long for capacity
    streaming: Streaming = field(default_factory=lambda: Streaming("off"))  # SLACK_STREAMING
    alerts: AlertDesk = field(init=False)  # what an alert's turn reads of its group (services)

    # --- receiving (before the ack) ------------------------------------------------------
    async def on_message(
        self,
        *,
        team: str,
        channel: str,
        user: str,
        text: str,
        ts: str,
        thread_ts: str | None,
        event_id: str | None,
        mentioned: bool,
        user_team: str = "",
        enterprise: str = "",
    ) -> None:
        """Record and queue one delivery of a message; strangers' threads are ignored.
        Who asked is checked when the turn runs (users.info has no place in the ack)."""
        root = thread_ts or ts
        if not mentioned and not (thread_ts and await self.memory.joined(team, channel, root)):
            return
        # JSON may carry a lone surrogate ("\udcff"), which no UTF-8 store can hold: the
        # question keeps the rest ("?" in its place) instead of failing to be recorded.
        question = _MENTION.sub("", text).strip().encode("utf-8", "replace").decode()
        turn = _turn(
            team,
            channel,
            root,
            ts,
            user=user,
            text=question,
            event_id=event_id or "",
            user_team=user_team,
            enterprise=enterprise,
        )
        if _RUBRIC_STATUS.match(question):
            if not event_id or await self.memory.first_delivery(event_id):
                status = self._rubric_status(turn.thread, channel, root)
                self.jobs.submit(status, name=f"rubric {turn.thread}")
            return
        # The thread is joined and the job queued in the same round trip.
        recorded = await self.turns.record(turn, job_for_record(self.queue, turn.id, self.timing))
        if recorded == "queued":
            return
        if recorded == "before":
            EVENTS_DEDUPLICATED.inc()
            earlier = await self.turns.get(turn.id)
            if earlier is not None and earlier.state == "done":
                log.info("redelivery of answered turn %s (event %s) ignored", turn.id, event_id)
                return
            # Recorded but unfinished: the first ack may have been lost. The job is queued
            # again below (a no-op while it is queued or running).
            log.info("redelivery of unfinished turn %s: making sure it is queued", turn.id)
        # The record is what must be durable before the 200; a job still to queue is queued
        # without holding the ack. If it is lost (this process dies first, Redis fails),
        # the workers' sweep queues unfinished turns that have no job (`requeue_orphans`).
        self.jobs.submit(enqueue_turn(self.queue, turn.id, self.timing), name=f"queue {turn.id}")

    async def _rubric_status(self, key: str, channel: str, root: str) -> None:
        report = await self.investigator.rubric_status(key)
        blocks = rubric_report_blocks(report, "this thread")
        await self.client.chat_postMessage(
            channel=channel, thread_ts=root, text="Rubric status", blocks=blocks
        )

    async def on_shortcut(
        self,
        *,
        team: str,
        channel: str,
        user: str,
        message: dict[str, Any],
        user_team: str = "",
        enterprise: str = "",
    ) -> None:
        """ "Investigate with tracegate" on a message (typically an alert): a turn in that
        message's thread, with the message as its first evidence."""
        root = message.get("thread_ts") or message["ts"]
        asked_at = f"{time.time():.6f}"  # after the message: the thread context includes it
        turn = _turn(
            team,
            channel,
            root,
            asked_at,
            user=user,
            text=SHORTCUT_QUESTION,
            about=message["ts"],
            user_team=user_team,
            enterprise=enterprise,
        )
        job = job_for_record(self.queue, turn.id, self.timing)
        if await self.turns.record(turn, job) != "queued":  # and joins the thread
            await enqueue_turn(self.queue, turn.id, self.timing)

    async def on_alert(
        self,
        team: str,
        channel: str,
        root: str,
        ts: str,
        question: str,
        alert: str,
    ) -> None:
        """An investigation no one asked for: an alert's, in the thread of its message
        (`root`). Recorded and queued as a mention's turn (a second delivery of the same
        alert records nothing new: the turn id is the thread's and `ts`)."""
        turn = _turn(team, channel, root, ts, text=question, about=root, alert=alert)
        job = job_for_record(self.queue, turn.id, self.timing)
        if await self.turns.record(turn, job) == "before":
            EVENTS_DEDUPLICATED.inc()
            return
        await enqueue_turn(self.queue, turn.id, self.timing)

    # --- running (in a worker) -----------------------------------------------------------
    async def prepare(self, turn: Turn) -> None:
        """Start the turn's stream, or post its placeholder, once, whichever worker gets
        there first."""
        await self._react(turn, TAKEN)
        if turn.placeholder_ts or not await self.turns.claim_placeholder(turn.id):
            return
        queued = await self.turns.head(turn.thread) not in (None, turn.id)
        if self.streaming.wanted() and turn.user:  # a stream is for someone: not an alert's
            timeline = Timeline(run=max(1, turn.attempts))
            streamed = await self.streaming.start(
                self.client,
                channel=turn.channel,
                thread_ts=turn.root,
                team=turn.team,
                user=turn.user,
                chunks=timeline.opening(queued=queued),
            )
            if streamed is not None:
                await self.turns.update(
                    turn.id, placeholder_ts=streamed, stream=1, stream_tasks=timeline.dump()
                )
                return
        try:
            posted = await self._post(
                turn,
                "placeholder",
                look_first=turn.attempts > 0,  # an earlier run may have posted it
                text=":hourglass_flowing_sand: "
                + ("Queued behind the question before yours…" if queued else "Looking into it…"),
            )
        except Exception:
            await self.turns.unclaim_placeholder(turn.id)  # a later run may try again
            raise
        await self.turns.update(turn.id, placeholder_ts=posted)

    async def run(self, turn: Turn, fence: Fence) -> None:
        """Investigate (or resume), store the answer with the turn, deliver it, finish.

        `fence` raises once another worker holds the thread: it is called before every
        side effect. Crashes count against MAX_ATTEMPTS while there is no answer yet; once
        there is one, only delivery is left, and Slack being down is not a reason to drop it.
        """
        bind_log_context(team=turn.team, channel=turn.channel, thread=turn.thread, turn=turn.id)
        answered = turn.result is not None
        if turn.attempts > self.max_attempts * (3 if answered else 1):
            await self._give_up(turn)
            return
        stream = self._stream(turn, fence)
        try:
            await self._run(turn, fence, stream)
        finally:
            if stream is not None:
                await stream.close()

    async def _run(self, turn: Turn, fence: Fence, stream: StreamProgress | None) -> None:
        if turn.result is not None:
            result = InvestigationResult.model_validate(turn.result)
        else:
            placeholder: Placeholder | StreamProgress | None = stream
            if turn.placeholder_ts and stream is None:
                placeholder = Placeholder(
                    self.client,
                    turn.channel,
                    turn.placeholder_ts,
                    self.presentation.progress_interval_s,
                    self.presentation.rubric_max_iterations,
                    fence,
                )
            grouped = turn.alert not in ("", POSTED_ALERT)
            skipped = None  # why it is not started (no model call): then the turn's answer
            if grouped and turn.attempts <= 1 and await self.alerts.resolved(turn.alert):
                ALERTS_SKIPPED.labels("resolved").inc()
                skipped = RESOLVED_FIRST
            elif (skipped := await self._refusal(turn)) is not None:
                log.info("turn %s not started: %s", turn.id, skipped)
            if skipped is not None:
                result = InvestigationResult(
                    thread_id=turn.thread,
                    status="incomplete",
                    answer=skipped,
                    correlation_id=uuid.uuid4().hex[:12],
                )
            else:
                rubric = await self.memory.channel_rubric(turn.team, turn.channel)
                context = await self.reader.unseen(turn, include=turn.about)
                if grouped:  # the group's alerts as the webhook sent them: labels, start, links
                    context.alerts = [*await self.alerts.hints(turn.alert), *context.alerts]
                TURNS_STARTED.inc()
                # The wait for model capacity is counted from the turn's first wait, over runs.
                waiting_since = turn.model_wait_since or time.time()
                names = sorted({a.alertname for a in context.alerts if a.alertname})
                asker = turn.user or f"alert {', '.join(names[:3]) or 'in this thread'}"
                try:
                    result = await self.investigator.investigate(
                        turn.thread,
                        turn.text,
                        asker,
                        on_progress=placeholder.progress if placeholder else None,
                        channel_rubric=rubric,
                        turn_id=turn.id,
                        context=context,
                        fence=fence,
                        channel=f"{turn.team}:{turn.channel}",
                        wait_until=waiting_since + self.model_wait_max_s,
                        automatic=bool(turn.alert),
                    )
                except ModelBusy as busy:
                    await self.turns.waiting_since(turn.id)
                    await self._show_wait(turn, busy, fence, stream)
                    raise  # the worker hands the turn back to the queue until the next try
                observe_turn(result)
            await fence()
            await self.turns.store_result(turn.id, result.model_dump(mode="json"))
            if skipped is None:
                await self.reader.mark_seen(turn)
        await self._deliver(turn, result, fence, stream)
        await self.turns.finish(turn)
        # The reaction that says how the turn ended: stopped by a budget or limit is incomplete.
        if result.status == "failed":
            outcome = FAILED
        elif result.status == "answered" and result.stop_reason is None:
            outcome = ANSWERED
        else:
            outcome = INCOMPLETE
        await self._react(turn, outcome, replacing=TAKEN)

    async def _refusal(self, turn: Turn) -> str | None:
        """Why the person who asked may not start this investigation (who they are, or how
        many they and the channel started this hour); None: they may. An alert's turn is
        no one's: its own limits were applied when it was recorded."""
        if not turn.user:
            return None
        asker = Asker(turn.user, turn.team, turn.user_team, turn.enterprise)
        return await self.access.refusal(asker) or await self.limits.refusal(
            turn.id, turn.team, turn.channel, turn.user
        )

    def _stream(self, turn: Turn, fence: Fence) -> StreamProgress | None:
        """This run's side of the turn's stream; the tasks an earlier run left running
        are closed first ("interrupted")."""
        if not (turn.stream and turn.placeholder_ts):
            return None
        timeline = Timeline(run=max(1, turn.attempts))
        interrupted = timeline.interrupted(turn.stream_tasks)

        async def save_tasks(dumped: str) -> None:
            await self.turns.update(turn.id, stream_tasks=dumped)

        return StreamProgress(
            self.client,
            turn.channel,
            turn.placeholder_ts,
            timeline,
            interval_s=self.presentation.progress_interval_s,
            fence=fence,
            save_tasks=save_tasks,
            pending=interrupted,
        )

    async def _show_wait(
        self, turn: Turn, busy: ModelBusy, fence: Fence, stream: StreamProgress | None
    ) -> None:
        """The placeholder says the turn waits, and until when (best effort); a stream
        shows its "Waiting for model capacity" task now."""
        if not turn.placeholder_ts:
            return
        try:
            if stream is not None:  # the runner's own event never reaches a run that raised
                await stream.progress({"type": "waiting_for_model", "retry_at": busy.retry_at})
                await stream.flush()
                return
            await fence()
            await self.client.chat_update(
                channel=turn.channel, ts=turn.placeholder_ts, text=wait_text(busy.retry_at)
            )
        except Exception as exc:  # cosmetic: the turn waits all the same
            log.warning("could not show the wait of %s: %s", turn.id, exc)

    async def _react(self, turn: Turn, name: str, *, replacing: str | None = None) -> None:
        """Status at a glance on the message that asked. Best effort: a reaction that
        cannot be set never affects the answer."""
        where = {"channel": turn.channel, "timestamp": turn.about or turn.ts}
        calls = [(self.client.reactions_add, name, "already_reacted")]
        if replacing:
            calls.insert(0, (self.client.reactions_remove, replacing, "no_reaction"))
        for call, emoji, harmless in calls:
            try:
                await call(name=emoji, **where)
            except Exception as exc:
                if not (isinstance(exc, SlackApiError) and harmless in str(exc)):
                    log.warning("reaction %s on %s failed: %s", emoji, turn.id, exc)

    async def _deliver(
        self,
        turn: Turn,
        result: InvestigationResult,
        fence: Fence,
        stream: StreamProgress | None,
    ) -> None:
        p = self.presentation
        await self._step(
            turn,
            "steps",
            lambda: self.memory.save_steps(turn.thread, result.correlation_id, result.events),
            fence,
        )
        # Proposals of this turn, also those made before a crash this run resumed after.
        proposed = await self.cards.proposed_since(turn.thread, turn.started_at)
        request_ids = await self.cards.decided(
            list(dict.fromkeys([*result.action_request_ids, *proposed]))
        )
        if result.status == "failed":
            text, blocks = failure_message(result)
        else:
            actions = await self.cards.requests(request_ids)
            text, blocks = answer_message(result, p.grafana_url, p.datasource, actions)
        failed = result.status == "failed"
        show = functools.partial(self._show, turn, text, blocks, stream, failed=failed)
        await self._step(turn, "answer", show, fence)
        for request_id in request_ids:
            post_card = functools.partial(
                self.cards.post, turn.channel, turn.root, [request_id], since=_since(turn)
            )
            await self._step(turn, f"card:{request_id}", post_card, fence)
        if p.charts and result.charts and not failed:
            await self._charts(turn, result, fence)

    async def _charts(self, turn: Turn, result: InvestigationResult, fence: Fence) -> None:
        """Charts of the evidence under the answer, drawn from the result's tool data, each
        uploaded once: a chart's step is remembered when done, and a run that died during
        an upload looks for the file in the thread first. A refused upload (a scope, a rate
        limit, a timeout) leaves the answer as it is; Steps says which chart and why."""
        notes: list[dict[str, Any]] = []
        at_ms = result.events[-1].get("at_ms", 0) if result.events else 0
        for index, spec in enumerate(result.charts):
            key = chart_key(index, spec)
            if key in turn.delivered:
                continue
            # Drawing takes a CPU second or so: off the event loop, which renews the lease.
            chart = await asyncio.to_thread(draw, index, spec, turn.id)
            await fence()
            note = {"chart": chart.title, "at_ms": at_ms}
            begun = f"{key}:begun"
            try:
                if begun in turn.delivered and await uploaded(
                    self.client, turn.channel, turn.root, chart.filename, _since(turn)
                ):
                    log.info("%s of %s was uploaded by an earlier run", key, turn.id)
                else:
                    await self.turns.mark_delivered(turn.id, begun)
                    await upload(self.client, turn.channel, turn.root, chart)
                    notes.append({"type": "chart_posted", **note})
            except Exception as exc:
                reason = refusal(exc)
                log.warning("chart %s of %s not posted: %s", key, turn.id, reason)
                notes.append({"type": "chart_not_posted", "reason": reason, **note})
            await self.turns.mark_delivered(turn.id, key)
        if notes:
            await self.memory.add_steps(result.correlation_id, notes)

    async def _show(
        self,
        turn: Turn,
        text: str,
        blocks: list[dict[str, Any]],
        stream: StreamProgress | None,
        *,
        failed: bool = False,
    ) -> None:
        """The answer ends the turn's stream, or replaces its placeholder (or, if neither
        could be posted, is posted)."""
        if stream is not None and await stream.stop(blocks, failed=failed):
            return  # else Slack closed the stream: the answer is written over it
        current = await self.turns.get(turn.id)
        placeholder_ts = current.placeholder_ts if current else turn.placeholder_ts
        if not placeholder_ts:  # posted, but its answer was lost (or its run died)?
            placeholder_ts = await find_tagged(
                self.client, turn.channel, turn.root, f"placeholder:{turn.id}", _since(turn)
            )
        if placeholder_ts:
            try:
                await self.client.chat_update(
                    channel=turn.channel, ts=placeholder_ts, text=text, blocks=blocks
                )
                return
            except SlackApiError as exc:
                if exc.response.get("error") not in GONE:
                    raise
                log.info("the placeholder of %s is gone; posting the answer anew", turn.id)
        # This step may be a retry after a post whose answer was lost: look first.
        posted = await self._post(turn, "answer", look_first=True, text=text, blocks=blocks)
        await self.turns.update(turn.id, placeholder_ts=posted)

    async def _post(self, turn: Turn, part: str, *, look_first: bool, **message: Any) -> str:
        """Post one of the turn's messages in its thread, once (see bot/outbound/posts.py)."""
        return await post_once(
            self.client,
            channel=turn.channel,
            thread_ts=turn.root,
            tag=f"{part}:{turn.id}",
            since=_since(turn),
            look_first=look_first,
            **message,
        )

    async def _step(
        self, turn: Turn, name: str, action: Callable[[], Awaitable[Any]], fence: Fence
    ) -> None:
        """One delivery step: skipped if done before, retried on its own while Slack is
        unavailable (up to DELIVERY_PATIENCE_S, backing off), then remembered."""
        if name in turn.delivered:
            return
        started = time.monotonic()
        for attempt in itertools.count():
            await fence()
            try:
                await action()
                break
            except Exception as exc:
                waited = time.monotonic() - started
                if not _transient(exc) or waited > DELIVERY_PATIENCE_S:
                    raise
                delay = min(DELIVERY_BACKOFF_CAP_S, DELIVERY_BACKOFF_S * 2**attempt)
                log.warning(
                    "delivery step %s of %s failed (%s); retrying in %.0fs",
                    name,
                    turn.id,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
        await self.turns.mark_delivered(turn.id, name)

    async def _give_up(self, turn: Turn) -> None:
        """A turn that keeps failing (or crashing its worker) ends in a plain message."""
        reference = uuid.uuid4().hex[:12]
        log.error("turn %s stopped after %d attempts [%s]", turn.id, turn.attempts - 1, reference)
        text = (
            f":x: I could not answer this after {self.max_attempts} attempts. Try again; "
            f"if it keeps failing, quote reference {reference}."
        )
        blocks = [section(text)]
        if turn.result is not None:  # the answer was found; it is delivering that failed
            p = self.presentation
            result = InvestigationResult.model_validate(turn.result)
            text, blocks = answer_message(result, p.grafana_url, p.datasource)
        if "answer" not in turn.delivered:
            stream = self._stream(turn, _unfenced)
            try:
                await self._show(turn, text, blocks, stream, failed=turn.result is None)
            except Exception:  # Slack itself may be what fails: the log has the reference
                log.exception("could not tell the thread of %s [%s]", turn.id, reference)
        await self.turns.finish(turn)
        await self._react(turn, FAILED, replacing=TAKEN)
