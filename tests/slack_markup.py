"""What may never reach Slack on behalf of outside text: mentions, pings, foreign links,
control and bidi characters. Written from Slack's rules, independently of bot/outbound/mrkdwn.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

# Tokens an attacker would plant, mixed into random text by the property tests.
HOSTILE_TOKENS = [
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<!subteam^S0ONCALL|@oncall>",
    "<@U999ADMIN>",
    "<#C0SECRET|secret>",
    "<https://evil.example/login|Grafana (click to re-auth)>",
    "<mailto:a@evil.example|support>",
    "\u202e",
    "\u2066",
    "\u200f",
    "\x00",
    "\x07",
    "\x1b[31m",
    "\x85",
    "\r",
    "&lt;!here&gt;",
    "<",
    ">",
    "|",
    "&",
]
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_TOKEN = re.compile(r"<([^<>]*)>")


def strings_of(value: Any) -> Iterator[str]:
    """Every string in a message (its text, every block and field), keys excluded."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_of(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings_of(item)


def smuggled(
    message: Any,
    *,
    bot_users: frozenset[str] = frozenset(),
    link_hosts: frozenset[str] = frozenset(),
) -> list[str]:
    """Each control or bidi character, mention, ping or link found anywhere in a message,
    except the bot's own markup: dates, mentions of `bot_users`, links to `link_hosts`."""
    found: list[str] = []
    for text in strings_of(message):
        found += [f"character U+{ord(c):04X}" for c in _INVISIBLE.findall(text)]
        for token in _TOKEN.findall(text):
            address = token.split("|", 1)[0]
            if token.startswith("!date^") or (token.startswith("@") and token[1:] in bot_users):
                continue
            if urlparse(address).scheme in ("http", "https") and (
                urlparse(address).hostname in link_hosts
            ):
                continue
            found.append(f"<{token}>")
    return found
