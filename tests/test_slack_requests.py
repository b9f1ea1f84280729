"""Requests the bot cannot or need not act on: malformed bodies, unknown actions and types."""

import json
from urllib.parse import urlencode

import pytest

from bot.server import RunningBot
from sandbox import GeminiSimulator
from sandbox.slack import SlackDriver, SlackSimulator

FORM = "application/x-www-form-urlencoded"


async def _nothing_happened(
    bot: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    assert await bot.services.jobs.join(15)
    assert [c.method for c in slack.calls if c.method != "auth.test"] == []
    assert slack.responses == [] and gemini.requests == []


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ('{"type": "event_callback", "event": {', "application/json"),
        ('["an", "array"]', "application/json"),
        ("payload=" + "%7Bnot-json", FORM),
        (urlencode({"payload": json.dumps([1, 2])}), FORM),
    ],
    ids=["truncated-json", "json-array", "form-payload-not-json", "form-payload-array"],
)
async def test_a_signed_malformed_body_is_a_400_and_nothing_runs(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    body: str,
    content_type: str,
) -> None:
    status, _ = await driver.post(body, content_type)
    assert status == 400
    await _nothing_happened(bot, slack, gemini)


async def test_an_unsigned_malformed_body_is_a_401(bot: RunningBot, driver: SlackDriver) -> None:
    status, _ = await driver.post("{not json", "application/json", secret="not-the-secret")
    assert status == 401


async def test_a_click_on_an_unknown_action_id_is_a_200_and_nothing_is_done(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    status, _ = await driver.click(
        "launch_missiles", "now", user="U_CURIOUS", channel="C1", message_ts="1700000000.000100"
    )
    assert status == 200
    await _nothing_happened(bot, slack, gemini)


async def test_an_unknown_interactivity_type_is_a_200_and_nothing_is_done(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    payload = {"type": "shortcut", "callback_id": "open_sesame", "team": {"id": driver.team}}
    payload |= {"user": {"id": "U_CURIOUS"}, "trigger_id": "t", "token": "legacy"}
    status, _ = await driver.post(urlencode({"payload": json.dumps(payload)}), FORM)
    assert status == 200
    await _nothing_happened(bot, slack, gemini)
