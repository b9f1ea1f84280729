"""Alert webhooks on the real bot: Alertmanager's and Grafana's notifications, through
aiohttp, recorded in real Redis, posted to the Slack simulator and investigated by the graph
on the Gemini simulator."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from bot.process.server import RunningBot
from bot.turn.conversation import RESOLVED_FIRST
from bot.turn.worker import running_worker
from sandbox import GeminiSimulator, Reply
from sandbox.fleet import RedisStackServer
from sandbox.slack import SlackMessage, SlackSimulator
from tests.slack_fixtures import BotFactory, settled

TOKEN = "alert-token-for-tests"
ANSWER = "The errors began when the alert fired; the evidence I have does not show why yet."


def alert(
    name: str = "CheckoutErrors",
    service: str = "checkout",
    severity: str = "critical",
    status: str = "firing",
    fingerprint: str = "",
) -> dict[str, Any]:
    labels = {"alertname": name, "service": service, "severity": severity, "namespace": "shop"}
    return {
        "status": status,
        "labels": labels,
        "annotations": {"summary": f"{service} returns 5xx"},
        "startsAt": "2026-11-30T14:01:00Z",
        "endsAt": "2026-11-30T14:32:00Z" if status == "resolved" else "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus.example/graph?g0.expr=up",
        "fingerprint": fingerprint or f"{name}-{service}",
    }


def notification(
    *alerts: dict[str, Any], key: str = '{}:{alertname="CheckoutErrors"}', status: str = "firing"
) -> dict[str, Any]:
    return {
        "version": "4",
        "groupKey": key,
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "tracegate",
        "groupLabels": {"alertname": "CheckoutErrors"},
        "commonLabels": {"alertname": "CheckoutErrors"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.example",
        "alerts": list(alerts) or [alert()],
    }


async def send(
    bot: RunningBot,
    body: dict[str, Any] | bytes,
    *,
    token: str | None = TOKEN,
    path: str = "/alerts/alertmanager",
    query: str = "",
) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{bot.url}{path}{query}", data=data, headers=headers) as response,
    ):
        text = await response.text()
        return response.status, json.loads(text) if text.startswith("{") else {"text": text}


def posted(slack: SlackSimulator, channel: str) -> list[SlackMessage]:
    """The top-level messages in `channel`."""
    return [m for m in slack.messages.values() if m.channel == channel and m.thread_ts is None]


def answers(slack: SlackSimulator, root: SlackMessage) -> list[SlackMessage]:
    return [m for m in slack.thread(root.channel, root.ts) if m.ts != root.ts]


@pytest.fixture
def channel(slack: SlackSimulator) -> str:
    """A channel of the test's own (the simulator's message stamps repeat between tests,
    and so would thread keys), which the bot is in."""
    name = f"C{uuid.uuid4().hex[:10].upper()}"
    slack.channels.update({name, f"{name}P"})
    return name


@pytest.fixture
async def alerting(bot_for: BotFactory, channel: str) -> AsyncIterator[RunningBot]:
    async with bot_for(alert_webhook_token=TOKEN, alert_channel=channel) as running:
        yield running


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    yield client
    await client.aclose()


async def test_without_a_token_setting_the_alert_routes_do_not_exist(bot: RunningBot) -> None:
    status, _ = await send(bot, notification())
    assert status == 404


async def test_a_missing_or_wrong_token_is_refused_and_records_nothing(
    alerting: RunningBot, redis: aioredis.Redis
) -> None:
    for token in (None, "wrong"):
        status, _ = await send(alerting, notification(), token=token)
        assert status == 401
    prefix = alerting.services.alerts.groups.prefix
    assert await redis.keys(f"{prefix}:alert-group*") == []


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({**notification(), "version": "3"}, "version"),
        ({k: v for k, v in notification().items() if k != "groupKey"}, "groupKey"),
        ({**notification(), "alerts": [{"status": "firing"}]}, "alerts.0.labels"),
        ({**notification(), "status": "exploded"}, "status"),
        (b"[1, 2]", "JSON object"),
        (b"{not json", "not JSON"),
    ],
)
async def test_a_malformed_notification_is_a_400_naming_the_field(
    alerting: RunningBot, body: dict[str, Any] | bytes, named: str
) -> None:
    status, answer = await send(alerting, body)
    assert status == 400 and named in answer["error"], answer


async def test_a_group_is_posted_once_and_investigated_in_its_thread(
    alerting: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    gemini.script(Reply.text(ANSWER))
    investigated = _count("tracegate_alerts_investigated_total", source="alertmanager")
    status, _ = await send(alerting, notification())
    assert status == 200
    await settled(alerting)
    assert _count("tracegate_alerts_investigated_total", source="alertmanager") == investigated + 1
    (message,) = posted(slack, channel)
    shown = json.dumps(message.blocks)
    for part in ("CheckoutErrors", "critical", "checkout returns 5xx", "shop", "2026-11-30 14:01"):
        assert part in shown, part
    assert "http://prometheus.example/graph" in shown
    assert [m.text for m in answers(slack, message)] == [ANSWER]
    # the investigation read the alert: its labels and start time were in the model's input
    sent = json.dumps(gemini.requests[0].body)
    assert "CheckoutErrors" in sent and "service=checkout" in sent and "14:01" in sent


async def test_a_repeated_or_redelivered_notification_starts_nothing_new(
    alerting: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    gemini.script(Reply.text(ANSWER))
    for _ in range(3):  # a repeat_interval repeat, a retried delivery, a second replica
        assert (await send(alerting, notification()))[0] == 200
    await settled(alerting)
    (message,) = posted(slack, channel)
    assert len(answers(slack, message)) == 1
    assert len(gemini.requests) == 1


async def test_an_alert_of_another_service_joining_the_group_starts_a_follow_up(
    alerting: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    gemini.script(
        Reply.text(ANSWER), Reply.text("The second alert has the same start; nothing more to add.")
    )
    await send(alerting, notification(alert()))
    await settled(alerting)
    joined = notification(alert(), alert(service="ledger"))
    await send(alerting, joined)
    await send(alerting, joined)  # the same again: nothing more
    await settled(alerting)
    (message,) = posted(slack, channel)
    assert "2 alerts firing" in json.dumps(message.blocks)
    assert len(answers(slack, message)) == 2
    assert len(gemini.requests) == 2


def _count(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_an_alert_below_the_severities_is_posted_and_not_investigated(
    alerting: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    received = _count("tracegate_alerts_received_total", source="alertmanager", status="firing")
    skipped = _count("tracegate_alerts_skipped_total", reason="severity")
    await send(alerting, notification(alert(severity="warning")))
    await settled(alerting)
    (message,) = posted(slack, channel)
    assert "warning" in json.dumps(message.blocks)
    assert answers(slack, message) == [] and gemini.requests == []
    assert (
        _count("tracegate_alerts_received_total", source="alertmanager", status="firing")
        == received + 1
    )
    assert _count("tracegate_alerts_skipped_total", reason="severity") == skipped + 1


async def test_past_the_hourly_limit_the_thread_says_so_and_no_model_is_called(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    gemini.script(Reply.text(ANSWER))
    async with bot_for(
        alert_webhook_token=TOKEN, alert_channel=channel, auto_investigations_per_hour=1
    ) as bot:
        await send(bot, notification(key="first"))
        await settled(bot)
        await send(bot, notification(alert(name="LedgerErrors"), key="second"))
        await settled(bot)
    first, second = sorted(posted(slack, channel), key=lambda m: float(m.ts))
    assert [m.text for m in answers(slack, first)] == [ANSWER]
    (notice,) = answers(slack, second)
    assert "AUTO_INVESTIGATIONS_PER_HOUR=1" in notice.text
    assert len(gemini.requests) == 1


async def test_resolved_updates_the_message_and_skips_an_investigation_not_started(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    # queue mode and no worker yet: the investigation waits in the queue
    async with bot_for(
        alert_webhook_token=TOKEN, alert_channel=channel, worker_mode="queue"
    ) as bot:
        await send(bot, notification())
        await send(bot, notification(alert(status="resolved"), status="resolved"))
        assert await bot.services.jobs.join(10, turns=False)
        (message,) = posted(slack, channel)
        assert "Resolved at 14:32 UTC" in json.dumps(message.blocks)
        async with running_worker(bot.services.runner, bot.services.conversations.timing):
            deadline = time.monotonic() + 20
            while not answers(slack, message) and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
    assert [m.text for m in answers(slack, message)] == [RESOLVED_FIRST]
    assert gemini.requests == []


async def test_grafana_s_contact_point_is_read_too(
    alerting: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    gemini.script(Reply.text(ANSWER))
    body = {
        **notification(),
        "version": "1",
        "orgId": 1,
        "title": "[FIRING:1] CheckoutErrors",
        "state": "alerting",
        "message": "checkout returns 5xx",
    }
    body["alerts"][0] |= {"dashboardURL": "http://grafana.example/d/abc", "values": {"A": 38}}
    status, _ = await send(alerting, body, path="/alerts/grafana")
    assert status == 200
    await settled(alerting)
    (message,) = posted(slack, channel)
    assert "http://grafana.example/d/abc" in json.dumps(message.blocks)
    assert [m.text for m in answers(slack, message)] == [ANSWER]


async def test_a_receiver_may_name_its_own_channel(
    alerting: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    gemini.script(Reply.text(ANSWER))
    other = f"{channel}P"
    assert (await send(alerting, notification(), query=f"?channel={other}"))[0] == 200
    assert (await send(alerting, notification(key="x"), query="?channel=<!here>"))[0] == 400
    await settled(alerting)
    assert posted(slack, channel) == [] and len(posted(slack, other)) == 1


async def test_a_burst_past_the_redis_pool_waits_for_a_connection_instead_of_failing(
    bot_for: BotFactory, channel: str
) -> None:
    # 150 notifications at once: more commands in flight than redis-py's default pool (100)
    async with bot_for(
        alert_webhook_token=TOKEN,
        alert_channel=channel,
        worker_mode="queue",
        auto_investigate_severities="none",  # recorded and posted; nothing investigated
    ) as bot:
        sent = await asyncio.gather(
            *(send(bot, notification(alert(name=f"Burst{i}"), key=f"k{i}")) for i in range(150))
        )
        assert [status for status, _ in sent] == [200] * 150
        assert await bot.services.jobs.join(60, turns=False)


async def test_a_group_a_dead_process_recorded_but_never_posted_is_finished_by_another(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    from bot.turn.notifications import Notification

    gemini.script(Reply.text(ANSWER))
    async with bot_for(
        alert_webhook_token=TOKEN, alert_channel=channel, reconcile_interval="1s"
    ) as bot:
        groups = bot.services.alerts.groups
        # what the 200 promised, and nothing after it: the receiving process died there
        gid = await groups.record(Notification.model_validate(notification()), channel)
        await groups.redis.zadd(groups.pending_key, {gid: time.time() - 60})  # long pending
        # the reconcile loop (not a job settled() waits for) posts it and records the turn
        deadline = time.monotonic() + 15
        while await groups.stale(0) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        await settled(bot)
    (message,) = posted(slack, channel)
    assert [m.text for m in answers(slack, message)] == [ANSWER]
    assert await groups.stale(0) == []


async def test_two_replicas_receiving_the_same_group_post_and_investigate_it_once(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    gemini.script(Reply.text(ANSWER), Reply.text(ANSWER))
    shared = {
        "alert_webhook_token": TOKEN,
        "alert_channel": channel,
        "redis_prefix": f"test-{uuid.uuid4().hex[:8]}",  # one deployment, two serve pods
    }
    async with bot_for(**shared) as first, bot_for(**shared) as second:
        for _ in range(3):  # Alertmanager's cluster peers each send it, and again
            await asyncio.gather(send(first, notification()), send(second, notification()))
        await settled(first)
        await settled(second)
    (message,) = posted(slack, channel)
    assert [m.text for m in answers(slack, message)] == [ANSWER]
    assert len(gemini.requests) == 1


async def test_a_notification_redis_cannot_record_is_a_503_the_sender_retries(
    bot_for: BotFactory, redis_server: RedisStackServer, slack: SlackSimulator, channel: str
) -> None:
    async with bot_for(
        alert_webhook_token=TOKEN,
        alert_channel=channel,
        redis_url=redis_server.url,
        redis_failover_timeout=1,
        redis_socket_timeout=2,
    ) as bot:
        await redis_server.stop()
        try:
            status, answer = await send(bot, notification())
        finally:
            await redis_server.start()
        assert status == 503 and "send it again" in answer["error"]
        assert (await send(bot, notification()))[0] == 200  # the retry, Redis back
        assert await bot.services.jobs.join(20, turns=False)
    assert len(posted(slack, channel)) == 1


async def test_a_post_whose_answer_slack_lost_is_found_not_posted_again(
    alerting: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, channel: str
) -> None:
    gemini.script(Reply.text(ANSWER))
    slack.drop_after_applying("chat.postMessage")  # posted; the bot never hears so
    await send(alerting, notification())
    assert await alerting.services.jobs.join(20, turns=False)
    assert len(posted(slack, channel)) == 1  # it is in the channel, not in the record
    await send(alerting, notification())  # Alertmanager's next send of the group
    await settled(alerting)
    (message,) = posted(slack, channel)
    assert [m.text for m in answers(slack, message)] == [ANSWER]
