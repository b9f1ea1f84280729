"""Alerts another app posts in an AUTO_INVESTIGATE_CHANNELS channel (Alertmanager's,
Grafana's and PagerDuty's Slack integrations) start an investigation in their thread;
people's messages, resolved alerts and other channels do not."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.process.server import RunningBot
from sandbox import GeminiSimulator, Reply
from sandbox.slack import SlackDriver, SlackSimulator
from tests.slack_fixtures import SECRET, BotFactory, settled

ANSWER = "The errors began when the alert fired; the evidence does not show why yet."
AM_TITLE = "[FIRING:1] CheckoutErrors (checkout critical)"


@pytest.fixture
def channel() -> str:
    return f"C{uuid.uuid4().hex[:10].upper()}"


@pytest.fixture
async def watching(bot_for: BotFactory, channel: str) -> AsyncIterator[RunningBot]:
    async with bot_for(auto_investigate_channels=f"{channel},COTHER") as running:
        yield running


def driver_for(bot: RunningBot, slack: SlackSimulator) -> SlackDriver:
    return SlackDriver(bot.url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}", slack=slack)


async def post(
    bot: RunningBot,
    slack: SlackSimulator,
    channel: str,
    text: str,
    *,
    app: str | None = "alertmanager",
    attachments: list[dict[str, Any]] | None = None,
    thread_ts: str | None = None,
) -> str:
    """A message posted in `channel` by an app (or, app=None, a person), delivered as Slack
    delivers it; its ts."""
    message = slack.post_as(
        channel, text, app=app, user="" if app else "U_ONCALL", attachments=attachments,
        thread_ts=thread_ts,
    )  # fmt: skip
    event: dict[str, Any] = {
        "type": "message",
        "text": text,
        "ts": message.ts,
        "channel": channel,
        "channel_type": "channel",
        "event_ts": message.ts,
        **({"thread_ts": thread_ts} if thread_ts else {}),
    }
    if app:
        event |= {"subtype": "bot_message", "bot_id": message.bot_id, "username": app}
        if attachments:
            event["attachments"] = attachments
    else:
        event["user"] = "U_ONCALL"
    status, _ = await driver_for(bot, slack).event(event)
    assert status == 200
    return message.ts


def am_attachment(title: str = AM_TITLE) -> list[dict[str, Any]]:
    return [
        {
            "title": title,
            "text": (
                "*Alert:* checkout returns 5xx\n• *severity:* `critical`\n• *service:* `checkout`"
            ),
            "fallback": f"{title} | http://alertmanager.example",
        }
    ]


def thread_replies(slack: SlackSimulator, channel: str, ts: str) -> list[str]:
    return [m.text for m in slack.thread(channel, ts) if m.ts != ts and m.user != "U_ONCALL"]


async def test_an_alert_alertmanager_posted_is_investigated_in_its_thread(
    watching: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    gemini.script(Reply.text(ANSWER))
    ts = await post(watching, slack, channel, "", attachments=am_attachment())
    await settled(watching)
    assert thread_replies(slack, channel, ts) == [ANSWER]
    assert "CheckoutErrors" in str(gemini.requests[0].body)


async def test_slack_delivering_the_alert_twice_investigates_and_counts_it_once(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    gemini.script(Reply.text(ANSWER))
    async with bot_for(auto_investigate_channels=channel, auto_investigations_per_hour=1) as bot:
        await _delivered_twice(bot, slack, channel)
    # counted once too: a second count would be past the limit of 1 and say so in the thread
    (root,) = [m for m in slack.others.values() if m.channel == channel]
    assert thread_replies(slack, channel, root.ts) == [ANSWER]
    assert len(gemini.requests) == 1


async def _delivered_twice(watching: RunningBot, slack: SlackSimulator, channel: str) -> None:
    message = slack.post_as(channel, "", app="alertmanager", attachments=am_attachment())
    event = {
        "type": "message",
        "subtype": "bot_message",
        "bot_id": message.bot_id,
        "text": "",
        "attachments": am_attachment(),
        "ts": message.ts,
        "channel": channel,
        "event_ts": message.ts,
    }
    driver = driver_for(watching, slack)
    await driver.event(event, event_id="Ev1")
    await driver.event(event, event_id="Ev1", retry=1)
    await settled(watching)


async def test_a_person_posting_the_same_text_is_not_investigated(
    watching: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    await post(watching, slack, channel, AM_TITLE, app=None)
    await settled(watching)
    assert gemini.requests == []


async def test_a_resolved_alert_starts_nothing(
    watching: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    resolved = am_attachment("[RESOLVED] CheckoutErrors (checkout critical)")
    ts = await post(watching, slack, channel, "", attachments=resolved)
    await settled(watching)
    assert thread_replies(slack, channel, ts) == [] and gemini.requests == []


async def test_an_alert_in_a_channel_not_watched_starts_nothing(
    watching: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    await post(watching, slack, "CNOTWATCHED", "", attachments=am_attachment())
    await settled(watching)
    assert gemini.requests == []


async def test_grafana_and_pagerduty_posts_are_read_too(
    watching: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    gemini.script(Reply.text(ANSWER), Reply.text(ANSWER))
    grafana = (
        "**Firing**\n\nValue: A=38\nLabels:\n - alertname = CheckoutErrors\n - severity = critical"
    )
    ts_grafana = await post(watching, slack, channel, grafana, app="grafana")
    pagerduty = "Triggered #1234: High error rate on checkout"
    ts_pd = await post(watching, slack, channel, pagerduty, app="PagerDuty")
    acknowledged = await post(watching, slack, channel, "Acknowledged #1234", app="PagerDuty")
    await settled(watching)
    assert thread_replies(slack, channel, ts_grafana) == [ANSWER]
    assert thread_replies(slack, channel, ts_pd) == [ANSWER]
    assert thread_replies(slack, channel, acknowledged) == []
    assert len(gemini.requests) == 2


async def test_an_alert_below_the_severities_is_not_investigated(
    watching: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    warning = [
        {
            "title": "[FIRING:1] DiskFilling (node warning)",
            "text": "• *severity:* `warning`\n• *service:* `node`",
        }
    ]
    await post(watching, slack, channel, "", attachments=warning)
    await settled(watching)
    assert gemini.requests == []
