"""A Gemini REST API simulator driven by a script of replies.

`POST /v1/models/<model>:generateContent` (also `/v1beta/`) and `:streamGenerateContent`
(`?alt=sse`). Every request is recorded so tests can assert what the model was shown.

Replies are consumed in order, from the model's own script when one was given for that
model name, else from the shared script. A reply may be a callable that builds the reply
from the request (for scripted replays that react to what they were asked).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from sandbox.server import SimulatorServer


@dataclass(frozen=True)
class Reply:
    """One scripted model turn (or an HTTP error)."""

    parts: tuple[dict[str, Any], ...] = ()
    status: int = 200
    error_message: str = ""
    delay_s: float = 0.0

    @classmethod
    def text(cls, text: str) -> Reply:
        return cls(parts=({"text": text},))

    @classmethod
    def call(cls, name: str, **args: Any) -> Reply:
        return cls(parts=({"functionCall": {"name": name, "args": args}},))

    @classmethod
    def calls(cls, *calls: tuple[str, dict[str, Any]]) -> Reply:
        return cls(parts=tuple({"functionCall": {"name": n, "args": a}} for n, a in calls))

    @classmethod
    def json(cls, obj: Any) -> Reply:
        """Structured output: the JSON document as the text part."""
        return cls(parts=({"text": json.dumps(obj)},))

    @classmethod
    def error(cls, status: int = 500, message: str = "simulated failure") -> Reply:
        return cls(status=status, error_message=message)

    def body(self, prompt_tokens: int = 1) -> dict[str, Any]:
        return {
            "candidates": [
                {"content": {"role": "model", "parts": list(self.parts)}, "finishReason": "STOP"}
            ],
            "usageMetadata": {
                "promptTokenCount": prompt_tokens,
                "candidatesTokenCount": 1,
                "totalTokenCount": prompt_tokens + 1,
            },
            "modelVersion": "sandbox",
            "responseId": uuid.uuid4().hex,
        }


@dataclass
class GeminiRequest:
    model: str
    body: dict[str, Any]
    stream: bool

    @property
    def contents(self) -> list[dict[str, Any]]:
        contents: list[dict[str, Any]] = self.body.get("contents", [])
        return contents

    def text(self) -> str:
        """Every text part (system instruction, turns, function responses) joined."""
        chunks: list[str] = []
        system = self.body.get("systemInstruction") or self.body.get("system_instruction")
        for content in ([system] if system else []) + self.contents:
            for part in content.get("parts", []):
                if "text" in part:
                    chunks.append(part["text"])
                elif "functionResponse" in part:
                    chunks.append(json.dumps(part["functionResponse"], ensure_ascii=False))
        return "\n".join(chunks)

    @property
    def prompt_tokens(self) -> int:
        """What the simulator reports as the prompt's size: about 4 characters a token over
        everything the model is sent (instruction, turns, tool declarations)."""
        return -(-len(json.dumps(self.body, ensure_ascii=False)) // 4)

    @property
    def tool_names(self) -> list[str]:
        return [
            decl["name"]
            for tool in self.body.get("tools", [])
            for decl in tool.get("functionDeclarations", [])
        ]

    @property
    def wants_json(self) -> bool:
        config = self.body.get("generationConfig", {})
        return bool(config.get("responseMimeType") == "application/json")


Scripted = Reply | Callable[[GeminiRequest], Reply]


@dataclass
class GeminiSimulator(SimulatorServer):
    requests: list[GeminiRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()
        self._shared: deque[Scripted] = deque()
        self._per_model: dict[str, deque[Scripted]] = {}
        self._arrived = asyncio.Condition()

    def script(self, *replies: Scripted, model: str | None = None) -> None:
        """Queue replies, for one model name or (default) for any model."""
        queue = self._shared if model is None else self._per_model.setdefault(model, deque())
        queue.extend(replies)

    async def wait_for_request(self, model: str, timeout_s: float = 5.0) -> GeminiRequest:
        """The first request for `model`, waiting for it to arrive if need be."""
        async with asyncio.timeout(timeout_s), self._arrived:
            await self._arrived.wait_for(lambda: any(r.model == model for r in self.requests))
        return next(r for r in self.requests if r.model == model)

    @property
    def pending(self) -> int:
        return len(self._shared) + sum(len(q) for q in self._per_model.values())

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/{version}/models/{model_action}", self._generate)

    def _next(self, request: GeminiRequest) -> Reply:
        queue = self._per_model.get(request.model)
        if not queue:
            queue = self._shared
        if not queue:
            return Reply.error(500, f"gemini simulator: no scripted reply left for {request.model}")
        item = queue.popleft()
        return item(request) if callable(item) else item

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        model, _, action = request.match_info["model_action"].partition(":")
        if action not in ("generateContent", "streamGenerateContent"):
            return web.json_response(
                {"error": {"code": 404, "message": "unknown method"}}, status=404
            )
        recorded = GeminiRequest(model, await request.json(), action == "streamGenerateContent")
        self.requests.append(recorded)
        async with self._arrived:
            self._arrived.notify_all()
        reply = self._next(recorded)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.status != 200:
            error = {"code": reply.status, "message": reply.error_message, "status": "INTERNAL"}
            return web.json_response({"error": error}, status=reply.status)
        if not recorded.stream:
            return web.json_response(reply.body(recorded.prompt_tokens))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        body = reply.body(recorded.prompt_tokens)
        await response.write(f"data: {json.dumps(body)}\r\n\r\n".encode())
        await response.write_eof()
        return response
