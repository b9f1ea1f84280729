"""Text that workloads, services and people wrote, on its way to the model: data, never
instructions, and shown one way wherever it comes from (a kubelet's log line reads as
Loki's does).

`clip` flattens it to one bounded line: a newline cannot start a line that looks like the
tool's own. `quoted` also makes it a JSON string literal: its quotes and backslashes are
escaped, so it cannot close its quotes and go on as if the tool were speaking.
"""

from __future__ import annotations

import json


def clip(text: object, limit: int) -> str:
    """`text` on one line, whitespace collapsed, at most `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def quoted(text: object, limit: int) -> str:
    """`text` clipped, as a quoted string literal: it cannot close its quotes."""
    return json.dumps(clip(text, limit), ensure_ascii=False)


__all__ = ["clip", "quoted"]
