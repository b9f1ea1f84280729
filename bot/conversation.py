"""A mention (or a reply in a thread the bot is in) → a placeholder → the answer."""

from __future__ import annotations

import contextlib
import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks import (
    answer_message,
    failure_message,
    progress_text,
    rubric_report_blocks,
    section,
)
from bot.cards import Cards
from bot.jobs import Jobs
from bot.threads import ThreadMemory, thread_key
from graph.runner import Investigator

log = logging.getLogger(__name__)

_MENTION = re.compile(r"<@[A-Z0-9]+>")
_RUBRIC_STATUS = re.compile(r"^\s*rubric\s+status\s*\??\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Presentation:
    grafana_url: str | None
    datasource: str
    progress_interval_s: float
    rubric_max_iterations: int


class Placeholder:
    """The "working on it" message, edited as progress arrives (throttled) and at the end."""

    def __init__(
        self, client: AsyncWebClient, channel: str, ts: str, interval_s: float, max_passes: int
    ) -> None:
        self.client, self.channel, self.ts = client, channel, ts
        self.interval_s, self.max_passes = interval_s, max_passes
        self._last_at = 0.0
        self._last_text = ""

    async def progress(self, event: dict[str, Any]) -> None:
        text = progress_text(event, self.max_passes)
        now = time.monotonic()
        if text is None or text == self._last_text or now - self._last_at < self.interval_s:
            return
        self._last_at, self._last_text = now, text
        await self.client.chat_update(channel=self.channel, ts=self.ts, text=text)

    async def replace(self, text: str, blocks: list[dict[str, Any]]) -> None:
        await self.client.chat_update(channel=self.channel, ts=self.ts, text=text, blocks=blocks)


class Conversations:
    def __init__(
        self,
        client: AsyncWebClient,
        investigator: Investigator,
        memory: ThreadMemory,
        jobs: Jobs,
        cards: Cards,
        presentation: Presentation,
    ) -> None:
        self.client = client
        self.investigator = investigator
        self.memory = memory
        self.jobs = jobs
        self.cards = cards
        self.presentation = presentation

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
    ) -> None:
        """Handle one delivery of a message event; duplicates and strangers' threads are ignored."""
        root = thread_ts or ts
        if not mentioned and not (thread_ts and await self.memory.joined(team, channel, root)):
            return
        if event_id and not await self.memory.first_delivery(event_id):
            log.info("duplicate delivery of %s ignored", event_id)
            return
        await self.memory.join(team, channel, root)
        question = _MENTION.sub("", text).strip()
        key = thread_key(team, channel, root)
        if _RUBRIC_STATUS.match(question):
            report = await self.investigator.rubric_status(key)
            blocks = rubric_report_blocks(report, "this thread")
            await self.client.chat_postMessage(
                channel=channel, thread_ts=root, text="Rubric status", blocks=blocks
            )
            return
        waiting = self.memory.busy(key)
        posted = await self.client.chat_postMessage(
            channel=channel,
            thread_ts=root,
            text=":hourglass_flowing_sand: "
            + ("Queued behind the question before yours…" if waiting else "Looking into it…"),
        )
        placeholder = Placeholder(
            self.client,
            channel,
            str(posted["ts"]),
            self.presentation.progress_interval_s,
            self.presentation.rubric_max_iterations,
        )
        job = self._answer(key, team, channel, root, user, question, placeholder)
        self.jobs.submit(job, name=f"answer {key}")

    async def _answer(
        self,
        key: str,
        team: str,
        channel: str,
        root: str,
        user: str,
        question: str,
        placeholder: Placeholder,
    ) -> None:
        try:
            async with self.memory.turn(key):
                rubric = await self.memory.channel_rubric(team, channel)
                result = await self.investigator.investigate(
                    key, question, user, on_progress=placeholder.progress, channel_rubric=rubric
                )
                await self.memory.save_steps(result.correlation_id, result.events)
                if result.status == "failed":
                    await placeholder.replace(*failure_message(result))
                    return
                p = self.presentation
                actions = await self.cards.requests(result.action_request_ids)
                await placeholder.replace(
                    *answer_message(result, p.grafana_url, p.datasource, actions)
                )
                await self.cards.post(channel, root, result.action_request_ids)
        except Exception:
            reference = uuid.uuid4().hex[:12]
            log.exception("answering in %s failed [%s]", key, reference)
            text = (
                ":x: Something went wrong while answering. Try again; if it keeps failing, "
                f"quote reference {reference}."
            )
            with contextlib.suppress(Exception):  # Slack itself may be what failed
                await placeholder.replace(text, [section(text)])
