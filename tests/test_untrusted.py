"""Bounding text that others wrote: `clip` makes one line, `truncate` keeps the lines."""

import re
from datetime import UTC, datetime

from bot.outbound.blocks import MAX_TEXT, alert_blocks
from bot.outbound.mrkdwn import clip_escaped, escape
from bot.outbound.timeline import TITLE_CHARS, Timeline
from bot.turn.notifications import Alert, Notification
from graph.untrusted import clip, truncate


def test_truncate_leaves_a_text_that_fits_as_it_is() -> None:
    assert truncate("two\nlines", 9) == "two\nlines"


def test_truncate_cuts_a_long_text_to_the_limit_with_an_ellipsis_and_keeps_its_lines() -> None:
    cut = truncate("first line\nsecond line", 15)

    assert cut == "first line\nsec…" and len(cut) == 15


def test_clip_puts_a_text_on_one_bounded_line() -> None:
    assert clip("first line\n  second line", 15) == "first line sec…"


def _notification(summary: str) -> Notification:
    alert = Alert(
        status="firing",
        labels={"alertname": "HighErrorRate", "service": "payment-api"},
        annotations={"summary": summary},
        startsAt=datetime(2026, 11, 30, 14, 0, tzinfo=UTC),
    )
    return Notification(groupKey="{}:{}", status="firing", alerts=[alert])


def test_an_alert_summary_keeps_its_lines_and_is_cut_at_its_limit() -> None:
    blocks = alert_blocks(_notification("5xx above 5%\nsince the 14:00 deploy"), investigated=False)
    long = alert_blocks(_notification("x" * (MAX_TEXT + 50)), investigated=False)

    assert blocks[1]["text"]["text"] == "5xx above 5%\nsince the 14:00 deploy"
    assert long[1]["text"]["text"] == "x" * (MAX_TEXT - 1) + "…"


def test_escaped_text_clipped_never_ends_in_half_an_entity() -> None:
    escaped = escape("a < b & c > d")  # "a &lt; b &amp; c &gt; d"
    for limit in range(1, len(escaped) + 2):
        clipped = clip_escaped(escaped, limit)
        assert len(clipped) <= limit
        assert clipped == escaped or not re.search(r"&[a-z]*…$", clipped), clipped


def test_a_tool_argument_cut_for_its_title_keeps_its_entities_whole() -> None:
    started = {
        "type": "tool_started",
        "tool": "get_pod_logs",
        "title": "Reading the logs of {pod}",
        "args": {"pod": "x" * 60 + "&" * 30},
    }
    (chunk,) = Timeline().update(started)
    assert len(chunk["title"]) <= TITLE_CHARS and chunk["title"].endswith("&amp;…")
