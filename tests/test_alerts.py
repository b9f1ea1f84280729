"""Alert notifications read into hints: Alertmanager's and Grafana's Slack formats."""

from datetime import UTC, datetime

from bot.turn.alerts import message_text, read_alert
from tests.test_thread_context import ALERT_ATTACHMENT, FIRED, GRAFANA_TEXT

POSTED = datetime(2026, 11, 30, 14, 6, tzinfo=UTC)


def test_an_alertmanager_attachment_gives_status_labels_start_and_link() -> None:
    text = message_text({"text": "", "attachments": [ALERT_ATTACHMENT]})
    alert = read_alert(text, "app Alertmanager", POSTED)

    assert alert is not None
    assert (alert.source, alert.status, alert.alertname) == (
        "alertmanager",
        "firing",
        "HighErrorRate",
    )
    assert alert.labels["service"] == "payment-api" and alert.labels["namespace"] == "shop"
    assert alert.starts_at == FIRED
    assert alert.links == ["https://alertmanager.example/#/alerts?receiver=slack"]


def test_a_label_written_bold_with_its_colon_inside_keeps_its_value_clean() -> None:
    text = "[FIRING:1] HighErrorRate\n*Summary:* 5xx ratio above 5%\n• *service:* `checkout`"
    alert = read_alert(text, "app Alertmanager", POSTED)

    assert alert is not None
    assert alert.labels["service"] == "checkout"
    assert alert.labels["Summary"] == "5xx ratio above 5%"


def test_a_grafana_notification_without_a_start_time_starts_when_it_was_posted() -> None:
    alert = read_alert(GRAFANA_TEXT, "app Grafana", POSTED)

    assert alert is not None
    assert (alert.source, alert.status, alert.alertname) == ("grafana", "firing", "CheckoutLatency")
    assert alert.labels == {
        "alertname": "CheckoutLatency",
        "service": "checkout",
        "namespace": "shop",
        "summary": "p99 above 2s",
    }
    assert alert.starts_at == POSTED


def test_a_resolved_alert_does_not_anchor_the_search_window() -> None:
    from graph.context import ThreadContext

    resolved = read_alert(GRAFANA_TEXT.replace("**Firing**", "**Resolved**"), "app Grafana", POSTED)
    assert resolved is not None and resolved.status == "resolved"
    assert ThreadContext(alerts=[resolved]).incident_start is None


def test_ordinary_messages_are_not_alerts() -> None:
    for text in ("p99 jumped after the deploy", "status: investigating", "FYI: firing up the VPN"):
        assert read_alert(text, "person U1", POSTED) is None


def test_blocks_and_attachment_fields_are_read_once() -> None:
    message = {
        "text": "fallback text",
        "attachments": [
            {"fallback": "fallback text", "fields": [{"title": "env", "value": "prod"}]}
        ],
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "*Checkout* is slow"}}],
    }
    assert message_text(message) == "fallback text\nenv: prod\n*Checkout* is slow"
