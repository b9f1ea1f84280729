"""Bounding text that others wrote: `clip` makes one line, `truncate` keeps the lines."""

from datetime import UTC, datetime

from bot.outbound.alert_message import MAX_TEXT, alert_blocks
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
