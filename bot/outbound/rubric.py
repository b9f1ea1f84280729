"""`/rubric`: status, set, show, clear, help. Replies are ephemeral.

A thread's grading is shown only in the thread's own channel: whoever can run a command
here may not be in the channel a link points to. Only RUBRIC_EDITORS may set or clear a
channel's rubric, and each change is written to the audit stream with its actor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.outbound.blocks import Block, rubric_report_blocks, section, split_sections
from bot.outbound.cards import ApproverGroup
from bot.outbound.mrkdwn import escape, plain
from bot.turn.threads import ThreadMemory, thread_key
from gates.store import ActionStore
from graph.rubric import criteria_of
from graph.runner import Investigator

# https://x.slack.com/archives/C123/p1700000000000100[?thread_ts=1700000000.000100&cid=C123]
_PERMALINK = re.compile(
    r"/archives/(?P<channel>[A-Z0-9]+)/p(?P<seconds>\d{10})(?P<micros>\d{6})"
    r"(?:\?[^>\s|]*?thread_ts=(?P<thread_ts>\d+\.\d+))?"
)
RECENT_THREADS = 5

HELP = """\
*/rubric* — how answers in this channel are graded
• `/rubric status` — the latest grading of this channel's recent threads
• `/rubric status &lt;thread link&gt;` — the grading of one thread of this channel \
(copy the link of its first message)
• `/rubric set &lt;checklist&gt;` — this channel's rubric: one criterion per line \
(or separated by `;`)
• `/rubric show` — the rubric in force here
• `/rubric clear` — back to the default rubric
In a thread, mention me with `rubric status` for that thread."""


@dataclass(frozen=True)
class Reply:
    text: str
    blocks: list[Block]


def parse_permalink(text: str) -> tuple[str, str] | None:
    """(channel, thread_ts) of a Slack message link, or None."""
    match = _PERMALINK.search(text)
    if not match:
        return None
    ts = match["thread_ts"] or f"{match['seconds']}.{match['micros']}"
    return match["channel"], ts


def normalise_checklist(text: str) -> str:
    """One `- criterion` a line, without control or bidi characters or Slack markup: the
    rubric is shown in Slack and read by the grader."""
    cleaned = plain(text)
    lines = cleaned.splitlines() if "\n" in cleaned else cleaned.split(";")
    return "\n".join(f"- {item}" for item in criteria_of("\n".join(lines)))


@dataclass(frozen=True)
class RubricEditors:
    """Who may set or clear a channel's rubric (RUBRIC_EDITORS)."""

    anyone: bool
    users: frozenset[str]
    group: ApproverGroup | None = None  # ACTION_APPROVER_GROUP, when the approvers edit

    async def allow(self, user: str) -> bool:
        if self.anyone or user in self.users:
            return True
        return self.group is not None and await self.group.contains(user)


NOT_AN_EDITOR = (
    "Only rubric editors may change this channel's rubric: they are listed in RUBRIC_EDITORS "
    "(Slack user IDs, or `*` for anyone), or are the action approvers (ACTION_APPROVERS, "
    "ACTION_APPROVER_GROUP) when it is empty."
)


@dataclass(eq=False)
class RubricCommand:
    investigator: Investigator
    memory: ThreadMemory
    default: str | None
    editors: RubricEditors
    audit: ActionStore  # the audit stream's one writer, whether or not actions are set up
    max_chars: int

    async def run(self, team: str, channel: str, user: str, text: str) -> Reply:
        verb, _, rest = text.strip().partition(" ")
        verb = verb.lower()
        if verb == "status":
            return await self._status(team, channel, rest.strip())
        if verb in ("set", "clear"):
            where = f"channel {team}/{channel}"
            if not await self.editors.allow(user):
                await self.audit.audit_event(f"rubric_{verb}_denied", user, rest, where)
                return _say(NOT_AN_EDITOR)
            if verb == "clear":
                await self.memory.set_channel_rubric(team, channel, None)
                await self.audit.audit_event("rubric_cleared", user, "", where)
                return _say("Channel rubric cleared; the default applies to new threads.")
            checklist = normalise_checklist(rest)
            if not checklist:
                return _say(
                    "Give the checklist after `set`, "
                    "e.g. `/rubric set cause stated; evidence cited`."
                )
            if len(checklist) > self.max_chars:
                return _say(
                    f"That rubric is {len(checklist):,} characters; the limit is "
                    f"{self.max_chars:,} (RUBRIC_MAX_CHARS). Shorten the checklist."
                )
            await self.memory.set_channel_rubric(team, channel, checklist)
            await self.audit.audit_event("rubric_set", user, checklist, where)
            return _say(f"This channel's rubric is now:\n{escape(checklist)}")
        if verb == "show":
            current = await self.memory.channel_rubric(team, channel)
            if current:
                return _say(f"This channel's rubric:\n{escape(current)}")
            if self.default:
                return _say(f"No channel rubric; the default applies:\n{escape(self.default)}")
            return _say("No rubric is set here and there is no default: answers are not graded.")
        return _say(HELP)

    async def _status(self, team: str, channel: str, argument: str) -> Reply:
        if argument:
            located = parse_permalink(argument)
            if located is None:
                return _say("That does not look like a Slack message link. " + HELP.splitlines()[2])
            link_channel, thread_ts = located
            if link_channel != channel:
                return _say(
                    "That thread is in another channel: ask in that channel "
                    "(`/rubric status` with the thread's link)."
                )
            report = await self.investigator.rubric_status(
                thread_key(team, link_channel, thread_ts)
            )
            return Reply("Rubric status", rubric_report_blocks(report, "that thread"))
        threads = await self.memory.recent_threads(team, channel, RECENT_THREADS)
        if not threads:
            return _say("I have not answered in any thread of this channel yet.")
        blocks: list[Block] = []
        for ts in threads:
            report = await self.investigator.rubric_status(thread_key(team, channel, ts))
            blocks.extend(
                rubric_report_blocks(
                    report,
                    f"the thread of <!date^{int(float(ts))}^{{date_short_pretty}} {{time}}|{ts}>",
                )
            )
        return Reply("Rubric status", blocks[:50])


def _say(text: str) -> Reply:
    return Reply(text, [section(chunk) for chunk in split_sections(text)])
