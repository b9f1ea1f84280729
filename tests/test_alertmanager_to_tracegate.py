"""A real Alertmanager (Debian's 0.25, tests/alertmanager_fixtures.py) sending its webhook
to the real bot: alerts posted to Alertmanager's API become one Slack message and one
investigation per group, in the alert's thread."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from bot.process.server import RunningBot
from sandbox import GeminiSimulator, Reply
from sandbox.alertmanager import alert
from sandbox.fleet import RedisStackServer
from sandbox.prometheus_server import AlertRule, MetricsTarget
from sandbox.slack import SlackMessage, SlackSimulator
from tests.alertmanager_fixtures import StartAlertmanager, StartPrometheus
from tests.slack_fixtures import BotFactory, settled

TOKEN = "alertmanager-shares-this-token"
ANSWER = "The errors began when the alert fired; the evidence does not show why yet."


@pytest.fixture
def channel(slack: SlackSimulator) -> str:
    name = f"C{uuid.uuid4().hex[:10].upper()}"
    slack.channels.add(name)
    return name


def posted(slack: SlackSimulator, channel: str) -> list[SlackMessage]:
    found = [m for m in slack.messages.values() if m.channel == channel and m.thread_ts is None]
    return sorted(found, key=lambda m: float(m.ts))


def replies(slack: SlackSimulator, root: SlackMessage) -> list[SlackMessage]:
    return [m for m in slack.thread(root.channel, root.ts) if m.ts != root.ts]


async def until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {what}"
        await asyncio.sleep(0.05)


def webhook(bot: RunningBot) -> str:
    return f"{bot.url}/alerts/alertmanager"


async def test_two_groups_become_two_messages_and_two_investigations(
    bot_for: BotFactory,
    alertmanager_for: StartAlertmanager,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    channel: str,
) -> None:
    gemini.script(Reply.text(ANSWER), Reply.text(ANSWER))
    async with bot_for(alert_webhook_token=TOKEN, alert_channel=channel) as bot:
        am = await alertmanager_for(webhook(bot), TOKEN, group_wait=0.5)
        await am.post_alerts(
            [
                alert("CheckoutErrors", labels={"service": "checkout", "severity": "critical"}),
                alert("LedgerLatency", labels={"service": "ledger", "severity": "critical"}),
            ]
        )
        await until(lambda: len(posted(slack, channel)) == 2, 15, "two alert messages")
        await settled(bot, 30)
    first, second = posted(slack, channel)
    names = {json.dumps(m.blocks).split("*")[1] for m in (first, second)}
    assert names == {"CheckoutErrors", "LedgerLatency"}
    assert [m.text for m in replies(slack, first)] == [ANSWER]
    assert [m.text for m in replies(slack, second)] == [ANSWER]
    assert len(gemini.requests) == 2


async def test_a_repeated_notification_of_an_unchanged_group_starts_nothing_new(
    bot_for: BotFactory,
    alertmanager_for: StartAlertmanager,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    channel: str,
) -> None:
    gemini.script(Reply.text(ANSWER))
    async with bot_for(alert_webhook_token=TOKEN, alert_channel=channel) as bot:
        groups = bot.services.alerts.groups
        am = await alertmanager_for(
            webhook(bot), TOKEN, group_wait=0.5, group_interval=1, repeat_interval=1
        )
        await am.post_alerts([alert("CheckoutErrors", labels={"service": "checkout"})])
        await until(lambda: len(posted(slack, channel)) == 1, 15, "the alert message")
        (root,) = posted(slack, channel)
        # Alertmanager re-sends the unchanged group every repeat_interval: wait for two more
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            state = await groups.get(_only_group(await _groups(bot)))
            if int(state.get("version") or 0) >= 3:
                break
            await asyncio.sleep(0.1)
        assert int(state.get("version") or 0) >= 3, state
        await settled(bot, 30)
    assert len(posted(slack, channel)) == 1
    assert [m.text for m in replies(slack, root)] == [ANSWER]
    assert len(gemini.requests) == 1


async def _groups(bot: RunningBot) -> list[str]:
    groups = bot.services.alerts.groups
    keys = await groups.redis.keys(f"{groups.prefix}:alert-group:*")
    return [k.decode().rsplit(":", 1)[1] for k in keys if not k.endswith(b":lock")]


def _only_group(found: list[str]) -> str:
    assert len(found) == 1, found
    return found[0]


async def test_a_resolved_group_says_so_in_its_message(
    bot_for: BotFactory,
    alertmanager_for: StartAlertmanager,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    channel: str,
) -> None:
    gemini.script(Reply.text(ANSWER))
    began = datetime.now(UTC) - timedelta(minutes=5)
    firing = [alert("CheckoutErrors", labels={"service": "checkout"}, starts_at=began)]
    async with bot_for(alert_webhook_token=TOKEN, alert_channel=channel) as bot:
        am = await alertmanager_for(webhook(bot), TOKEN, group_wait=0.5, group_interval=1)
        await am.post_alerts(firing)
        await until(lambda: len(posted(slack, channel)) == 1, 15, "the alert message")
        await settled(bot, 30)
        await am.resolve(firing)
        (root,) = posted(slack, channel)
        await until(lambda: "Resolved at" in json.dumps(root.blocks), 15, "Resolved at")
        await settled(bot, 30)
    assert ":white_check_mark:" in json.dumps(root.blocks)
    assert len(gemini.requests) == 1  # resolving investigates nothing


async def test_a_storm_of_40_alerts_in_4_groups_is_4_investigations(
    bot_for: BotFactory,
    alertmanager_for: StartAlertmanager,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    channel: str,
) -> None:
    gemini.script(*[Reply.text(ANSWER)] * 4)
    storm = [
        alert(name, labels={"service": "checkout", "pod": f"checkout-{i}", "severity": "critical"})
        for name in ("CheckoutErrors", "CheckoutLatency", "PodRestarts", "ProbeFailures")
        for i in range(10)
    ]
    async with bot_for(alert_webhook_token=TOKEN, alert_channel=channel) as bot:
        am = await alertmanager_for(webhook(bot), TOKEN, group_wait=1)
        await am.post_alerts(storm)
        await until(lambda: len(posted(slack, channel)) == 4, 20, "four alert messages")
        await settled(bot, 60)
    messages = posted(slack, channel)
    assert all("10 alerts firing" in json.dumps(m.blocks) for m in messages)
    assert [len(replies(slack, m)) for m in messages] == [1, 1, 1, 1]
    assert len(gemini.requests) == 4


async def test_a_wrong_token_is_refused_and_nothing_is_posted(
    bot_for: BotFactory,
    alertmanager_for: StartAlertmanager,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    channel: str,
) -> None:
    async with bot_for(alert_webhook_token=TOKEN, alert_channel=channel) as bot:
        am = await alertmanager_for(webhook(bot), "not-the-token", group_wait=0.5)
        await am.post_alerts([alert("CheckoutErrors", labels={"service": "checkout"})])
        await asyncio.sleep(2)  # the first delivery (and its 401) has happened
        assert "401" in am.log() or "unexpected status code" in am.log(), am.log()[-2000:]
        assert await _groups(bot) == []
    assert posted(slack, channel) == [] and gemini.requests == []


async def test_a_prometheus_rule_that_fires_is_investigated_before_anyone_asks(
    bot_for: BotFactory,
    alertmanager_for: StartAlertmanager,
    prometheus_for: StartPrometheus,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    channel: str,
) -> None:
    """The whole path, real parts: a real Prometheus evaluates a rule on a series the test
    serves, a real Alertmanager groups it and calls the webhook, the bot investigates."""
    gemini.script(Reply.text(ANSWER))
    async with (
        bot_for(alert_webhook_token=TOKEN, alert_channel=channel) as bot,
        MetricsTarget() as target,
    ):
        target.set("checkout_error_ratio", 0.5, {"service": "checkout"})
        rule = AlertRule(
            "CheckoutErrors",
            "checkout_error_ratio > 0.1",
            labels={"severity": "critical"},
            annotations={"summary": "{{ $labels.service }} fails {{ $value }} of requests"},
        )
        am = await alertmanager_for(webhook(bot), TOKEN, group_wait=0.5)
        await prometheus_for(am.url, [target.address], [rule])
        # Prometheus hands new targets to its scrapers at most every 5 s
        await until(lambda: len(posted(slack, channel)) == 1, 30, "the alert message")
        await settled(bot, 30)
    (message,) = posted(slack, channel)
    assert "checkout fails 0.5 of requests" in json.dumps(message.blocks)
    assert [m.text for m in replies(slack, message)] == [ANSWER]
    assert "CheckoutErrors" in json.dumps(gemini.requests[0].body)


async def test_a_notification_refused_while_redis_was_down_is_redelivered_and_posted_once(
    bot_for: BotFactory,
    alertmanager_for: StartAlertmanager,
    redis_server: RedisStackServer,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    channel: str,
) -> None:
    gemini.script(Reply.text(ANSWER))
    async with bot_for(
        alert_webhook_token=TOKEN,
        alert_channel=channel,
        redis_url=redis_server.url,
        redis_failover_timeout=1,
        redis_socket_timeout=1,
    ) as bot:
        am = await alertmanager_for(webhook(bot), TOKEN, group_wait=0.5, group_interval=1)
        await redis_server.stop()
        try:
            await am.post_alerts([alert("CheckoutErrors", labels={"service": "checkout"})])
            await until(lambda: "503" in am.log(), 20, "a delivery refused with 503")
        finally:
            await redis_server.start()
        await until(lambda: len(posted(slack, channel)) == 1, 30, "the alert message")
        await settled(bot, 30)
        await asyncio.sleep(2)  # Alertmanager's retries after the 200 would show by now
    (message,) = posted(slack, channel)
    assert [m.text for m in replies(slack, message)] == [ANSWER]
    assert len(gemini.requests) == 1
