"""Text from outside the bot, on its way into Slack's markup (mrkdwn).

The model's answers, telemetry, gate and judge reasons and grader explanations all reach
Slack through `escape`, the one routine for that. Slack reads `<…>` as a mention (`<@U1>`,
`<#C1>`, `<!channel>`, `<!here>`, `<!everyone>`, `<!subteam^S1>`) or a link whose label
may hide its address (`<https://evil.example|Grafana>`); escaped, `&lt;!channel&gt;` is
shown as the literal text and pings nobody, and a bare address stays what it says.
Control characters (C0 and C1, but newline and tab) and Unicode bidi controls are
dropped: a right-to-left override makes text read as something other than what it is.
The bot adds its own markup (trace links, `<@approver>`, dates) after escaping.
"""

from __future__ import annotations

import re

from graph.untrusted import clip

# C0 (but tab and newline), DEL, C1; Arabic letter mark, LRM/RLM, the embeddings and
# overrides (U+202A–E) and the isolates (U+2066–9).
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Slack's markup tokens: mentions (`<@U1>`, `<#C1|x>`, `<!here>`) and links (`<scheme:…>`).
_MARKUP = re.compile(r"<((?:[!@#]|[a-z][a-z0-9+.-]*:)[^<>]*)>", re.IGNORECASE)


def visible(text: str) -> str:
    """The text without control and bidi characters."""
    return _INVISIBLE.sub("", text)


def escape(text: str) -> str:
    """Outside text made inert for mrkdwn: no mention, ping or disguised link survives."""
    return visible(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# An entity `escape` wrote, cut short where text was clipped after escaping ("&am…").
_CUT_ENTITY = re.compile(r"&(?:a|am|amp|l|lt|g|gt)?…$")


def clip_escaped(text: str, limit: int) -> str:
    """Escaped text clipped to `limit` characters (Slack's limits count them escaped)
    without cutting an entity in two: a cut one is dropped whole."""
    return _CUT_ENTITY.sub("…", clip(text, limit))


def plain(text: str) -> str:
    """Text to keep (a channel's rubric) with Slack's markup turned into plain words:
    `<!channel>` → `!channel`, `<https://x|label>` → `https://x label`."""
    return _MARKUP.sub(lambda m: m[1].replace("|", " "), visible(text))
