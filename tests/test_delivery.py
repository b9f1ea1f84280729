"""Delivery apart from investigation: Slack failing at each step never loses or overwrites
the answer (Slack's 429 with Retry-After, from the Slack simulator)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from bot.process.server import RunningBot
from sandbox import GeminiSimulator, Reply
from sandbox.slack import SlackDriver, SlackSimulator
from tests.gates_fixtures import REQUESTER, SAFE
from tests.proposals import ROLLBACK, ROLLBACK_PROPOSED
from tests.slack_fixtures import BotFactory, settled

ROOT = "1700000000.000100"
ANSWER = "payment-api throws NullPointerException."


async def test_a_placeholder_slack_refuses_8_times_still_ends_in_one_answer(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.rate_limit("chat.postMessage", times=8, retry_after=1)
    gemini.script(Reply.text(ANSWER))
    await driver.mention("why?", ts=ROOT)
    await settled(bot, 60)

    (message,) = slack.thread("C1", ROOT)
    assert ANSWER in message.text


async def test_a_429_storm_on_the_answer_edit_delays_the_answer_but_does_not_lose_it(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply(parts=({"text": ANSWER},), delay_s=0.3))
    async with bot_for(progress_interval=3600) as bot:  # no progress edits: the 429s hit the answer
        driver = SlackDriver(
            bot.url, "sandbox-signing-secret", team=f"T{uuid.uuid4().hex[:8].upper()}"
        )
        await driver.mention("why?", ts=ROOT)
        await gemini.wait_for_request("gemini-3.8-flash")
        slack.rate_limit("chat.update", times=6, retry_after=1)
        await settled(bot, 60)

    (message,) = slack.thread("C1", ROOT)
    assert ANSWER in message.text and "went wrong" not in message.text


@pytest.mark.parametrize("refusals", [2, 8])
async def test_a_card_slack_refuses_never_overwrites_the_posted_answer(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    refusals: int,
) -> None:
    gemini.script(ROLLBACK, SAFE, ROLLBACK_PROPOSED)
    await driver.mention("fix checkout", ts=ROOT, user=REQUESTER)
    await gemini.wait_for_request("gemini-3.8-flash")
    # The placeholder is posted by now; the next postMessage calls are the card's.
    await _wait_for_placeholder(slack)
    slack.rate_limit("chat.postMessage", times=refusals, retry_after=1)
    await settled(bot, 60)

    answer, card = slack.thread("C1", ROOT)
    assert "needs your approval" in answer.text and "went wrong" not in answer.text
    assert card.text.startswith("Proposed action:")


async def _wait_for_placeholder(slack: SlackSimulator) -> None:
    deadline = time.monotonic() + 10
    while not slack.thread("C1", ROOT):
        assert time.monotonic() < deadline, "no placeholder"
        await asyncio.sleep(0.02)
