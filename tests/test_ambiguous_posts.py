"""A post whose answer never arrives (Slack applied it, then the connection dropped) is
found by its tag, not posted twice: one placeholder, one answer, one card."""

from __future__ import annotations

import asyncio
import time

from bot.process.server import RunningBot
from sandbox import GeminiSimulator, Reply
from sandbox.slack import SlackDriver, SlackSimulator
from tests.gates_fixtures import REQUESTER, SAFE
from tests.slack_fixtures import settled

ROOT = "1700000000.000100"
ANSWER = "payment-api throws NullPointerException."


async def test_a_placeholder_post_applied_but_unanswered_is_not_posted_twice(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.drop_after_applying("chat.postMessage")
    gemini.script(Reply.text(ANSWER))
    await driver.mention("why?", ts=ROOT)
    await settled(bot, timeout_s=60)

    (message,) = slack.thread("C1", ROOT)  # the placeholder, replaced by the answer
    assert ANSWER in message.text
    assert message.edits > 1  # found at once: it showed the progress, then the answer


async def test_a_card_post_applied_but_unanswered_is_not_posted_twice(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(
        Reply.call(
            "propose_action",
            action="rollout_undo",
            namespace="shop",
            deployment="payment-api",
            reason="5xx started with revision 3 (1.42.0)",
        ),
        SAFE,
        Reply.text("I proposed rolling payment-api back; it needs your approval."),
    )
    await driver.mention("fix checkout", ts=ROOT, user=REQUESTER)
    deadline = time.monotonic() + 10
    while not slack.thread("C1", ROOT):  # the placeholder is posted: the next post is the card
        assert time.monotonic() < deadline, "no placeholder"
        await asyncio.sleep(0.02)
    slack.drop_after_applying("chat.postMessage")
    await settled(bot, timeout_s=60)

    answer, card = slack.thread("C1", ROOT)
    assert "needs your approval" in answer.text
    assert card.text.startswith("Proposed action:")


async def test_an_answer_posted_anew_applied_but_unanswered_is_not_posted_twice(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    # No placeholder can be posted (four 429s outlast the client's three retries); the
    # answer is then posted anew, and Slack's answer to that post is lost.
    slack.rate_limit("chat.postMessage", times=4, retry_after=1)
    slack.drop_after_applying("chat.postMessage")
    gemini.script(Reply.text(ANSWER))
    await driver.mention("why?", ts=ROOT)
    await settled(bot, timeout_s=60)

    (message,) = slack.thread("C1", ROOT)
    assert ANSWER in message.text
    assert message.edits == 0  # posted once, not a placeholder replaced


async def test_a_placeholder_posted_without_its_answer_is_the_one_the_answer_replaces(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    # The placeholder's answer is lost and, right then, Slack rate-limits the look-up (four
    # 429s outlast the client's three retries): the run cannot know its placeholder is there.
    slack.drop_after_applying("chat.postMessage")
    slack.rate_limit("conversations.replies", times=4, retry_after=1)
    gemini.script(Reply.text(ANSWER))
    await driver.mention("why?", ts=ROOT)
    await settled(bot, timeout_s=60)

    (message,) = slack.thread("C1", ROOT)
    assert ANSWER in message.text
    assert message.edits == 1  # the placeholder, found by its tag and replaced
