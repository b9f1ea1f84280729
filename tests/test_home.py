"""The App Home tab, through the real bot and the Slack simulator: what each person sees."""

from slack_sdk.models.views import View

from bot.process.server import RunningBot
from sandbox import GeminiSimulator
from sandbox.slack import SlackDriver, SlackSimulator
from tests.gates_fixtures import APPROVER, OUTSIDER, REQUESTER, SAFE, SECOND_APPROVER
from tests.proposals import ROLLBACK, ROLLBACK_PROPOSED
from tests.slack_fixtures import settled

ROOT = "1700000000.000100"


async def _pending_rollback(bot: RunningBot, driver: SlackDriver, gemini: GeminiSimulator) -> None:
    gemini.script(ROLLBACK, SAFE, ROLLBACK_PROPOSED)
    await driver.mention("fix checkout", ts=ROOT, user=REQUESTER)
    await settled(bot)


def _home_text(slack: SlackSimulator, user: str) -> str:
    view = slack.homes[user]
    return "\n".join(str(b.get("text", {}).get("text", "")) for b in view["blocks"])


async def test_an_approver_in_the_channel_sees_what_waits_for_them_with_a_link_to_the_card(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.members["C1"] = {APPROVER, REQUESTER}
    await _pending_rollback(bot, driver, gemini)

    await driver.home_opened(APPROVER)
    await settled(bot)

    text = _home_text(slack, APPROVER)
    waiting = text.split("*Waiting for your approval*")[1].split("*Circuit breakers*")[0]
    assert "roll back shop/payment-api" in waiting and "<#C1>" in waiting
    assert "|its card>" in waiting  # its permalink: acting happens on the card
    View(**slack.homes[APPROVER]).validate_json()  # slack_sdk's own model accepts it


async def test_someone_who_may_not_approve_is_not_offered_the_approval(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.members["C1"] = {APPROVER, REQUESTER}
    await _pending_rollback(bot, driver, gemini)

    await driver.home_opened(REQUESTER)  # asked for it; may not approve it
    await settled(bot)

    waiting = _home_text(slack, REQUESTER).split("*Circuit breakers*")[0]
    assert "payment-api" not in waiting and "_Nothing._" in waiting


async def test_a_person_outside_the_channel_sees_nothing_of_its_threads(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.members["C1"] = {APPROVER, REQUESTER}
    await _pending_rollback(bot, driver, gemini)
    (answer, _card) = slack.thread("C1", ROOT)
    (block,) = [b for b in answer.blocks if b["type"] == "context_actions"]
    bad = block["elements"][0]["negative_button"]["value"]
    await driver.feedback(bad, user=APPROVER, channel="C1", message_ts=answer.ts)
    await settled(bot)

    await driver.home_opened(APPROVER)
    await driver.home_opened(OUTSIDER)
    await settled(bot)

    outsider = _home_text(slack, OUTSIDER)
    assert "C1" not in outsider and "payment-api" not in outsider
    assert "<#C1>" in _home_text(slack, APPROVER).split("*Answers marked wrong*")[1]


async def test_an_approver_outside_the_channel_is_not_shown_its_approvals(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.members["C1"] = {APPROVER, REQUESTER}  # SECOND_APPROVER is not in C1
    await _pending_rollback(bot, driver, gemini)

    await driver.home_opened(SECOND_APPROVER)
    await settled(bot)

    text = _home_text(slack, SECOND_APPROVER)
    assert "payment-api" not in text and "C1" not in text


async def test_a_channel_on_the_second_page_of_someone_s_channels_counts(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    """users.conversations answers 200 channels a page: C1, after 250 others, is on the
    second, which slack_sdk's pagination reads."""
    slack.members["C1"] = {APPROVER, REQUESTER}
    for n in range(250):
        slack.members[f"C0{n:04d}"] = {APPROVER}
    await _pending_rollback(bot, driver, gemini)

    await driver.home_opened(APPROVER)
    await settled(bot)

    waiting = _home_text(slack, APPROVER).split("*Circuit breakers*")[0]
    assert "roll back shop/payment-api" in waiting
    assert len(slack.calls_to("users.conversations")) == 2
