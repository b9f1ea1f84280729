"""`tracegate eval capture <thread link>`: an answered Slack thread becomes a scenario.

What the turn saw is kept — the thread before the question, the question, the tool calls and
their results (from the thread's checkpoint), the traces and Deployments those tools read
(fetched again from Tempo and the cluster) and the answer posted — with tokens, email
addresses and IP addresses redacted everywhere. The scenario is written without a truth:
`tracegate eval` refuses it, naming the file, until someone writes what the cause really was.
"""

from __future__ import annotations

import ipaddress
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from bot.outbound.feedback import negative_answers
from bot.process.runtime import open_runtime
from bot.process.services import slack_client
from bot.process.settings import Settings, SettingsError
from bot.turn.alerts import message_text
from bot.turn.context import author_of
from bot.turn.threads import thread_key
from evals.spec import (
    SCENARIOS,
    RecordedDeployment,
    RecordedMessage,
    RecordedRevision,
    RecordedSpan,
    RecordedTrace,
)
from gates.cluster import ClusterError
from graph.tools.tempo import TempoClient, TempoQueryError, TempoUnavailable
from graph.trace_ids import find_trace_ids

MAX_TRACES = 30  # traces fetched again: those read first, then search hits
MAX_PAGES = 20  # of conversations.replies

_LINK = re.compile(r"/archives/(?P<channel>[A-Z0-9]+)/p(?P<seconds>\d{10})(?P<micros>\d{6})")
_THREAD_TS = re.compile(r"[?&]thread_ts=(?P<ts>\d{10}\.\d{6})")
_MENTION = re.compile(r"<@[A-Z0-9]+>\s*")

REDACTIONS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bxox[abposre]-[A-Za-z0-9-]+"), "[token]"),  # Slack tokens
    (re.compile(r"\bxapp-[A-Za-z0-9-]+"), "[token]"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), "[token]"),  # Google API keys
    (re.compile(r"\b(?:gh[pousr]|github_pat)_[A-Za-z0-9_]{20,}"), "[token]"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), "[token]"),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 [token]"),
    (
        re.compile(
            r"(?i)\b(api[_-]?key|access[_-]?token|token|secret|password|passwd)"
            r"(\"?\s*[=:]\s*\"?)[^\s\"',;]+"
        ),
        r"\1\2[token]",
    ),
    (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"), "[email]"),
    (
        re.compile(
            r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\d.])"
        ),
        "[ip]",
    ),
]
# IPv6 candidates, kept only when they parse: "14:02:11" is a time, not an address.
_IPV6 = re.compile(r"(?<![\w:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])")


def _ipv6(match: re.Match[str]) -> str:
    try:
        ipaddress.IPv6Address(match.group())
    except ValueError:
        return match.group()
    return "[ip]"


def redact(text: str) -> str:
    for pattern, replacement in REDACTIONS:
        text = pattern.sub(replacement, text)
    return _IPV6.sub(_ipv6, text)


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


@dataclass(frozen=True)
class ThreadLink:
    channel: str
    thread_ts: str


def parse_link(link: str) -> ThreadLink:
    """A message link as Slack copies it: `…/archives/C0123/p1712345678123456`, with
    `?thread_ts=…` when the message is a reply in a thread."""
    found = _LINK.search(link)
    if found is None:
        raise ValueError(
            f"{link!r} is not a Slack message link (expected …/archives/<channel>/p<digits>; "
            "use Copy link on the thread's first message or the answer)"
        )
    reply = _THREAD_TS.search(link)
    ts = reply["ts"] if reply else f"{found['seconds']}.{found['micros']}"
    return ThreadLink(found["channel"], ts)


def _check(settings: Settings) -> None:
    missing = [
        problem
        for problem, bad in (
            ("SLACK_BOT_TOKEN: needed to read the thread", not settings.slack.bot_token),
            ("TEMPO_URL: needed to fetch the traces the turn read", not settings.tempo.url),
        )
        if bad
    ]
    if missing:
        raise SettingsError("\n".join(missing))


async def capture(settings: Settings, link: str, name: str, folder: Path = SCENARIOS) -> Path:
    """Write `folder/name/scenario.json` from the thread at `link`; returns its path."""
    _check(settings)
    where = parse_link(link)
    target = folder / name / "scenario.json"
    if target.exists():
        raise FileExistsError(f"{target} exists; choose another --name")
    async with open_runtime(settings) as runtime:
        client = slack_client(settings, runtime.slack_http)
        auth = await client.auth_test()
        team, bot_user = str(auth["team_id"]), str(auth["user_id"])
        messages = await _replies(client, where)
        question, answer, before = _turn(messages, bot_user)
        captured_at = time.time()
        thread_id = thread_key(team, where.channel, where.thread_ts)
        state = await runtime.investigator.graph.aget_state(
            {"configurable": {"thread_id": thread_id}}
        )
        calls = _tool_calls(state.values.get("messages") or [])
        tempo = TempoClient(settings.tempo_spec())
        try:
            traces = await _traces(tempo, calls)
        finally:
            await tempo.aclose()
        deployments = await _deployments(runtime, calls)
    if not calls:
        raise LookupError(
            f"no investigation is stored for thread {thread_id} (REDIS_URL and REDIS_PREFIX "
            "must be the bot's, and the checkpoint younger than CHECKPOINT_TTL)"
        )
    recorded = {
        "source": link,
        "captured_at": captured_at,
        "thread": [
            RecordedMessage(
                author=author, text=redact(text), seconds_before=captured_at - at
            ).model_dump()
            for author, text, at in before
        ],
        "traces": [t.model_dump() for t in traces],
        "deployments": [d.model_dump() for d in deployments],
        "tool_calls": _redacted(calls),
        "answer": redact(answer),
    }
    document = {
        "title": f"captured from {where.channel} thread {where.thread_ts}",
        "kind": "captured",
        "namespace": next((d.namespace for d in deployments), "default"),
        "question": redact(question),
        "recorded": recorded,
        "truth": {
            "root_cause": [],
            "chain": [],
            "evidence": [],
            "action": None,
            "wrong_actions": [],
            "criteria": [],
            "_write": "the entities that really caused it, how it spread, the strings that "
            "prove it, the right action (or null) — then delete this line",
        },
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document, indent=1) + "\n")
    return target


async def capture_negative(settings: Settings, folder: Path = SCENARIOS) -> list[Path]:
    """Every thread whose answer got a 👎 and is not captured yet, as a scenario named
    `feedback-<channel>-<thread ts>`."""
    _check(settings)
    async with open_runtime(settings) as runtime:
        client = slack_client(settings, runtime.slack_http)
        links: list[tuple[str, str]] = []
        for thread, _ in await negative_answers(runtime.redis, settings.redis.prefix):
            _, channel, thread_ts = thread.split(":", 2)
            name = f"feedback-{channel.lower()}-{thread_ts.replace('.', '')}"
            if (folder / name).exists() or any(n == name for n, _ in links):
                continue
            found = await client.chat_getPermalink(channel=channel, message_ts=thread_ts)
            links.append((name, str(found["permalink"])))
    return [await capture(settings, link, name, folder) for name, link in links]


async def _replies(client: Any, where: ThreadLink) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await client.conversations_replies(
            channel=where.channel, ts=where.thread_ts, limit=200, cursor=cursor
        )
        messages += page.get("messages") or []
        cursor = (page.get("response_metadata") or {}).get("next_cursor")
        if not page.get("has_more") or not cursor:
            break
    return sorted({m["ts"]: m for m in messages}.values(), key=lambda m: float(m["ts"]))


def _turn(
    messages: list[dict[str, Any]], bot_user: str
) -> tuple[str, str, list[tuple[str, str, float]]]:
    """The latest answered question: (question, the bot's answer, the thread before it)."""
    ours = [i for i, m in enumerate(messages) if m.get("user") == bot_user or m.get("bot_id")]
    asked = [
        i
        for i, m in enumerate(messages)
        if f"<@{bot_user}>" in (m.get("text") or "") and m.get("user") != bot_user
    ]
    answered = [q for q in asked if any(a > q for a in ours)]
    if not answered:
        raise LookupError("no question to the bot with an answer after it in this thread")
    q = answered[-1]
    answer_index = min(a for a in ours if a > q)
    before = [
        (author_of(m), message_text(m), float(m["ts"]))
        for m in messages[:q]
        if m.get("user") != bot_user
    ]
    question = _MENTION.sub("", messages[q].get("text") or "").strip()
    answer = messages[answer_index]
    return question, answer.get("text") or message_text(answer), before


def _tool_calls(messages: list[Any]) -> list[dict[str, Any]]:
    """Every tool call of the thread with its result, in order."""
    results = {m.tool_call_id: m.text for m in messages if isinstance(m, ToolMessage)}
    return [
        {"tool": call["name"], "args": call["args"], "result": results.get(call["id"] or "", "")}
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
    ]


async def _traces(tempo: TempoClient, calls: list[dict[str, Any]]) -> list[RecordedTrace]:
    read = [str(c["args"].get("trace_id", "")) for c in calls if c["tool"] == "get_trace"]
    found = [
        t for c in calls if c["tool"] == "query_tempo_traces" for t in find_trace_ids(c["result"])
    ]
    out = []
    for trace_id in list(dict.fromkeys(t for t in read + found if t))[:MAX_TRACES]:
        try:
            spans = await tempo.fetch(trace_id)
        except (TempoQueryError, TempoUnavailable):
            continue  # kept as the tool result the turn saw; the trace itself is gone
        if not spans:
            continue
        out.append(
            RecordedTrace(
                trace_id=trace_id.rjust(32, "0"),
                spans=[
                    RecordedSpan(
                        span_id=s.span_id or f"{i:016x}",
                        parent_id=s.parent_id,
                        resource=_redacted(
                            {"service.name": s.service, **dict(s.workload.identity)}
                        ),
                        name=redact(s.name),
                        start_ns=s.start_ns,
                        end_ns=s.end_ns,
                        error=s.error,
                        status_message=redact(s.status_message),
                        attributes=_redacted(s.attributes),
                    )
                    for i, s in enumerate(spans, start=1)
                ],
            )
        )
    return out


async def _deployments(runtime: Any, calls: list[dict[str, Any]]) -> list[RecordedDeployment]:
    if runtime.actions is None:
        return []
    named = dict.fromkeys(
        (str(c["args"].get("namespace", "")), str(c["args"].get("deployment", "")))
        for c in calls
        if c["tool"] in ("get_rollout_history", "propose_action")
    )
    out = []
    for namespace, name in named:
        try:
            snap = await runtime.actions.cluster.snapshot(namespace, name)
        except ClusterError:  # gone or unreadable: the tool result the turn saw stays
            continue
        out.append(
            RecordedDeployment(
                namespace=namespace,
                name=name,
                replicas=snap.replicas,
                revisions=[
                    RecordedRevision(
                        revision=r.revision,
                        images=r.images,
                        change_cause=redact(r.change_cause),
                        created=r.created,
                    )
                    for r in snap.revisions
                ],
            )
        )
    return out
