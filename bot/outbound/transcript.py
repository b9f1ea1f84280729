"""A Slack thread rendered for a terminal: messages, cards, buttons, edits."""

from __future__ import annotations

import re
import textwrap
from typing import Any

_LINK = re.compile(r"<(https?://[^|>]+)\|([^>]+)>")
_BARE_LINK = re.compile(r"<(https?://[^|>]+)>")
_USER = re.compile(r"<@([A-Z0-9_]+)>")
_DATE = re.compile(r"<!date\^[^|>]+\|([^>]+)>")
EMOJI = {
    ":white_check_mark:": "✅",
    ":x:": "❌",
    ":warning:": "⚠️",
    ":scales:": "⚖️",
    ":no_entry:": "⛔",
    ":no_entry_sign:": "🚫",
    ":hourglass:": "⌛",
    ":hourglass_flowing_sand:": "⏳",
    ":gear:": "⚙️",
    ":mag:": "🔍",
    ":clipboard:": "📋",
    ":grey_question:": "❔",
    ":ledger:": "📒",
    ":large_green_circle:": "🟢",
}


def _for_terminal(mrkdwn: str) -> str:
    """Slack's rendering of `mrkdwn` in words: link labels, @user ids, dates' fallback text,
    emoji, entities decoded (unlike `bot.outbound.mrkdwn.plain`, which keeps a rubric's
    link targets)."""
    text = _LINK.sub(r"\2", mrkdwn)
    text = _BARE_LINK.sub(r"\1", text)
    text = _USER.sub(r"@\1", text)
    text = _DATE.sub(r"\1", text)
    for code, symbol in EMOJI.items():
        text = text.replace(code, symbol)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


# What a wrapped line hangs under: a list bullet or number, or a Steps line's time.
_LIST_ITEM = re.compile(r"(?:[•◦▪*-]|\d+[.)]|`\s*[\d.]+s`) ")
WIDTH = 100


def _indent(text: str, prefix: str = "    ") -> str:
    """Each line wrapped to WIDTH under `prefix`; a wrapped line continues under its text
    (under a list item's text, past its bullet), never at a hyphen, without the prefix's
    own bullet."""
    margin = " " * len(prefix)
    lines: list[str] = []
    for line in text.splitlines() or [""]:
        item = _LIST_ITEM.match(line)
        hanging = margin + " " * (item.end() if item else 0)
        wrapped = textwrap.wrap(
            line,
            WIDTH,
            initial_indent=prefix,
            subsequent_indent=hanging,
            break_on_hyphens=False,
            break_long_words=False,
        )
        lines.extend(wrapped or [""])
    return "\n".join(lines)


def render_blocks(blocks: list[dict[str, Any]], fallback: str) -> str:
    if not blocks:
        return _indent(_for_terminal(fallback))
    out = []
    for block in blocks:
        kind = block.get("type")
        if kind == "section" and "text" in block:
            out.append(_indent(_for_terminal(block["text"]["text"])))
        if kind == "section" and "fields" in block:
            fields = [_for_terminal(f["text"]).replace("\n", ": ", 1) for f in block["fields"]]
            out.append(_indent(" | ".join(fields)))
        elif kind == "context":
            texts = " ".join(_for_terminal(e.get("text", "")) for e in block["elements"])
            out.append(_indent(texts, "    · "))
        elif kind == "actions":
            buttons = "  ".join(f"[{e['text']['text']}]" for e in block["elements"])
            out.append(_indent(buttons))
    return "\n".join(out)


_TASK_MARKS = {"complete": "✓", "error": "✗", "in_progress": "…", "pending": "·"}


def render_tasks(tasks: list[dict[str, Any]]) -> str:
    """A streamed message's timeline: each task as it stands, with its result line."""
    lines = []
    for task in tasks:
        mark = _TASK_MARKS.get(str(task.get("status")), "?")
        line = f"{mark} {_for_terminal(str(task.get('title', '')))}"
        if task.get("output"):
            line += f" — {_for_terminal(str(task['output']))}"
        lines.append(_indent(line, "    "))
    return "\n".join(lines)


def render_message(
    author: str,
    text: str,
    blocks: list[dict[str, Any]],
    edits: int = 0,
    tasks: list[dict[str, Any]] | None = None,
) -> str:
    """A message; a streamed one (`tasks`: its timeline) shows its tasks above the answer."""
    if tasks:
        return f"{author} (streamed):\n{render_tasks(tasks)}\n{render_blocks(blocks, text)}"
    edited = f" (edited {edits}×)" if edits else ""
    return f"{author}{edited}:\n{render_blocks(blocks, text)}"
