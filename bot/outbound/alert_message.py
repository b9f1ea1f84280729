"""An alert group as the bot posts it: the message an automatic investigation answers under.

Alert name, severity, summary, the labels that matter, the start time and the generator's
link; then how many alerts fire, and "Resolved at 14:32 UTC" once the group is resolved.
Everything the alert's author wrote goes through `escape` (no mention, no link smuggled in);
links are the sender's `generatorURL`/`dashboardURL`, shown only when they are http(s).
"""

from __future__ import annotations

from datetime import UTC, datetime

from bot.outbound.blocks import Block, context, section
from bot.outbound.mrkdwn import escape
from bot.turn.notifications import Alert, Notification
from graph.untrusted import truncate

SHOWN_LABELS = ("service", "namespace", "deployment", "pod", "job", "cluster", "instance")
MAX_ALERTS_LISTED = 5
MAX_TEXT = 300


def _utc(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _summary(alert: Alert, n: Notification) -> str:
    notes = {**n.common_annotations, **alert.annotations}
    return notes.get("summary") or notes.get("description") or notes.get("message") or ""


def _link(url: str, label: str) -> str:
    if not url.startswith(("https://", "http://")) or any(c in url for c in "<>| \n"):
        return ""
    return f"<{url}|{label}>"


def alert_text(n: Notification) -> str:
    """The notification text (what a phone shows)."""
    alerts = n.firing or n.alerts
    name = (alerts[0].labels.get("alertname") if alerts else "") or n.title or "alert"
    state = "RESOLVED" if n.resolved else f"FIRING:{len(n.firing)}"
    return truncate(f"[{state}] {name}", 150)


def alert_blocks(n: Notification, *, investigated: bool) -> list[Block]:
    firing = n.firing
    shown = (firing or n.alerts)[:MAX_ALERTS_LISTED]
    first = shown[0] if shown else None
    labels = {**n.common_labels, **(first.labels if first else {})}
    name = labels.get("alertname") or n.title or "alert"
    severity = labels.get("severity", "")
    resolved = n.resolved
    icon = ":white_check_mark:" if resolved else ":rotating_light:"
    head = f"{icon} *{escape(truncate(name, 150))}*" + (
        f" · {escape(severity)}" if severity else ""
    )
    blocks = [section(head)]
    if first and (summary := _summary(first, n)):
        blocks.append(section(escape(truncate(summary, MAX_TEXT))))
    facts = [
        f"*{escape(k)}:* `{escape(truncate(labels[k], 100))}`"
        for k in SHOWN_LABELS
        if labels.get(k)
    ]
    if first:
        facts.append(f"*started:* {_utc(first.starts_at)}")
    if facts:
        blocks.append(context(" · ".join(facts)))
    if len(firing) > 1:
        others = [
            ", ".join(f"{k}={v}" for k, v in a.labels.items() if k != "alertname")
            for a in firing[1:MAX_ALERTS_LISTED]
        ]
        listed = "; ".join(escape(truncate(other, 150)) for other in others)
        unlisted = len(firing) - MAX_ALERTS_LISTED
        more = f" and {unlisted} more" if unlisted > 0 else ""
        blocks.append(context(f"{len(firing)} alerts firing: {listed}{more}"))
    links = [
        link
        for link in (
            _link(first.generator_url, "source") if first else "",
            _link(first.dashboard_url, "dashboard") if first else "",
            _link(n.external_url, n.source.capitalize()),
        )
        if link
    ]
    status = []
    if resolved:
        ended = [a.resolved_at for a in n.alerts if a.resolved_at]
        at = max(ended) if ended else datetime.now(UTC)
        status.append(f"Resolved at {at.astimezone(UTC).strftime('%H:%M UTC')}")
    elif investigated:
        status.append("tracegate is investigating in the thread")
    if links or status:
        blocks.append(context(" · ".join([*status, *links])))
    return blocks
