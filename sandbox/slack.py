"""A Slack Web API simulator, and a driver that plays Slack's side towards the bot.

Web API (POST /api/<method>, form or JSON, like slack_sdk sends): auth.test,
chat.postMessage, chat.update, chat.postEphemeral, chat.getPermalink, users.info,
usergroups.users.list, conversations.replies (cursor pagination, oldest/latest, the parent
first, people's and other apps' messages with attachments and blocks), reactions.add and
reactions.remove. Every call is recorded. Blocks are checked as Slack checks them
(slack_sdk's own Block Kit models: known block types, their limits; and no empty text, no
block_id twice, no action_id twice in a block) and refused with `invalid_blocks`, as Slack
does. A token other than the workspace's (`bot_token`, `app_token`) is `invalid_auth`; a
channel the workspace does not have (`channels`, plus any a person wrote in) is
`channel_not_found`.
`rate_limit(method, times, retry_after)` answers the next calls 429 with Retry-After.
`scopes` (None: every scope) is what the installation was granted: a method needing one it
lacks answers `missing_scope` with `needed` and `provided`, as Slack does.

Files (Slack's external upload flow): files.getUploadURLExternal (`filename`, `length` in
bytes, `alt_txt`) hands out a file id and an upload URL on this server; POST the bytes there
(raw or as a multipart form's one file): a body whose size is not the declared `length` is
refused (400) and the file stays unuploaded; files.completeUploadExternal (`files` as JSON
`[{"id", "title"}]`, `channel_id`, `thread_ts`) needs every id handed out and uploaded, once
(`file_not_found`, `invalid_arguments`), and shares them as one message in the thread. The
bytes are kept in `uploads`.

People (users.info): anyone with a user id (U… or W…) is a full member of `home_team` (the
driver's workspace) unless `people` says otherwise — a guest (`is_restricted`,
`is_ultra_restricted`) or someone of another workspace (`team_id`, as for a Slack Connect
user; `enterprise_id` for an Enterprise org). Any other id is `user_not_found`; while
`users_info_error` is set, every call answers that error (`fatal_error`, say).

Streams (chat.startStream, appendStream, stopStream): a reply in a thread, for a named
person in channels (`missing_recipient_team_id` / `_user_id`); chunks read with slack_sdk's
chunk models and refused as `invalid_chunks` (unknown types or keys, a task without id or
title, a status not in Slack's four, a source that is not a URL element); a stream Slack
closed by itself after `stream_timeout_s`, or stopped, is `message_not_in_streaming_state`.
`streaming_refused` makes chat.startStream answer that error (a workspace that cannot
stream). chat.update of a message still streaming is refused (`cant_update_message`).

Response URLs (`POST /hooks/<id>`), as Slack hands them out with each slash command and
interaction: JSON with `text` and/or `blocks` and `response_type` (`ephemeral`, the
default, or `in_channel`); at most 5 uses within 30 minutes. An ephemeral response is
recorded with the others in `ephemeral` (`via: response_url`), and every one in `responses`.

`SlackDriver` sends correctly signed events, interactivity payloads and slash commands
to the bot over HTTP, like Slack's servers do. For Socket Mode, `apps.connections.open`
hands out a WebSocket URL on this server, and `socket_send` delivers an envelope over it
and waits for the app's acknowledgement.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block
from slack_sdk.models.messages.chunk import Chunk

from sandbox.server import SimulatorServer

BOT_USER = "UBOT"
TEAM = "T1"


@dataclass(frozen=True)
class SlackPerson:
    """How users.info describes someone who is not a plain member of `home_team`."""

    team_id: str | None = None  # their own workspace (None: `home_team`)
    is_restricted: bool = False  # a multi-channel guest
    is_ultra_restricted: bool = False  # a single-channel guest
    enterprise_id: str | None = None  # their Enterprise org


@dataclass
class SlackCall:
    method: str
    args: dict[str, Any]
    connection: str = ""  # the caller's address and port: one per TCP connection


@dataclass
class SlackMessage:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    edits: int = 0
    user: str = BOT_USER
    bot_id: str | None = "BBOT"
    username: str | None = None  # an app's display name (bot messages)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    reactions: dict[str, set[str]] = field(default_factory=dict)  # name -> users
    metadata: dict[str, Any] | None = None  # {"event_type", "event_payload"}, as posted
    chunks: list[dict[str, Any]] = field(default_factory=list)  # a stream's, in order
    streaming_until: float | None = None  # while streaming: when Slack closes it by itself
    recipient: str | None = None  # a stream's person (recipient_user_id)
    files: list[dict[str, Any]] = field(default_factory=list)  # shared files: {id, name, title}

    def streaming(self) -> bool:
        return self.streaming_until is not None and time.time() < self.streaming_until

    def tasks(self) -> dict[str, dict[str, Any]]:
        """A stream's tasks as they stand: each id's latest task_update, in first-seen order."""
        latest: dict[str, dict[str, Any]] = {}
        for chunk in self.chunks:
            if chunk.get("type") == "task_update":
                latest[chunk["id"]] = chunk
        return latest

    def as_api(self, *, metadata: bool = False) -> dict[str, Any]:
        """The message as conversations.replies returns it (its metadata only if asked)."""
        shown: dict[str, Any] = {"type": "message", "ts": self.ts, "text": self.text}
        if metadata and self.metadata:
            shown["metadata"] = self.metadata
        if self.user:
            shown["user"] = self.user
        if self.bot_id:
            shown["bot_id"] = self.bot_id
        if self.username:
            shown["username"] = self.username
        if self.thread_ts:
            shown["thread_ts"] = self.thread_ts
        if self.blocks:
            shown["blocks"] = self.blocks
        if self.attachments:
            shown["attachments"] = self.attachments
        if self.files:
            shown["files"] = self.files
        if self.reactions:
            shown["reactions"] = [
                {"name": n, "users": sorted(u), "count": len(u)} for n, u in self.reactions.items()
            ]
        return shown


def _empty_texts(value: Any, pointer: str) -> list[str]:
    """Text objects with no text anywhere under `value`: Slack refuses each."""
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _empty_texts(item, f"{pointer}/{i}")]
    if not isinstance(value, dict):
        return []
    found = []
    if value.get("type") in ("plain_text", "mrkdwn") and not str(value.get("text", "")).strip():
        found.append(f"must be more than 0 characters [json-pointer:{pointer}/text]")
    for key, item in value.items():
        found += _empty_texts(item, f"{pointer}/{key}")
    return found


def block_kit_problems(blocks: list[dict[str, Any]]) -> list[str]:
    """What Slack's Block Kit validation refuses, read with slack_sdk's own models: unknown
    block types, the models' limits (e.g. 25 elements in an actions block), empty texts,
    a block_id used twice, an action_id used twice within a block."""
    problems: list[str] = []
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        pointer = f"/blocks/{i}"
        try:
            parsed = Block.parse(block)
            if parsed is None:
                problems.append(f"unsupported type: {block.get('type')} [json-pointer:{pointer}]")
            else:
                parsed.validate_json()
        except (SlackObjectFormationError, KeyError, TypeError, ValueError) as exc:
            problems.append(f"{exc} [json-pointer:{pointer}]")
        problems += _empty_texts(block, pointer)
        block_id = block.get("block_id")
        if block_id in block_ids:
            problems.append(f"duplicate block_id: {block_id} [json-pointer:{pointer}/block_id]")
        if block_id is not None:
            block_ids.add(str(block_id))
        action_ids = [e.get("action_id") for e in block.get("elements", []) if isinstance(e, dict)]
        named = [a for a in action_ids if a]
        if len(named) != len(set(named)):
            problems.append(f"duplicate action_id in block [json-pointer:{pointer}/elements]")
    return problems


def block_problems(blocks: list[dict[str, Any]], max_blocks: int = 50) -> list[str]:
    """Violations of Slack's Block Kit limits (the ones tracegate can run into)."""
    problems = block_kit_problems(blocks)
    if len(blocks) > max_blocks:
        problems.append(f"{len(blocks)} blocks (max {max_blocks})")
    for i, block in enumerate(blocks):
        if block.get("type") == "context_actions":
            problems += [f"block {i}: {p}" for p in _context_actions_problems(block)]
        text = block.get("text") or {}
        if block.get("type") == "section" and len(text.get("text", "")) > 3000:
            problems.append(f"block {i}: section text {len(text['text'])} chars (max 3000)")
        if block.get("type") == "header" and len(text.get("text", "")) > 150:
            problems.append(f"block {i}: header text over 150 chars")
        for element in (
            block.get("elements", []) if block.get("type") in ("actions", "context") else []
        ):
            if element.get("type") == "button":
                if len(element["text"]["text"]) > 75:
                    problems.append(f"block {i}: button text over 75 chars")
                if len(element.get("value", "")) > 2000:
                    problems.append(f"block {i}: button value over 2000 chars")
                if len(element.get("action_id", "")) > 255:
                    problems.append(f"block {i}: action_id over 255 chars")
                confirm = element.get("confirm")
                if confirm and len(confirm["text"]["text"]) > 300:
                    problems.append(f"block {i}: confirm text over 300 chars")
        for f in block.get("fields", []):
            if len(f.get("text", "")) > 2000:
                problems.append(f"block {i}: field over 2000 chars")
    return problems


def _context_actions_problems(block: dict[str, Any]) -> list[str]:
    """A context_actions block holds 1 to 5 feedback or icon buttons; a feedback button's
    text is plain_text of at most 75 characters and its value at most 2000."""
    elements = block.get("elements") or []
    problems = [] if 1 <= len(elements) <= 5 else ["context_actions holds 1 to 5 elements"]
    for element in elements:
        if element.get("type") not in ("feedback_buttons", "icon_button"):
            problems.append(f"{element.get('type')!r} is not allowed in context_actions")
            continue
        for key in (
            ("positive_button", "negative_button") if element["type"] == "feedback_buttons" else ()
        ):
            button = element.get(key) or {}
            text = button.get("text") or {}
            if text.get("type") != "plain_text" or not 1 <= len(text.get("text", "")) <= 75:
                problems.append(f"{key}.text must be plain_text of 1 to 75 characters")
            if not 1 <= len(button.get("value", "")) <= 2000:
                problems.append(f"{key}.value must be 1 to 2000 characters")
    return problems


def view_problems(view: object) -> list[str]:
    """Violations of a modal's limits, as views.open reports them."""
    if not isinstance(view, dict) or view.get("type") != "modal":
        return ["view must be a modal object"]
    problems = block_problems(view.get("blocks") or [], max_blocks=100)
    title = (view.get("title") or {}).get("text", "")
    if not title or len(title) > 24:
        problems.append("title must be 1 to 24 characters")
    for key in ("submit", "close"):
        if key in view and len((view[key] or {}).get("text", "")) > 24:
            problems.append(f"{key} text over 24 characters")
    if any(b.get("type") == "input" for b in view.get("blocks") or []) and "submit" not in view:
        problems.append("a view with input blocks needs submit")
    if len(view.get("private_metadata", "")) > 3000:
        problems.append("private_metadata over 3000 characters")
    if len(view.get("callback_id", "")) > 255:
        problems.append("callback_id over 255 characters")
    return problems


_TASK_STATUSES = ("pending", "in_progress", "complete", "error")
MARKDOWN_TEXT_LIMIT = 12_000  # Slack: markdown_text, per call


def chunk_problems(chunks: object) -> list[str]:
    """What chat.*Stream refuse as `invalid_chunks`: read with slack_sdk's own chunk models
    (known types and their keys), plus each type's required fields, a task's status, its
    sources (URL elements), and the markdown length."""
    if not isinstance(chunks, list):
        return ["chunks must be an array"]
    problems: list[str] = []
    for i, chunk in enumerate(chunks):
        pointer = f"/chunks/{i}"
        if not isinstance(chunk, dict):
            problems.append(f"not an object [json-pointer:{pointer}]")
            continue
        parsed = Chunk.parse(chunk)
        if parsed is None:
            problems.append(f"unsupported type: {chunk.get('type')} [json-pointer:{pointer}]")
            continue
        unknown = set(chunk) - set(parsed.attributes)
        if unknown:
            problems.append(f"unknown keys {sorted(unknown)} [json-pointer:{pointer}]")
        kind = chunk["type"]
        if kind == "markdown_text":
            text = chunk.get("text")
            if not isinstance(text, str) or not text or len(text) > MARKDOWN_TEXT_LIMIT:
                problems.append(f"text must be 1 to 12000 characters [json-pointer:{pointer}]")
        elif kind == "plan_update":
            if not isinstance(chunk.get("title"), str) or not chunk["title"].strip():
                problems.append(f"title is required [json-pointer:{pointer}]")
        elif kind == "blocks":
            problems += [f"{p} [json-pointer:{pointer}]" for p in block_problems(chunk["blocks"])]
        elif kind == "task_update":
            for key in ("id", "title"):
                if not isinstance(chunk.get(key), str) or not chunk[key].strip():
                    problems.append(f"{key} is required [json-pointer:{pointer}/{key}]")
            if chunk.get("status") not in _TASK_STATUSES:
                problems.append(f"status must be one of {_TASK_STATUSES} [json-pointer:{pointer}]")
            for key in ("details", "output"):
                if key in chunk and not isinstance(chunk[key], str):
                    problems.append(f"{key} must be a string [json-pointer:{pointer}/{key}]")
            for j, source in enumerate(chunk.get("sources") or []):
                if not (
                    isinstance(source, dict)
                    and set(source) == {"type", "url", "text"}
                    and source["type"] == "url"
                    and str(source["url"]).startswith(("https://", "http://"))
                    and str(source["text"]).strip()
                ):
                    problems.append(f"invalid url source [json-pointer:{pointer}/sources/{j}]")
    return problems


# The scope each method needs, of those the bot calls that a workspace may not grant.
METHOD_SCOPES = {
    "files.getUploadURLExternal": "files:write",
    "files.completeUploadExternal": "files:write",
}


@dataclass
class SlackFile:
    """A file of the external upload flow: handed out, uploaded, then shared."""

    id: str
    filename: str
    length: int
    alt_txt: str
    data: bytes | None = None  # None until the upload of exactly `length` bytes
    title: str = ""
    channel: str | None = None  # shared: where, and in which thread
    thread_ts: str | None = None


TRIGGER_LIFETIME_S = 3.0  # Slack: a trigger_id expires 3 seconds after it is issued
HOOK_USES = 5  # Slack: a response_url may be used up to 5 times within 30 minutes
HOOK_LIFETIME_S = 30 * 60


@dataclass
class ResponseHook:
    """Where a response_url's posts go: the command's or the click's channel and user."""

    channel: str
    user: str
    created_at: float
    uses: int = 0


@dataclass
class SlackSimulator(SimulatorServer):
    calls: list[SlackCall] = field(default_factory=list)
    usergroups: dict[str, list[str]] = field(default_factory=dict)
    people: dict[str, SlackPerson] = field(default_factory=dict)  # users.info: see above
    home_team: str = TEAM  # the workspace plain members belong to (a driver sets its own)
    users_info_error: str | None = None  # users.info answers this error while set
    outside: set[str] = field(default_factory=set)  # channels the bot is not a member of
    # The workspace's channels (more join when a person writes in one, `post_as`).
    channels: set[str] = field(default_factory=lambda: {"C1"})
    bot_token: str = "xoxb-sandbox"  # the installation's tokens: any other is invalid_auth
    app_token: str = "xapp-sandbox"
    # chat.startStream's answer while the workspace cannot stream (e.g. "unknown_method",
    # "method_deprecated", "not_allowed_token_type"); None: streaming works.
    streaming_refused: str | None = None
    # Slack closes a stream nobody stopped after a few minutes (not documented how many).
    stream_timeout_s: float = 300.0
    scopes: set[str] | None = None  # the bot token's scopes; None: every one

    def __post_init__(self) -> None:
        super().__init__()
        self.messages: dict[tuple[str, str], SlackMessage] = {}  # the bot's own
        self.others: dict[tuple[str, str], SlackMessage] = {}  # people's and other apps'
        self.ephemeral: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []
        self._hooks: dict[str, ResponseHook] = {}
        self._clock = itertools.count(1)
        self._latest = 0.0  # the newest message ts seen or made
        self._limits: dict[str, tuple[int, int]] = {}
        self._dropped: dict[str, int] = {}  # method -> calls to apply, then not answer
        self._sockets: list[web.WebSocketResponse] = []
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._connected = asyncio.Event()
        self.views: list[dict[str, Any]] = []  # modals opened: {"user", "view"}
        self.homes: dict[str, dict[str, Any]] = {}  # user -> their published Home tab
        self.members: dict[str, set[str]] = {}  # channel -> its members (users.conversations)
        self._triggers: dict[str, tuple[float, str, bool]] = {}  # id -> (issued, user, used)
        self.uploads: dict[str, SlackFile] = {}  # file id -> the file

    def trigger(self, user: str) -> str:
        """A trigger_id as Slack issues one with an interaction: valid 3 s, once."""
        trigger_id = f"{next(self._clock)}.{uuid.uuid4().hex[:12]}"
        self._triggers[trigger_id] = (time.time(), user, False)
        return trigger_id

    # --- inspection ---------------------------------------------------------------------
    def calls_to(self, method: str) -> list[SlackCall]:
        return [c for c in self.calls if c.method == method]

    def thread(self, channel: str, thread_ts: str) -> list[SlackMessage]:
        """The bot's messages in a thread, in posting order."""
        found = [
            m
            for m in self.messages.values()
            if m.channel == channel and (m.thread_ts == thread_ts or m.ts == thread_ts)
        ]
        return sorted(found, key=lambda m: float(m.ts))

    def post_as(
        self,
        channel: str,
        text: str,
        *,
        ts: str | None = None,
        thread_ts: str | None = None,
        user: str = "",
        app: str | None = None,
        attachments: list[dict[str, Any]] | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> SlackMessage:
        """A message written by a person (`user`) or another app (`app`, its name)."""
        self.channels.add(channel)
        if ts:
            self._seen(ts)
        message = SlackMessage(
            channel,
            ts or self.new_ts(),
            text,
            blocks or [],
            thread_ts,
            user=user,
            bot_id=f"B{app.upper()[:8]}" if app else None,
            username=app,
            attachments=attachments or [],
        )
        self.others[(channel, message.ts)] = message
        return message

    def reactions_on(self, channel: str, ts: str) -> list[str]:
        message = self._find(channel, ts)
        return sorted(message.reactions) if message else []

    def _find(self, channel: str, ts: str) -> SlackMessage | None:
        return self.messages.get((channel, ts)) or self.others.get((channel, ts))

    def rate_limit(self, method: str, times: int = 1, retry_after: int = 1) -> None:
        self._limits[method] = (times, retry_after)

    def drop_after_applying(self, method: str, times: int = 1) -> None:
        """The next `times` calls of `method` take effect, then the connection is closed
        without an answer: the client cannot tell whether the call happened."""
        self._dropped[method] = times

    def new_ts(self) -> str:
        """Later than every message Slack has seen, as real message timestamps are."""
        ts = max(1_700_000_000 + next(self._clock), int(self._latest) + 1)
        self._latest = float(ts)
        return f"{ts}.000100"

    def _seen(self, *stamps: object) -> None:
        for stamp in stamps:
            try:
                self._latest = max(self._latest, float(str(stamp)))
            except ValueError:
                continue

    def response_url(self, channel: str, user: str) -> str:
        """A fresh response_url for a command or click in `channel` by `user`."""
        hook_id = uuid.uuid4().hex
        self._hooks[hook_id] = ResponseHook(channel, user, time.time())
        return f"{self.url}/hooks/{hook_id}"

    # --- HTTP -------------------------------------------------------------------------------
    def routes(self, app: web.Application) -> None:
        app.router.add_get("/link", self._socket)
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)  # slack_sdk GETs some read methods
        app.router.add_post("/hooks/{hook_id}", self._hook)
        app.router.add_post("/upload/v1/{file_id}", self._upload)

    async def _args(self, request: web.Request) -> dict[str, Any]:
        # slack_sdk sends some methods' arguments as query parameters, even on POST.
        if request.method == "GET" or not request.can_read_body:
            return dict(request.query)
        if request.content_type == "application/json":
            parsed: dict[str, Any] = await request.json()
            return parsed
        form = await request.post()
        args: dict[str, Any] = {}
        for key, value in form.items():
            text = str(value)
            args[key] = json.loads(text) if key in ("blocks", "attachments") else text
        return args

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.calls.append(SlackCall(method, args, f"{peer[0]}:{peer[1]}" if peer else ""))
        self._seen(*(args[k] for k in ("ts", "thread_ts", "timestamp") if args.get(k)))
        times, retry_after = self._limits.get(method, (0, 0))
        if times > 0:
            self._limits[method] = (times - 1, retry_after)
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(retry_after)},
            )
        token = request.headers.get("Authorization", "")
        if not token.removeprefix("Bearer ").strip():
            return web.json_response({"ok": False, "error": "not_authed"})
        if method == "apps.connections.open":
            if token != f"Bearer {self.app_token}":
                return web.json_response({"ok": False, "error": "invalid_auth"})
            return web.json_response({"ok": True, "url": self.url.replace("http", "ws") + "/link"})
        if token != f"Bearer {self.bot_token}":
            return web.json_response({"ok": False, "error": "invalid_auth"})
        channel = args.get("channel")
        if channel and not self._known_channel(str(channel)):
            return web.json_response({"ok": False, "error": "channel_not_found"})
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        needed = METHOD_SCOPES.get(method)
        if needed and self.scopes is not None and needed not in self.scopes:
            provided = ",".join(sorted(self.scopes))
            return web.json_response(
                {"ok": False, "error": "missing_scope", "needed": needed, "provided": provided}
            )
        body: dict[str, Any] = handler(args)
        if self._dropped.get(method, 0) > 0 and body.get("ok"):
            self._dropped[method] -= 1
            assert request.transport is not None
            request.transport.close()  # applied, and the client never hears of it
        return web.json_response(body)

    async def _hook(self, request: web.Request) -> web.Response:
        """A post to a response_url; Slack answers `ok`, or an error word with a 4xx."""
        hook = self._hooks.get(request.match_info["hook_id"])
        if hook is None:
            return web.Response(status=404, text="no_service")
        if time.time() - hook.created_at > HOOK_LIFETIME_S:
            return web.Response(status=404, text="expired_url")
        if hook.uses >= HOOK_USES:
            return web.Response(status=404, text="used_url")
        if request.content_type != "application/json":
            return web.Response(status=400, text="invalid_payload")
        try:
            body = await request.json()
        except ValueError:
            return web.Response(status=400, text="invalid_payload")
        if not isinstance(body, dict):
            return web.Response(status=400, text="invalid_payload")
        error = self._checked(body)
        if error is not None:
            return web.Response(status=400, text=str(error["error"]))
        kind = body.get("response_type", "ephemeral")
        if kind not in ("ephemeral", "in_channel"):
            return web.Response(status=400, text="invalid_payload")
        hook.uses += 1
        response = {"channel": hook.channel, "user": hook.user, **body}
        self.responses.append(response)
        if kind == "ephemeral":
            self.ephemeral.append({**response, "via": "response_url"})
        else:
            ts = self.new_ts()
            message = SlackMessage(
                hook.channel, ts, body.get("text", ""), body.get("blocks") or [], None
            )
            self.messages[(hook.channel, ts)] = message
        return web.Response(text="ok")

    async def _upload(self, request: web.Request) -> web.Response:
        """The upload URL files.getUploadURLExternal handed out: the file's bytes, once."""
        file = self.uploads.get(request.match_info["file_id"])
        if file is None or file.data is not None:
            return web.Response(status=404, text="not_found")
        if request.content_type.startswith("multipart/"):
            data = b""
            async for part in await request.multipart():
                if isinstance(part, aiohttp.BodyPartReader) and part.filename is not None:
                    data = await part.read()
        else:
            data = await request.read()
        if len(data) != file.length:
            return web.Response(status=400, text=f"size_mismatch: declared {file.length}")
        file.data = data
        return web.Response(text=f"OK - {len(data)}")

    # --- Socket Mode -------------------------------------------------------------------------
    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self._sockets.append(socket)
        hello = {"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A1"}}
        await socket.send_json(hello)
        self._connected.set()
        async for message in socket:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            body = json.loads(message.data)
            waiting = self._acks.pop(body.get("envelope_id", ""), None)
            if waiting is not None and not waiting.done():
                waiting.set_result(body)
        self._sockets.remove(socket)
        return socket

    async def socket_send(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Deliver one envelope (`events_api`, `interactive`, `slash_commands`); the ack."""
        async with asyncio.timeout(5):
            await self._connected.wait()
        envelope_id = uuid.uuid4().hex
        self._acks[envelope_id] = asyncio.get_running_loop().create_future()
        await self._sockets[-1].send_json(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "accepts_response_payload": kind != "events_api",
                "retry_attempt": 0,
                "retry_reason": "",
                "payload": payload,
            }
        )
        async with asyncio.timeout(5):
            return await self._acks[envelope_id]

    async def stop(self) -> None:
        for socket in list(self._sockets):
            await socket.close()
        await super().stop()

    def _known_channel(self, channel: str) -> bool:
        """A channel of the workspace; a user id (a DM) is one too."""
        return channel in self.channels or channel in self.outside or channel[:1] in "UW"

    def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "team_id": TEAM, "user_id": BOT_USER, "bot_id": "BBOT", "team": "sim"}

    def _checked(self, args: dict[str, Any]) -> dict[str, Any] | None:
        if args.get("channel") in self.outside:
            return {"ok": False, "error": "not_in_channel"}
        blocks = args.get("blocks") or []
        problems = block_problems(blocks)
        if problems:
            return {"ok": False, "error": "invalid_blocks", "errors": problems}
        if len(args.get("text", "")) > 40_000:
            return {"ok": False, "error": "msg_too_long"}
        if not args.get("text") and not blocks:
            return {"ok": False, "error": "no_text"}
        return None

    def _chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        error = self._checked(args)
        if error:
            return error
        metadata = args.get("metadata")
        if isinstance(metadata, str):  # form-encoded: a JSON string
            try:
                metadata = json.loads(metadata)
            except ValueError:
                return {"ok": False, "error": "invalid_metadata_format"}
        if metadata is not None and not (
            isinstance(metadata, dict)
            and isinstance(metadata.get("event_type"), str)
            and isinstance(metadata.get("event_payload"), dict)
        ):
            return {"ok": False, "error": "invalid_metadata_schema"}
        ts = self.new_ts()
        message = SlackMessage(
            args["channel"],
            ts,
            args.get("text", ""),
            args.get("blocks") or [],
            args.get("thread_ts"),
            metadata=metadata,
        )
        self.messages[(message.channel, ts)] = message
        return {"ok": True, "channel": message.channel, "ts": ts, "message": {"ts": ts}}

    def _chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        error = self._checked(args)
        if error:
            return error
        message = self.messages.get((args["channel"], args["ts"]))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if message.streaming():  # not documented either way: refused, so no test relies on it
            return {"ok": False, "error": "cant_update_message"}
        message.text = args.get("text", message.text)
        message.blocks = args.get("blocks") or []
        message.edits += 1
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    # --- streaming (chat.startStream / appendStream / stopStream) -------------------------
    def _stream_content(self, args: dict[str, Any], *, required: bool) -> dict[str, Any] | None:
        """An error for the call's markdown_text and chunks, or None."""
        chunks = args.get("chunks")
        if isinstance(chunks, str):  # form-encoded: a JSON string
            try:
                chunks = args["chunks"] = json.loads(chunks)
            except ValueError:
                return {"ok": False, "error": "invalid_chunks"}
        if chunks is not None:
            problems = chunk_problems(chunks)
            if problems:
                return {"ok": False, "error": "invalid_chunks", "errors": problems}
        text = args.get("markdown_text")
        if text is not None and len(str(text)) > MARKDOWN_TEXT_LIMIT:
            return {"ok": False, "error": "msg_too_long"}
        if required and not text and not chunks:
            return {"ok": False, "error": "no_text"}
        return None

    def _add_to_stream(self, message: SlackMessage, args: dict[str, Any]) -> None:
        if args.get("markdown_text"):
            message.text += str(args["markdown_text"])
        message.chunks += list(args.get("chunks") or [])

    def _open_stream(self, args: dict[str, Any]) -> SlackMessage | dict[str, Any]:
        message = self.messages.get((args["channel"], str(args.get("ts"))))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if not message.streaming():
            return {"ok": False, "error": "message_not_in_streaming_state"}
        return message

    def _chat_startStream(self, args: dict[str, Any]) -> dict[str, Any]:
        if self.streaming_refused:
            return {"ok": False, "error": self.streaming_refused}
        if args.get("channel") in self.outside:
            return {"ok": False, "error": "not_in_channel"}
        if not args.get("thread_ts"):  # a stream is always a reply to someone's message
            return {"ok": False, "error": "invalid_arguments"}
        if str(args["channel"])[:1] in "CG":  # channels: the person it is for is required
            for key in ("recipient_team_id", "recipient_user_id"):
                if not args.get(key):
                    return {"ok": False, "error": f"missing_{key}"}
        if args.get("task_display_mode") not in (None, "timeline", "plan"):
            return {"ok": False, "error": "invalid_arguments"}
        error = self._stream_content(args, required=False)
        if error:
            return error
        ts = self.new_ts()
        message = SlackMessage(
            args["channel"],
            ts,
            "",
            [],
            args["thread_ts"],
            streaming_until=time.time() + self.stream_timeout_s,
            recipient=args.get("recipient_user_id"),
        )
        self._add_to_stream(message, args)
        self.messages[(message.channel, ts)] = message
        return {"ok": True, "channel": message.channel, "ts": ts}

    def _chat_appendStream(self, args: dict[str, Any]) -> dict[str, Any]:
        found = self._open_stream(args)
        if isinstance(found, dict):
            return found
        error = self._stream_content(args, required=True)
        if error:
            return error
        self._add_to_stream(found, args)
        found.edits += 1
        return {"ok": True, "channel": found.channel, "ts": found.ts}

    def _chat_stopStream(self, args: dict[str, Any]) -> dict[str, Any]:
        found = self._open_stream(args)
        if isinstance(found, dict):
            return found
        error = self._stream_content(args, required=False)
        if error:
            return error
        blocks = args.get("blocks") or []
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        problems = block_problems(blocks)
        if problems:
            return {"ok": False, "error": "invalid_blocks", "errors": problems}
        self._add_to_stream(found, args)
        found.blocks = blocks
        found.streaming_until = None
        found.edits += 1
        return {"ok": True, "channel": found.channel, "ts": found.ts}

    def _chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        error = self._checked(args)
        if error:
            return error
        self.ephemeral.append(args)
        return {"ok": True, "message_ts": self.new_ts()}

    def _chat_getPermalink(self, args: dict[str, Any]) -> dict[str, Any]:
        ts = args["message_ts"]
        return {
            "ok": True,
            "channel": args["channel"],
            "permalink": f"https://sim.slack.com/archives/{args['channel']}/p{ts.replace('.', '')}",
        }

    def _views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        """A modal for the person whose interaction issued `trigger_id` (3 s, once)."""
        issued = self._triggers.get(str(args.get("trigger_id", "")))
        if issued is None:
            return {"ok": False, "error": "invalid_trigger_id"}
        at, user, used = issued
        if used:
            return {"ok": False, "error": "exchanged_trigger_id"}
        if time.time() - at > TRIGGER_LIFETIME_S:
            return {"ok": False, "error": "expired_trigger_id"}
        view = args.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        problems = view_problems(view)
        if problems or not isinstance(view, dict):
            return {
                "ok": False,
                "error": "invalid_arguments",
                "response_metadata": {"messages": [f"[ERROR] {p}" for p in problems]},
            }
        self._triggers[str(args["trigger_id"])] = (at, user, True)
        view_id = f"V{uuid.uuid4().hex[:10].upper()}"
        self.views.append({"user": user, "view": {**view, "id": view_id}})
        return {"ok": True, "view": {**view, "id": view_id}}

    def _views_publish(self, args: dict[str, Any]) -> dict[str, Any]:
        view = args.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        user = str(args.get("user_id", ""))
        if not user:
            return {"ok": False, "error": "invalid_arguments"}
        if not isinstance(view, dict) or view.get("type") != "home":
            return {"ok": False, "error": "invalid_arguments"}
        if problems := block_problems(view.get("blocks") or [], max_blocks=100):
            messages = [f"[ERROR] {p}" for p in problems]
            return {
                "ok": False,
                "error": "invalid_blocks",
                "response_metadata": {"messages": messages},
            }
        view_id = f"V{uuid.uuid4().hex[:10].upper()}"
        self.homes[user] = {**view, "id": view_id}
        return {"ok": True, "view": {**view, "id": view_id}}

    def _users_conversations(self, args: dict[str, Any]) -> dict[str, Any]:
        """The channels `user` is a member of (as the bot can see them), a page at a time."""
        user = str(args.get("user", ""))
        mine = sorted(c for c, people in self.members.items() if user in people)
        start = int(args.get("cursor") or 0)
        limit = min(int(args.get("limit") or 100), 1000)
        page = mine[start : start + limit]
        more = start + limit < len(mine)
        return {
            "ok": True,
            "channels": [{"id": c, "is_member": True} for c in page],
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def team_of(self, user: str) -> str:
        """The workspace `user` belongs to (theirs, for a Slack Connect user)."""
        person = self.people.get(user)
        return (person.team_id if person else None) or self.home_team

    def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        """A user object as Slack returns it (the fields tracegate and access checks read)."""
        if self.users_info_error:
            return {"ok": False, "error": self.users_info_error}
        user = str(args.get("user", ""))
        if user[:1] not in ("U", "W") or not user[1:].replace("_", "").isalnum():
            return {"ok": False, "error": "user_not_found"}
        person = self.people.get(user, SlackPerson())
        found: dict[str, Any] = {
            "id": user,
            "team_id": self.team_of(user),
            "name": user.lower(),
            "deleted": False,
            "real_name": user,
            "is_admin": False,
            "is_owner": False,
            "is_bot": user == BOT_USER,
            "is_app_user": False,
            "is_restricted": person.is_restricted or person.is_ultra_restricted,
            "is_ultra_restricted": person.is_ultra_restricted,
            "updated": 1_700_000_000,
        }
        if person.enterprise_id:
            found["enterprise_user"] = {
                "id": user,
                "enterprise_id": person.enterprise_id,
                "enterprise_name": person.enterprise_id,
                "is_admin": False,
                "is_owner": False,
                "teams": [found["team_id"]],
            }
        return {"ok": True, "user": found}

    def _usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        group = args.get("usergroup", "")
        if group not in self.usergroups:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": self.usergroups[group]}

    @staticmethod
    def _within(args: dict[str, Any]) -> Callable[[SlackMessage], bool]:
        """`oldest`/`latest` as Slack reads them: exclusive unless `inclusive`."""
        inclusive = str(args.get("inclusive", "")).lower() in ("1", "true")
        oldest, latest = float(args.get("oldest") or 0), float(args.get("latest") or "inf")

        def within(m: SlackMessage) -> bool:
            at = float(m.ts)
            return oldest <= at <= latest if inclusive else oldest < at < latest

        return within

    @staticmethod
    def _page(found: list[SlackMessage], args: dict[str, Any], most: int) -> dict[str, Any]:
        """At most `limit` (≤ `most`) a page, then a cursor; metadata only when asked."""
        everything = str(args.get("include_all_metadata", "")).lower() in ("1", "true")
        limit = max(1, min(int(args.get("limit") or most), most))
        start = int(args.get("cursor") or 0)
        page = found[start : start + limit]
        more = start + limit < len(found)
        return {
            "ok": True,
            "messages": [m.as_api(metadata=everything) for m in page],
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        """A channel's top-level messages, newest first, as Slack returns them (100 a page
        unless `limit`, at most 999)."""
        channel = args.get("channel", "")
        if channel not in self.channels:
            return {"ok": False, "error": "channel_not_found"}
        within = self._within(args)
        every = {**self.messages, **self.others}.values()
        found = sorted(
            (m for m in every if m.channel == channel and m.thread_ts is None and within(m)),
            key=lambda m: float(m.ts),
            reverse=True,
        )
        return self._page(found, {"limit": 100, **args}, 999)

    def _conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        """The parent first, then replies oldest first; `oldest`/`latest` bound the replies
        (exclusive unless `inclusive`); at most `limit` (≤ 1000) a page, then a cursor."""
        channel, root = args["channel"], args["ts"]
        parent = self._find(channel, root)
        if parent is None:
            return {"ok": False, "error": "thread_not_found"}
        within = self._within(args)
        every = {**self.messages, **self.others}.values()
        replies = sorted(
            (m for m in every if m.channel == channel and m.thread_ts == root and m.ts != root),
            key=lambda m: float(m.ts),
        )
        return self._page([parent, *(m for m in replies if within(m))], args, 1000)

    # --- files (the external upload flow) ---------------------------------------------------
    def _files_getUploadURLExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        filename = str(args.get("filename") or "")
        try:
            length = int(str(args.get("length", "")))
        except ValueError:
            length = -1
        if not filename or length <= 0:
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F{uuid.uuid4().hex[:10].upper()}"
        alt = str(args.get("alt_txt") or "")
        self.uploads[file_id] = SlackFile(file_id, filename, length, alt)
        return {"ok": True, "upload_url": f"{self.url}/upload/v1/{file_id}", "file_id": file_id}

    def _files_completeUploadExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        try:
            listed = json.loads(args["files"]) if isinstance(args.get("files"), str) else None
        except ValueError:
            listed = None
        if not isinstance(listed, list) or not listed:
            return {"ok": False, "error": "invalid_arguments"}
        channel, thread_ts = args.get("channel_id"), args.get("thread_ts")
        if thread_ts and not channel:
            return {"ok": False, "error": "invalid_arguments"}
        if channel and not self._known_channel(str(channel)):
            return {"ok": False, "error": "channel_not_found"}
        if channel in self.outside:
            return {"ok": False, "error": "not_in_channel"}
        files: list[SlackFile] = []
        for item in listed:
            file = self.uploads.get(str(item.get("id"))) if isinstance(item, dict) else None
            if file is None or file.data is None or file.channel is not None:
                return {"ok": False, "error": "file_not_found"}
            files.append(file)
        shown = []
        for file, item in zip(files, listed, strict=True):
            file.title = str(item.get("title") or file.filename)
            file.channel, file.thread_ts = channel, thread_ts
            shown.append({"id": file.id, "name": file.filename, "title": file.title})
        if channel:
            ts = self.new_ts()
            comment = str(args.get("initial_comment") or "")
            message = SlackMessage(str(channel), ts, comment, [], thread_ts, files=shown)
            self.messages[(message.channel, ts)] = message
        return {"ok": True, "files": [{"id": f["id"], "title": f["title"]} for f in shown]}

    def files_in(self, channel: str, thread_ts: str) -> list[SlackFile]:
        """The files shared in a thread, in upload order."""
        return [
            f for f in self.uploads.values() if f.channel == channel and f.thread_ts == thread_ts
        ]

    def _reactions_add(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self._find(args["channel"], args["timestamp"])
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        users = message.reactions.setdefault(args["name"], set())
        if BOT_USER in users:
            return {"ok": False, "error": "already_reacted"}
        users.add(BOT_USER)
        return {"ok": True}

    def _reactions_remove(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self._find(args["channel"], args["timestamp"])
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        users = message.reactions.get(args["name"], set())
        if BOT_USER not in users:
            return {"ok": False, "error": "no_reaction"}
        users.discard(BOT_USER)
        if not users:
            del message.reactions[args["name"]]
        return {"ok": True}


def sign(secret: str, body: str, timestamp: int) -> str:
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


@dataclass
class SlackDriver:
    """Slack's side of the conversation: what the bot receives over HTTP."""

    bot_url: str
    signing_secret: str
    team: str = TEAM
    # With the simulator: the people's messages this driver sends are stored there too, as
    # Slack stores them (conversations.replies and reactions see them), response URLs reach
    # it, and clicks carry the message as posted.
    slack: SlackSimulator | None = None
    enterprise: str | None = None  # the workspace's Enterprise org (Enterprise Grid)

    def __post_init__(self) -> None:
        if self.slack is not None:  # plain members of the simulated workspace are this one's
            self.slack.home_team = self.team

    def _team_of(self, user: str) -> str:
        """The person's own workspace: this one, unless the simulator says otherwise."""
        person = self.slack.people.get(user) if self.slack is not None else None
        return (person.team_id if person else None) or self.team

    def _response_url(self, kind: str, channel: str, user: str) -> str:
        if self.slack is None:
            return f"https://hooks.slack.invalid/{kind}"
        self.slack.channels.add(channel)  # someone acted in it: the workspace has it
        return self.slack.response_url(channel, user)

    async def post(
        self,
        body: str,
        content_type: str,
        *,
        timestamp: int | None = None,
        secret: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        stamp = int(time.time()) if timestamp is None else timestamp
        sent = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": str(stamp),
            "X-Slack-Signature": sign(secret or self.signing_secret, body, stamp),
            **(headers or {}),
        }
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{self.bot_url}/slack/events", data=body, headers=sent) as response,
        ):
            return response.status, await response.text()

    def envelope(self, event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
        """An Events API envelope, as delivered over HTTP or Socket Mode."""
        return {
            "token": "legacy",
            "team_id": self.team,
            "api_app_id": "A1",
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{uuid.uuid4().hex[:10]}",
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": self.enterprise,
                    "team_id": self.team,
                    "user_id": BOT_USER,
                    "is_bot": True,
                }
            ],
            **({"enterprise_id": self.enterprise} if self.enterprise else {}),
        }

    async def event(
        self, event: dict[str, Any], *, event_id: str | None = None, retry: int = 0, **kw: Any
    ) -> tuple[int, str]:
        envelope = self.envelope(event, event_id)
        headers = {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
        return await self.post(
            json.dumps(envelope), "application/json", headers=headers if retry else None, **kw
        )

    async def mention(
        self,
        text: str,
        *,
        user: str = "U_ONCALL",
        channel: str = "C1",
        ts: str,
        thread_ts: str | None = None,
        event_id: str | None = None,
        retry: int = 0,
    ) -> tuple[int, str]:
        event = {
            "type": "app_mention",
            "user": user,
            "text": f"<@{BOT_USER}> {text}",
            "ts": ts,
            "channel": channel,
            "event_ts": ts,
            "team": self.team,
            "user_team": self._team_of(user),
            **({"thread_ts": thread_ts} if thread_ts else {}),
        }
        self._store(event)
        return await self.event(event, event_id=event_id, retry=retry)

    def _store(self, event: dict[str, Any]) -> None:
        if self.slack is not None and (event["channel"], event["ts"]) not in self.slack.others:
            self.slack.post_as(
                event["channel"],
                event["text"],
                ts=event["ts"],
                thread_ts=event.get("thread_ts"),
                user=event["user"],
            )

    async def reply(
        self, text: str, *, user: str = "U_ONCALL", channel: str = "C1", ts: str, thread_ts: str
    ) -> tuple[int, str]:
        event = {
            "type": "message",
            "user": user,
            "text": text,
            "ts": ts,
            "channel": channel,
            "channel_type": "channel",
            "event_ts": ts,
            "thread_ts": thread_ts,
            "team": self.team,
            "user_team": self._team_of(user),
        }
        self._store(event)
        return await self.event(event)

    async def click(
        self, action_id: str, value: str, *, user: str, channel: str, message_ts: str
    ) -> tuple[int, str]:
        """A click on a button under a message."""
        action = {"action_id": action_id, "type": "button", "value": value}
        return await self._block_action(action, user=user, channel=channel, message_ts=message_ts)

    async def _block_action(
        self, action: dict[str, Any], *, user: str, channel: str, message_ts: str
    ) -> tuple[int, str]:
        message: dict[str, Any] = {"ts": message_ts, "type": "message"}
        container = {"type": "message", "message_ts": message_ts, "channel_id": channel}
        posted = self.slack.messages.get((channel, message_ts)) if self.slack else None
        if posted is not None:  # Slack sends the message as it is, thread included
            message.update(text=posted.text, blocks=posted.blocks, user=BOT_USER)
            if posted.thread_ts:
                message["thread_ts"] = container["thread_ts"] = posted.thread_ts
        return await self._send_block_actions(
            user,
            container,
            action,
            channel={"id": channel},
            message=message,
            response_url=self._response_url("actions", channel, user),
        )

    async def _send_block_actions(
        self, user: str, container: dict[str, Any], action: dict[str, Any], **where: Any
    ) -> tuple[int, str]:
        """A signed `block_actions` interaction: `where` is the message's or the view's part."""
        payload = {
            "type": "block_actions",
            "team": {"id": self.team},
            "enterprise": {"id": self.enterprise} if self.enterprise else None,
            "user": {"id": user, "username": user, "team_id": self._team_of(user)},
            "api_app_id": "A1",
            "token": "legacy",
            "container": container,
            "trigger_id": self.slack.trigger(user) if self.slack else uuid.uuid4().hex,
            **where,
            "actions": [{**action, "block_id": "b", "action_ts": str(time.time())}],
        }
        body = urlencode({"payload": json.dumps(payload)})
        return await self.post(body, "application/x-www-form-urlencoded")

    async def feedback(
        self, value: str, *, user: str, channel: str, message_ts: str
    ) -> tuple[int, str]:
        """A click on a feedback button (👍 or 👎, by its `value`) under a message."""
        return await self._block_action(
            {"action_id": "answer_feedback", "type": "feedback_buttons", "value": value},
            user=user,
            channel=channel,
            message_ts=message_ts,
        )

    async def submit_view(
        self, view: dict[str, Any], values: dict[str, dict[str, str]], *, user: str
    ) -> tuple[int, str]:
        """A modal submitted: `values` maps block_id -> action_id -> the text typed."""
        state = {
            block: {
                action: {"type": "plain_text_input", "value": text}
                for action, text in actions.items()
            }
            for block, actions in values.items()
        }
        payload = {
            "type": "view_submission",
            "team": {"id": self.team, "domain": "sim"},
            "user": {"id": user, "username": user, "team_id": self._team_of(user)},
            "api_app_id": "A1",
            "token": "legacy",
            "trigger_id": self.slack.trigger(user) if self.slack else uuid.uuid4().hex,
            "view": {**view, "state": {"values": state}},
        }
        body = urlencode({"payload": json.dumps(payload)})
        return await self.post(body, "application/x-www-form-urlencoded")

    async def home_opened(self, user: str) -> tuple[int, str]:
        """The person opened the app's Home tab."""
        event = {
            "type": "app_home_opened",
            "user": user,
            "channel": f"D{user}",
            "tab": "home",
            "event_ts": str(time.time()),
        }
        return await self.event(event)

    async def home_click(
        self, action_id: str, *, user: str, forged_value: str | None = None
    ) -> tuple[int, str]:
        """A click on a button of the user's published App Home tab, as Slack sends it (after
        the button's confirmation dialog, if it has one). Slack only sends clicks on buttons
        the view shows: one that is not there raises, unless `forged_value` is given (a
        hand-made payload, as an attacker could sign only with the app's secret)."""
        view = dict(self.slack.homes.get(user) or {}) if self.slack else {}
        shown = [
            element
            for block in view.get("blocks") or []
            for element in [block.get("accessory"), *(block.get("elements") or [])]
            if isinstance(element, dict) and element.get("action_id") == action_id
        ]
        if forged_value is None and not shown:
            raise ValueError(f"{user}'s Home tab shows no {action_id} button")
        value = forged_value if forged_value is not None else str(shown[0].get("value", ""))
        view_id = str(view.get("id") or f"V{uuid.uuid4().hex[:10].upper()}")
        return await self._send_block_actions(
            user,
            {"type": "view", "view_id": view_id},
            {"action_id": action_id, "type": "button", "value": value},
            view={**view, "id": view_id},
        )

    async def message_shortcut(
        self, callback_id: str, message: SlackMessage, *, user: str = "U_ONCALL"
    ) -> tuple[int, str]:
        """A message shortcut ("…" menu on a message) as Slack delivers it: `message_action`."""
        payload = {
            "type": "message_action",
            "callback_id": callback_id,
            "trigger_id": uuid.uuid4().hex,
            "action_ts": str(time.time()),
            "team": {"id": self.team, "domain": "sim"},
            "user": {"id": user, "username": user, "team_id": self._team_of(user)},
            "channel": {"id": message.channel, "name": "incidents"},
            "message_ts": message.ts,
            "message": message.as_api(),
            "response_url": self._response_url("shortcuts", message.channel, user),
            "token": "legacy",
        }
        body = urlencode({"payload": json.dumps(payload)})
        return await self.post(body, "application/x-www-form-urlencoded")

    async def slash(
        self, command: str, text: str, *, user: str = "U_ONCALL", channel: str = "C1"
    ) -> tuple[int, str]:
        form = {
            "token": "legacy",
            "team_id": self.team,
            "channel_id": channel,
            "user_id": user,
            "command": command,
            "text": text,
            "response_url": self._response_url("commands", channel, user),
            "trigger_id": uuid.uuid4().hex,
            "api_app_id": "A1",
        }
        return await self.post(urlencode(form), "application/x-www-form-urlencoded")
