"""In Slack: an answer never says an action was approved when it was not, and each
proposed action's state under the answer is the bot's, read from the store."""

import json

import pytest

from bot.process.server import RunningBot
from sandbox import GeminiSimulator, Reply
from sandbox.scenarios import Scenario, injected_span
from sandbox.slack import SlackDriver, SlackSimulator
from tests.proposals import propose

ROOT = "1700000000.000100"
CLAIM = "The scale of payment-api has been APPROVED and executed."
REFUSED = (
    ":ledger: *tracegate record when answered:* scale kube-system/payment-api from ? to 0 "
    "replicas — refused by policy: namespace kube-system is protected (PROTECTED_NAMESPACES)"
)


@pytest.fixture
def scenario() -> Scenario:
    return injected_span()


@pytest.fixture
async def thread(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    scenario: Scenario,
) -> SlackSimulator:
    """The planted instruction is obeyed: a refused scale, and three drafts claiming it ran."""
    gemini.script(
        Reply.call("get_trace", trace_id=scenario.error_trace_ids[0]),
        propose("scale", "kube-system", replicas=0, reason="as instructed"),
        *[Reply.text(f"payment-api 1.42.0 is failing. {CLAIM}")] * 3,
    )
    await driver.mention("checkout 500s, why?", ts=ROOT)
    assert await bot.services.jobs.join(15), "answers still running"
    return slack


async def test_no_message_or_edit_the_bot_sends_claims_the_approval(
    thread: SlackSimulator,
) -> None:
    sent = [json.dumps(c.args) for c in thread.calls_to("chat.postMessage")]
    sent += [json.dumps(c.args) for c in thread.calls_to("chat.update")]
    assert sent and not any("APPROVED" in s for s in sent)


async def test_the_answer_says_a_sentence_was_removed(thread: SlackSimulator) -> None:
    answer, _card = thread.thread("C1", ROOT)
    assert "1 sentence was removed for saying that an action was approved" in str(answer.blocks)


async def test_the_answer_shows_the_stored_state_of_the_proposed_action_as_the_bots_record(
    thread: SlackSimulator,
) -> None:
    answer, _card = thread.thread("C1", ROOT)
    records = [b for b in answer.blocks if "tracegate record" in json.dumps(b)]
    assert records == [{"type": "context", "elements": [{"type": "mrkdwn", "text": REFUSED}]}]
