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
}


def plain(mrkdwn: str) -> str:
    text = _LINK.sub(r"\2", mrkdwn)
    text = _BARE_LINK.sub(r"\1", text)
    text = _USER.sub(r"@\1", text)
    text = _DATE.sub(r"\1", text)
    for code, symbol in EMOJI.items():
        text = text.replace(code, symbol)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _indent(text: str, prefix: str = "    ", width: int = 100) -> str:
    lines: list[str] = []
    for line in text.splitlines() or [""]:
        wrapped = textwrap.wrap(line, width - len(prefix)) or [""]
        lines.extend(prefix + w for w in wrapped)
    return "\n".join(lines)


def render_blocks(blocks: list[dict[str, Any]], fallback: str) -> str:
    if not blocks:
        return _indent(plain(fallback))
    out = []
    for block in blocks:
        kind = block.get("type")
        if kind == "section" and "text" in block:
            out.append(_indent(plain(block["text"]["text"])))
        if kind == "section" and "fields" in block:
            fields = [plain(f["text"]).replace("\n", ": ", 1) for f in block["fields"]]
            out.append(_indent(" | ".join(fields)))
        elif kind == "context":
            out.append(
                _indent(" ".join(plain(e.get("text", "")) for e in block["elements"]), "    · ")
            )
        elif kind == "actions":
            buttons = "  ".join(f"[{e['text']['text']}]" for e in block["elements"])
            out.append(_indent(buttons))
    return "\n".join(out)


def render_message(author: str, text: str, blocks: list[dict[str, Any]], edits: int = 0) -> str:
    edited = f" (edited {edits}×)" if edits else ""
    return f"{author}{edited}:\n{render_blocks(blocks, text)}"
