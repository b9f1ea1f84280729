"""Delivery under Slack faults a person causes: a deleted placeholder, a follow-up sent
with a screenshot or also to the channel (in-process bot, the Slack simulator)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from sandbox import GeminiSimulator, Reply
from sandbox.slack import SlackDriver, SlackSimulator
from tests.slack_fixtures import SECRET, BotFactory

ROOT = "1700000000.000100"
ANSWER = "payment-api throws NullPointerException."


async def test_a_deleted_placeholder_gets_the_answer_as_a_new_message(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    """Someone deletes the bot's ':hourglass: Looking into it…' message while it works
    (people tidy incident threads). chat.update then answers `message_not_found`, a
    permanent error: every run fails delivery at once, MAX_ATTEMPTS runs later the turn gives
    up — and its last word is another chat.update of the same deleted message. The answer
    was computed and stored; the thread never sees it, nor any error."""
    gemini.script(Reply(parts=({"text": ANSWER},), delay_s=1.0))
    async with bot_for(progress_interval=3600) as bot:
        driver = SlackDriver(bot.url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}")
        await driver.mention("why?", ts=ROOT)
        deadline = time.monotonic() + 10
        while not slack.thread("C1", ROOT):
            assert time.monotonic() < deadline, "no placeholder"
            await asyncio.sleep(0.02)
        (placeholder,) = slack.thread("C1", ROOT)
        del slack.messages[(placeholder.channel, placeholder.ts)]  # deleted by a human
        assert await bot.services.jobs.join(30)

    texts = [m.text for m in slack.thread("C1", ROOT)]
    assert any(ANSWER in t for t in texts), f"thread after the turn finished: {texts}"


@pytest.mark.parametrize("subtype", ["thread_broadcast", "file_share"])
async def test_a_follow_up_with_a_screenshot_or_also_sent_to_the_channel_is_answered(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator, subtype: str
) -> None:
    """In a thread the bot is in, a reply continues the conversation without a mention —
    unless Slack gives the message a subtype: "Also send to #channel" (thread_broadcast) or
    a pasted Grafana screenshot with the question as its text (file_share). `record_reply`
    drops every subtype as if it were an edit or a join; the question gets 200 and nothing."""
    gemini.script(Reply.text("answer one"), Reply.text("answer two"))
    async with bot_for(progress_interval=3600) as bot:
        driver = SlackDriver(bot.url, SECRET, team=f"TATK{subtype[:4].upper()}", slack=slack)
        await driver.mention("checkout 500s since 14:05, why?", ts=ROOT)
        assert await bot.services.jobs.join(30)
        event = {
            "type": "message",
            "subtype": subtype,
            "user": "U_ONCALL",
            "text": "and why did p99 on /pay jump at 14:07?",
            "ts": "1700000000.000300",
            "channel": "C1",
            "channel_type": "channel",
            "event_ts": "1700000000.000300",
            "thread_ts": ROOT,
            **({"files": [{"id": "F1", "name": "p99.png"}]} if subtype == "file_share" else {}),
        }
        status, _ = await driver.event(event)
        assert status == 200
        assert await bot.services.jobs.join(30)

    assert any("p99 on /pay" in r.text() for r in gemini.requests), (
        f"the follow-up ({subtype}) never reached the model; "
        f"thread: {[m.text for m in slack.thread('C1', ROOT)]}"
    )
