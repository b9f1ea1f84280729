"""Requests the bot cannot or need not act on: malformed bodies, unknown actions and types."""

import json
import time
from urllib.parse import urlencode

import aiohttp
import pytest

from bot.process.metrics import EVENTS_RECEIVED
from bot.process.server import RunningBot
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
        ('{"type": "event_callback", "event": "app_mention"}', "application/json"),
        ('{"type": "event_callback", "event": null}', "application/json"),
        ('{"type": "event_callback", "authorizations": {"a": 1}, "event": {}}', "application/json"),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "application/json"),
    ],
    ids=[
        "truncated-json",
        "json-array",
        "form-payload-not-json",
        "form-payload-array",
        "event-a-string",
        "event-null",
        "authorizations-an-object",
        "nested-deeper-than-python-recurses",
    ],
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


async def test_a_timestamp_that_is_not_a_number_is_a_401(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    mention = {"type": "app_mention", "user": "U1", "text": "<@UBOT> why?", "channel": "C1"}
    body = json.dumps(driver.envelope({**mention, "ts": "1700000000.000100"}))

    status, _ = await driver.post(
        body, "application/json", headers={"X-Slack-Request-Timestamp": "abc"}
    )

    assert status == 401
    await _nothing_happened(bot, slack, gemini)


async def test_a_body_that_is_not_utf8_is_a_401(bot: RunningBot) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{bot.url}/slack/events",
            data=b'{"type": "event_callback", "x": "\xff\xfe"}',
            headers={
                "Content-Type": "application/json",
                "X-Slack-Request-Timestamp": str(int(time.time())),
                "X-Slack-Signature": "v0=" + "0" * 64,
            },
        ) as response,
    ):
        assert response.status == 401


@pytest.mark.parametrize(
    "fields",
    [
        {"channel": {"id": "C1"}},
        {"ts": "1e3"},
        {"thread_ts": 5},
        {"text": 5},
        {"user": "U\udcff"},
        {"channel": None},
        {"team_id": {"id": "T1"}},
    ],
    ids=[
        "channel-an-object",
        "ts-not-a-ts",
        "thread-ts-a-number",
        "text-a-number",
        "user-a-lone-surrogate",
        "no-channel",
        "team-an-object",
    ],
)
async def test_a_signed_mention_with_malformed_fields_is_acknowledged_and_nothing_runs(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    fields: dict[str, object],
) -> None:
    mention = {"type": "app_mention", "user": "U1", "text": "<@UBOT> why?", "channel": "C1"}
    team = fields.pop("team_id", None)  # the envelope's field, not the event's
    envelope = driver.envelope({**mention, "ts": "1700000000.000100", **fields})
    if team is not None:
        envelope["team_id"] = team

    status, _ = await driver.post(json.dumps(envelope), "application/json")

    assert status == 200  # Slack sending it again would not make it well formed
    await _nothing_happened(bot, slack, gemini)
    assert await bot.services.turns.unfinished_count() == 0


async def test_every_request_to_the_slack_path_is_counted_and_only_post_is_served(
    bot: RunningBot,
) -> None:
    before = EVENTS_RECEIVED._value.get()
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{bot.url}/slack/events") as response,
    ):
        status = response.status

    assert status == 405
    assert EVENTS_RECEIVED._value.get() == before + 1


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
