"""The Alertmanager harness (sandbox/alertmanager.py) against a real Alertmanager 0.25 and a
tiny webhook receiver (tests/alertmanager_fixtures.py, not tracegate): what the product's
webhook route can count on — grouping, payload version 4, the bearer token, retries,
resolution.

Each test starts its own Alertmanager on its own loopback port (group_wait 1s,
group_interval 2s unless it says otherwise) and stops it at teardown; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import time
from datetime import datetime
from pathlib import Path

import yaml

import sandbox.alertmanager
from sandbox.alertmanager import Alertmanager, alert, config_yaml, duration
from tests.alertmanager_fixtures import (
    Notification,
    StartAlertmanager,
    WebhookReceiver,
    started_receiver,
)

TOKEN = "alert-webhook-token"
ZERO_TIME = "0001-01-01T00:00:00Z"  # endsAt of a firing alert in a notification


def fingerprints(notification: Notification) -> list[str]:
    return sorted(a["fingerprint"] for a in notification.body["alerts"])


def one_tick_apart(first: Notification, then: Notification) -> bool:
    """Sent at the group's next group_interval (2s) tick: not within the flush, not two later."""
    return 1.5 < then.at - first.at < 3.5


def test_the_config_is_the_one_its_docstring_shows() -> None:
    """The module docstring is what docs/alerts.md copies: it must be what is run."""
    shown = sandbox.alertmanager.__doc__ or ""
    shown = shown.split("```yaml\n", 1)[1].split("```", 1)[0]
    written = config_yaml("http://127.0.0.1:8080/alerts/alertmanager", "<ALERT_WEBHOOK_TOKEN>")
    assert written == shown
    config = yaml.safe_load(written)
    assert config["route"] == {
        "receiver": "tracegate",
        "group_by": ["alertname"],
        "group_wait": "1s",
        "group_interval": "2s",
        "repeat_interval": "1h",
    }
    [receiver] = config["receivers"]
    assert receiver["webhook_configs"] == [
        {
            "url": "http://127.0.0.1:8080/alerts/alertmanager",
            "send_resolved": True,
            "max_alerts": 0,
            "http_config": {
                "authorization": {"type": "Bearer", "credentials": "<ALERT_WEBHOOK_TOKEN>"}
            },
        }
    ]


def test_the_config_quotes_what_it_is_given() -> None:
    text = config_yaml("http://127.0.0.1:1/x", 'to"ken: #1', group_by=["a", "..."])
    config = yaml.safe_load(text)
    assert config["route"]["group_by"] == ["a", "..."]
    [webhook] = config["receivers"][0]["webhook_configs"]
    assert webhook["http_config"]["authorization"]["credentials"] == 'to"ken: #1'
    anonymous = yaml.safe_load(config_yaml("http://127.0.0.1:1/", None))
    assert "http_config" not in anonymous["receivers"][0]["webhook_configs"][0]
    durations = [duration(0.5), duration(2), duration(1.25), duration(300), duration(3600)]
    assert durations == ["500ms", "2s", "1250ms", "5m", "1h"]
    assert duration("90s") == "90s"


async def test_two_groups_are_two_notifications_of_version_4_with_the_token(
    alertmanager_for: StartAlertmanager, webhook_receiver: WebhookReceiver
) -> None:
    am = await alertmanager_for(webhook_receiver.url, TOKEN)
    checkout = alert(
        "CheckoutErrors",
        labels={"service": "checkout", "severity": "critical"},
        annotations={"summary": "checkout returns 5xx"},
    )
    payment = alert("PaymentLatency", labels={"service": "payment-api"})
    posted = time.monotonic()
    await am.post_alerts([checkout, payment])

    notifications = await webhook_receiver.received(2)
    # Both groups wait group_wait (1s) from their first alert, not less.
    assert all(n.at - posted >= 0.9 for n in notifications)
    by_name = {n.body["groupLabels"]["alertname"]: n for n in notifications}
    assert set(by_name) == {"CheckoutErrors", "PaymentLatency"}
    assert len({n.body["groupKey"] for n in notifications}) == 2
    for n in notifications:
        assert n.authorization == f"Bearer {TOKEN}"
        assert n.body["version"] == "4"
        assert n.body["status"] == "firing"
        assert n.body["receiver"] == "tracegate"
        assert n.body["externalURL"] == am.url
        assert n.body["truncatedAlerts"] == 0
        assert len(n.body["alerts"]) == 1
    body = by_name["CheckoutErrors"].body
    assert body["groupKey"] == '{}:{alertname="CheckoutErrors"}'
    assert body["commonLabels"] == checkout["labels"]
    assert body["commonAnnotations"] == {"summary": "checkout returns 5xx"}
    [sent] = body["alerts"]
    assert sent["status"] == "firing"
    assert sent["labels"] == checkout["labels"]
    assert _instant(sent["startsAt"]) == _instant(checkout["startsAt"])  # (.23Z is .230Z)
    assert sent["endsAt"] == ZERO_TIME
    assert sent["generatorURL"] == checkout["generatorURL"]
    assert sent["fingerprint"]
    # An unchanged group is not sent again before repeat_interval (1h), whatever
    # group_interval (2s) ticks by.
    await webhook_receiver.nothing_more(2, for_s=2.5)


async def test_a_500_gets_the_same_notification_again(
    alertmanager_for: StartAlertmanager,
) -> None:
    receiver = await started_receiver(statuses=[500])
    try:
        am = await alertmanager_for(receiver.url, TOKEN)
        await am.post_alerts([alert("CheckoutErrors"), alert("CheckoutErrors", labels={"x": "1"})])
        first, again = await receiver.received(2, timeout_s=10)
        assert (first.answered, again.answered) == (500, 200)
        assert again.body["groupKey"] == first.body["groupKey"]
        assert fingerprints(again) == fingerprints(first) and len(fingerprints(first)) == 2
        assert again.authorization == f"Bearer {TOKEN}"
        # Retried within the same flush, with backoff: well before the next group_interval
        # tick (2s) and Alertmanager's 10s bound on one flush.
        assert 0.05 < again.at - first.at < 2.5, again.at - first.at
        assert "unexpected status code 500" in am.log()
        await receiver.nothing_more(2, for_s=1.0)
    finally:
        await receiver.stop()


async def test_a_resolved_alert_is_a_resolved_notification_of_the_same_group(
    alertmanager_for: StartAlertmanager, webhook_receiver: WebhookReceiver
) -> None:
    am = await alertmanager_for(webhook_receiver.url, TOKEN)
    firing = alert("CheckoutErrors", labels={"service": "checkout"})
    await am.post_alerts([firing])
    [fired] = await webhook_receiver.received(1)
    await am.resolve([firing])
    _, resolution = await webhook_receiver.received(2)
    assert resolution.body["status"] == "resolved"
    assert resolution.body["groupKey"] == fired.body["groupKey"]
    assert resolution.authorization == f"Bearer {TOKEN}"
    [sent] = resolution.body["alerts"]
    assert sent["status"] == "resolved"
    assert sent["fingerprint"] == fired.body["alerts"][0]["fingerprint"]
    # the same instant: Go writes fractions without their trailing zeros (.23Z for .230Z)
    assert _instant(sent["startsAt"]) == _instant(firing["startsAt"])
    assert sent["endsAt"] != ZERO_TIME
    assert one_tick_apart(fired, resolution), resolution.at - fired.at
    assert await am.alerts() == []


async def test_forty_alerts_in_four_groups_are_four_notifications_of_ten(
    alertmanager_for: StartAlertmanager, webhook_receiver: WebhookReceiver
) -> None:
    am = await alertmanager_for(webhook_receiver.url, TOKEN)
    alerts = [
        alert(f"Group{g}", labels={"instance": f"pod-{g}-{i}"}) for g in range(4) for i in range(10)
    ]
    await am.post_alerts(alerts)
    notifications = await webhook_receiver.received(4)
    assert sorted(n.body["groupLabels"]["alertname"] for n in notifications) == [
        "Group0",
        "Group1",
        "Group2",
        "Group3",
    ]
    for n in notifications:
        assert len(n.body["alerts"]) == 10
        assert n.body["truncatedAlerts"] == 0
        name = n.body["groupLabels"]["alertname"]
        assert {a["labels"]["alertname"] for a in n.body["alerts"]} == {name}
    await webhook_receiver.nothing_more(4, for_s=1.0)


async def test_an_alert_joining_a_group_resends_the_group_at_group_interval(
    alertmanager_for: StartAlertmanager, webhook_receiver: WebhookReceiver
) -> None:
    """Alerts posted apart within group_wait are one notification; one that joins later makes
    the next notification of the same groupKey carry the whole group."""
    am = await alertmanager_for(webhook_receiver.url, TOKEN)
    await am.post_alerts([alert("CheckoutErrors", labels={"pod": "a"})])
    await asyncio.sleep(0.3)
    await am.post_alerts([alert("CheckoutErrors", labels={"pod": "b"})])
    [first] = await webhook_receiver.received(1)
    assert sorted(a["labels"]["pod"] for a in first.body["alerts"]) == ["a", "b"]
    await am.post_alerts([alert("CheckoutErrors", labels={"pod": "c"})])
    _, second = await webhook_receiver.received(2)
    assert second.body["groupKey"] == first.body["groupKey"]
    assert sorted(a["labels"]["pod"] for a in second.body["alerts"]) == ["a", "b", "c"]
    assert one_tick_apart(first, second), second.at - first.at


async def test_a_wrong_token_answered_401_is_sent_again_only_at_group_interval(
    alertmanager_for: StartAlertmanager,
) -> None:
    """A 4xx is "unrecoverable" to Alertmanager: no retry within the flush, but the
    notification was not delivered, so each group_interval tick sends it again."""
    receiver = await started_receiver(token=TOKEN)
    try:
        am = await alertmanager_for(receiver.url, "a-wrong-token")
        await am.post_alerts([alert("CheckoutErrors")])
        first, again = await receiver.received(2, timeout_s=10)
        assert first.authorization == again.authorization == "Bearer a-wrong-token"
        assert first.answered == again.answered == 401
        assert again.body["groupKey"] == first.body["groupKey"]
        assert one_tick_apart(first, again), again.at - first.at
        assert "unrecoverable error after 1 attempts" in am.log()
        assert "unexpected status code 401" in am.log()
    finally:
        await receiver.stop()


async def test_no_token_sends_no_authorization_header(
    alertmanager_for: StartAlertmanager, webhook_receiver: WebhookReceiver
) -> None:
    am = await alertmanager_for(webhook_receiver.url, None, group_wait=0.2)
    await am.post_alerts([alert("CheckoutErrors")])
    [notification] = await webhook_receiver.received(1)
    assert notification.authorization is None
    assert notification.body["version"] == "4"


def listening_addresses(pid: int) -> list[str]:
    """The local addresses of the sockets process `pid` listens on (TCP) or is bound to
    (UDP), from /proc: its socket inodes, looked up in the network namespace's tables."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = []
    for table in ("tcp", "tcp6", "udp", "udp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            # TCP: LISTEN only (0A); UDP: every bound socket (07, "closed" to /proc).
            if inode in inodes and (state == "0A" or table.startswith("udp")):
                address, port = local.rsplit(":", 1)
                found.append(f"{table}:{_ip(address)}:{int(port, 16)}")
    return sorted(found)


def _ip(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    # /proc writes each 32-bit word of the address in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


async def test_it_listens_on_its_loopback_port_only_with_no_gossip(
    alertmanager_for: StartAlertmanager, webhook_receiver: WebhookReceiver
) -> None:
    am = await alertmanager_for(webhook_receiver.url, TOKEN)
    assert am.process is not None
    assert listening_addresses(am.process.pid) == [f"tcp:127.0.0.1:{am.port}"]


async def test_it_is_stopped_and_its_directory_removed_when_the_block_ends(
    webhook_receiver: WebhookReceiver,
) -> None:
    async with Alertmanager(webhook_receiver.url, TOKEN) as am:
        process, folder = am.process, am.dir
        assert process is not None and folder is not None and folder.exists()
        assert await am.alerts() == []
    assert process.poll() is not None
    assert not folder.exists()
    assert am.process is None


def _instant(rfc3339: str) -> datetime:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
