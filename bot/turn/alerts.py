"""Reading Alertmanager's and Grafana Alerting's Slack notifications into `AlertHint`s.

Both post through incoming webhooks or apps, mostly as attachments: a title like
`[FIRING:1] HighErrorRate payment-api`, then the labels as `- name = value` (Grafana) or
`• *name:* `value`` (common Alertmanager templates) lines, sometimes `Starts at:`, and links.
What cannot be read stays plain text in the thread context; nothing here raises.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from graph.context import AlertHint

INTERESTING = (
    "alertname",
    "service",
    "service_name",
    "job",
    "namespace",
    "deployment",
    "severity",
    "pod",
    "cluster",
)
MAX_LABELS = 12

_STATUS = re.compile(r"\[(FIRING|RESOLVED)(?::\d+)?\]|\*\*(Firing|Resolved)\*\*", re.IGNORECASE)
_LABEL = re.compile(
    r"^\s*(?:[-•*]\s*)?\*?(?P<key>[A-Za-z_][\w.]{0,60})\*?\s*(?:=|:)\*?\s*"
    r"`?(?P<value>[^`\n]{1,200}?)`?\s*$"
)
_STARTS = re.compile(
    r"(?:starts?\s*at|startsAt|firing since|started)\s*:?\s*"
    r"(?P<at>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:Z|[+-]\d{2}:?\d{2})?)",
    re.IGNORECASE,
)
_LINK = re.compile(r"<(https?://[^|>\s]+)(?:\|[^>]*)?>|(https?://[^\s>|)]+)")
_TITLE_NAME = re.compile(r"\]\s*(?P<name>[A-Za-z_][\w:.-]*)")


def message_text(message: dict[str, Any]) -> str:
    """Everything readable in a message: its text, its attachments' and its blocks' text."""
    parts: list[str] = [str(message.get("text") or "")]
    for attachment in message.get("attachments") or []:
        for key in ("pretext", "title", "text", "title_link"):
            if attachment.get(key):
                parts.append(str(attachment[key]))
        for f in attachment.get("fields") or []:
            parts.append(f"{f.get('title', '')}: {f.get('value', '')}")
        if not any(attachment.get(k) for k in ("pretext", "title", "text", "fields")):
            parts.append(str(attachment.get("fallback") or ""))
    for block in message.get("blocks") or []:
        if isinstance(block.get("text"), dict):
            parts.append(str(block["text"].get("text", "")))
        parts += [str(f.get("text", "")) for f in block.get("fields") or []]
        for element in block.get("elements") or []:
            if isinstance(element, dict) and element.get("type") in ("mrkdwn", "plain_text"):
                parts.append(str(element.get("text", "")))
    unique = dict.fromkeys(p.strip() for p in parts if p.strip())  # fallbacks repeat the text
    return "\n".join(unique)


def read_alert(text: str, author: str, posted_at: datetime) -> AlertHint | None:
    """An alert hint if the text looks like an alert notification, else None."""
    status_match = _STATUS.search(text)
    labels: dict[str, str] = {}
    for line in text.splitlines():
        found = _LABEL.match(line.replace("*", "") if "•" in line else line)
        if found is None:
            continue
        key, value = found["key"].strip(), found["value"].strip()
        if key.lower() in ("value", "source", "silence", "dashboard", "panel", "description"):
            continue
        if key in INTERESTING or len(labels) < MAX_LABELS:
            labels.setdefault(key, value)
    if status_match is None and "alertname" not in labels:
        return None
    status = (status_match[1] or status_match[2]).lower() if status_match else "unknown"
    name = labels.get("alertname", "")
    if not name and status_match is not None:
        title = _TITLE_NAME.search(text[status_match.start() :])
        name = title["name"] if title else ""
    named = f"{text}\n{author}".lower()
    source = next((s for s in ("grafana", "alertmanager") if s in named), author)
    ordered = {k: labels[k] for k in INTERESTING if k in labels} | labels  # interesting first
    return AlertHint(
        source=source,
        status=status,
        alertname=name,
        labels=dict(list(ordered.items())[:MAX_LABELS]),
        starts_at=_starts_at(text) or posted_at,
        links=[a or b for a, b in _LINK.findall(text)][:3],
    )


# PagerDuty's Slack app: "Triggered #1234 …" / "Acknowledged" / "Resolved" leads the message
_PAGERDUTY = re.compile(
    r"^\W*(?::[\w+-]+:\s*)?(?P<state>triggered|acknowledged|resolved)\b[\s:]*(?P<title>[^\n]*)",
    re.IGNORECASE,
)


def firing_alert(message: dict[str, Any]) -> AlertHint | None:
    """The firing alert another app posted, or None: Alertmanager's and Grafana's Slack
    notifications (`[FIRING:n] …`, `**Firing**`), and PagerDuty's incident messages
    ("Triggered #1234: …"). A resolved or acknowledged one is None, as is anything else."""
    text = message_text(message)
    profile = message.get("bot_profile") or {}
    author = str(message.get("username") or profile.get("name") or message.get("bot_id") or "")
    at = datetime.fromtimestamp(float(message.get("ts") or 0), UTC)
    hint = read_alert(text, author, at)
    if hint is not None:
        return hint if hint.status == "firing" else None
    if "pagerduty" not in (author + text).lower():
        return None
    found = _PAGERDUTY.match(text)
    if found is None or found["state"].lower() != "triggered":
        return None
    title = re.sub(r"^#?\d+\s*[:-]?\s*", "", found["title"]).strip()
    return AlertHint(source="pagerduty", status="firing", alertname=title[:150], starts_at=at)


def _starts_at(text: str) -> datetime | None:
    found = _STARTS.search(text)
    if found is None:
        return None
    raw = found["at"].strip().replace(" ", "T", 1).replace(" ", "")
    try:
        at = datetime.fromisoformat(raw)  # a trailing "Z" too (Python >= 3.11)
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)
