"""Text that workloads, services and people wrote, on its way to the model: data, never
instructions, and shown one way wherever it comes from (a kubelet's log line reads as
Loki's does).

`clip` flattens it to one bounded line: a newline cannot start a line that looks like the
tool's own. `quoted` also makes it a JSON string literal: its quotes and backslashes are
escaped, so it cannot close its quotes and go on as if the tool were speaking. `truncate`
only bounds the length, lines kept: for text shown whole where its lines matter (an
alert's summary, a Slack message's notification text).
"""

from __future__ import annotations

import json


def truncate(text: str, limit: int) -> str:
    """`text` as it is when it fits in `limit` characters; otherwise cut, ending in "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip(text: object, limit: int) -> str:
    """`text` on one line, whitespace collapsed, at most `limit` characters."""
    return truncate(" ".join(str(text).split()), limit)


def quoted(text: object, limit: int) -> str:
    """`text` clipped, as a quoted string literal: it cannot close its quotes."""
    return json.dumps(clip(text, limit), ensure_ascii=False)


def capped(lines: list[str], room: int) -> str:
    """A tool's summary: the lines that fit in `room` characters, whole, then a note of how
    many did not (the note is not counted in `room`: leave space for it)."""
    kept: list[str] = []
    for line in lines:
        room -= len(line) + 1
        if room < 0:
            kept.append(f"… {len(lines) - len(kept)} more lines cut (summary capped)")
            break
        kept.append(line)
    return "\n".join(kept)
