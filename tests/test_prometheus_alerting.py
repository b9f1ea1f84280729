"""The whole path an alert takes, with real parts: a real Prometheus (sandbox/prometheus_server.py)
scrapes a target the test serves, its alerting rule fires to a real Alertmanager
(sandbox/alertmanager.py), which notifies a webhook receiver of the test's (not tracegate).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from sandbox.prometheus_server import AlertRule, MetricsTarget, rules_yaml
from tests.alertmanager_fixtures import StartAlertmanager, StartPrometheus, WebhookReceiver

TOKEN = "alert-webhook-token"


def test_rules_are_written_as_one_group() -> None:
    text = rules_yaml([AlertRule("A", 'up{job="x"} == 0', for_s=30, labels={"s": "p"})])
    assert text == (
        "groups:\n"
        '  - name: "tracegate-tests"\n'
        "    rules:\n"
        '      - alert: "A"\n'
        '        expr: "up{job=\\"x\\"} == 0"\n'
        "        for: 30s\n"
        '        labels: {"s": "p"}\n'
        "        annotations: {}\n"
    )


async def test_a_rule_that_fires_and_clears_reaches_the_webhook_as_firing_then_resolved(
    alertmanager_for: StartAlertmanager,
    prometheus_for: StartPrometheus,
    webhook_receiver: WebhookReceiver,
) -> None:
    am = await alertmanager_for(webhook_receiver.url, TOKEN)
    async with MetricsTarget() as target:
        target.set("checkout_error_ratio", 0.5, {"service": "checkout"})
        rule = AlertRule(
            "CheckoutErrors",
            "checkout_error_ratio > 0.1",
            labels={"severity": "critical"},
            annotations={"summary": "{{ $labels.service }} fails {{ $value }} of requests"},
        )
        prometheus = await prometheus_for(am.url, [target.address], [rule])

        # Prometheus hands new targets to its scrapers at most every 5s: the first
        # notification comes some 6-7s after it starts.
        [fired] = await webhook_receiver.received(1, timeout_s=20)
        assert fired.authorization == f"Bearer {TOKEN}"
        assert fired.body["version"] == "4" and fired.body["status"] == "firing"
        [sent] = fired.body["alerts"]
        assert sent["labels"] == {
            "alertname": "CheckoutErrors",
            "service": "checkout",
            "severity": "critical",
            "job": "app",
            "instance": target.address,
        }
        assert sent["annotations"] == {"summary": "checkout fails 0.5 of requests"}
        generator = urlsplit(sent["generatorURL"])
        assert f"{generator.scheme}://{generator.netloc}" == prometheus.url
        assert parse_qs(generator.query)["g0.expr"] == ["checkout_error_ratio > 0.1"]

        target.set("checkout_error_ratio", 0.0, {"service": "checkout"})
        _, resolution = await webhook_receiver.received(2, timeout_s=15)
        assert resolution.body["status"] == "resolved"
        assert resolution.body["groupKey"] == fired.body["groupKey"]
        assert resolution.body["alerts"][0]["fingerprint"] == sent["fingerprint"]
        assert await prometheus.alerts() == []
