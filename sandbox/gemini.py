"""A Gemini REST API simulator driven by a script of replies.

`POST /v1/models/<model>:generateContent` (also `/v1beta/`) and `:streamGenerateContent`
(`?alt=sse`). Every request is recorded so tests can assert what the model was shown.

Vertex AI too, as strict as Google: `POST /v1beta1/projects/<p>/locations/<l>/publishers/google/
models/<model>:generateContent` (and `/v1/`, and the streaming variant) answers only with
`Authorization: Bearer <token>` (401 `UNAUTHENTICATED` otherwise), a token this simulator issued
to a service account that was granted that project (403 `PERMISSION_DENIED` otherwise). Tokens
come from `POST /token`, OAuth 2's JWT-bearer grant as Google's token endpoint takes it from a
service account's key file (`token_uri`): an RS256 assertion, verified with the public key given
to `grant()`, whose `iss` is the account, `aud` Google's token endpoint, with a scope, and not
expired; anything else is `400 invalid_grant`.

Replies are consumed in order, from the model's own script when one was given for that
model name, else from the shared script. A reply may be a callable that builds the reply
from the request (for scripted replays that react to what they were asked).

Capacity, as the real API has it: per-model quota windows (`limit`: requests and input
tokens per window, 60 s like the API's per-minute quotas unless a test shortens it) answer
`429 RESOURCE_EXHAUSTED` with a `QuotaFailure` and a `RetryInfo.retryDelay`; an outage
(`outage`) answers 429 (or `503 UNAVAILABLE`, "the model is overloaded") to every request
for a while. A refused request is recorded (`requests`, with `status`) and consumes no
scripted reply.

Strict where the real API is strict:
- Thought signatures (Gemini 3): the first `functionCall` part of each reply carries a
  `thoughtSignature`. In the current turn (the contents after the last user text), the
  first function call of every model step must come back with the signature that was
  issued for it: a missing one is `400 INVALID_ARGUMENT`, one this API never issued is
  "Corrupted thought signature" (400). The documented bypass value
  (`skip_thought_signature_validator`) is accepted, as the API accepts it, and counted on
  the request (`GeminiRequest.bypassed_signatures`): a caller that lost a signature shows.
  Models before Gemini 3 (`gemini-2.5-...`) are not checked, as the API does not.
- Finish reasons: a reply may end `SAFETY` (blocked: no content) or `MAX_TOKENS` (cut off).
- Errors carry the API's status names (`INVALID_ARGUMENT`, `RESOURCE_EXHAUSTED`,
  `UNAVAILABLE`, `INTERNAL`, ...), by HTTP code.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import json
import math
import os
import re
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from sandbox.server import SimulatorServer


@dataclass(frozen=True)
class Reply:
    """One scripted model turn (or an HTTP error)."""

    parts: tuple[dict[str, Any], ...] = ()
    status: int = 200
    error_message: str = ""
    delay_s: float = 0.0
    finish_reason: str = "STOP"  # or SAFETY (blocked: no content), MAX_TOKENS (cut off)
    output_tokens: int = 1  # candidatesTokenCount reported (a script may set a real size)

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

    @classmethod
    def quota(cls, retry_delay_s: float = 6.0) -> Reply:
        """429 RESOURCE_EXHAUSTED for this one request, asking to retry in `retry_delay_s`."""
        return cls(status=429, error_message=f"{retry_delay_s:g}")

    @classmethod
    def blocked(cls) -> Reply:
        """The answer withheld by the safety filters: `finishReason: SAFETY`, no content."""
        return cls(finish_reason="SAFETY")

    @classmethod
    def cut_off(cls, text: str = "") -> Reply:
        """The answer cut at the output token limit: `finishReason: MAX_TOKENS`, with the
        text written so far (if any)."""
        return cls(parts=({"text": text},) if text else (), finish_reason="MAX_TOKENS")

    @classmethod
    def overloaded(cls) -> Reply:
        """503 UNAVAILABLE for this one request."""
        return cls(status=503)

    def body(self, prompt_tokens: int = 1, cached_tokens: int = 0) -> dict[str, Any]:
        candidate: dict[str, Any] = {"finishReason": self.finish_reason, "index": 0}
        if self.parts:
            candidate["content"] = {"role": "model", "parts": list(self.parts)}
        if self.finish_reason == "SAFETY":
            rating = {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}
            candidate["safetyRatings"] = [{**rating, "blocked": True}]
        usage = {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": self.output_tokens,
            "totalTokenCount": prompt_tokens + self.output_tokens,
        }
        if cached_tokens:  # part of promptTokenCount, as Gemini counts it
            usage["cachedContentTokenCount"] = cached_tokens
        return {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": "sandbox",
            "responseId": uuid.uuid4().hex,
        }


@dataclass
class GeminiRequest:
    model: str
    body: dict[str, Any]
    stream: bool
    at: float = field(default_factory=time.monotonic)  # when it arrived
    status: int = 200  # what the simulator answered (429/503: refused for capacity)
    bypassed_signatures: int = 0  # function calls sent back with the bypass, not their own
    path: str = ""  # the URL path it came to (the Gemini API's, or Vertex AI's)
    cached_tokens: int = 0  # what the simulator reported as served from the implicit cache

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

    @functools.cached_property
    def cache_key(self) -> str:
        """The prompt in the order the implicit cache matches prefixes: the instruction,
        the tool declarations, then the turns."""
        system = self.body.get("systemInstruction") or self.body.get("system_instruction")
        parts = (system, self.body.get("tools"), self.contents)
        return "".join(json.dumps(p, ensure_ascii=False, sort_keys=True) for p in parts)

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

# Gemini's implicit caching starts at 1,024 prompt tokens (2.5 Flash; larger for Pro models).
IMPLICIT_CACHE_MIN_TOKENS = 1024


def _common_prefix(a: str, b: str) -> int:
    """How many leading characters a and b share (bisected with slice comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


@dataclass
class Quota:
    """A model's per-window quota: requests (rpm) and input tokens (tpm); 0 = none."""

    rpm: int = 0
    tpm: int = 0
    window_s: float = 60.0
    admitted: deque[tuple[float, int]] = field(default_factory=deque)  # (at, prompt tokens)

    def refusal(self, now: float, tokens: int) -> tuple[str, float] | None:
        """The quota a request at `now` would exceed and when it may come back; None: fits."""
        while self.admitted and self.admitted[0][0] <= now - self.window_s:
            self.admitted.popleft()
        if self.rpm and len(self.admitted) >= self.rpm:
            oldest = self.admitted[len(self.admitted) - self.rpm][0]
            return "GenerateRequestsPerMinutePerProjectPerModel", oldest + self.window_s - now
        used = sum(t for _, t in self.admitted)
        if self.tpm and used + tokens > self.tpm and self.admitted:
            freed, frees_at = 0, now
            for frees_at, spent in self.admitted:  # noqa: B007 (read after the loop)
                freed += spent
                if used - freed + tokens <= self.tpm:
                    break
            return "GenerateContentInputTokensPerModelPerMinute", frees_at + self.window_s - now
        self.admitted.append((now, tokens))
        return None


@dataclass
class Outage:
    """Every request (for one model, or all) refused until `until`."""

    until: float
    status: int  # 429 or 503
    model: str | None
    retry_delay_s: float | None  # in RetryInfo (429) or Retry-After (503); None: the rest


def quota_error(metric: str, model: str, limit: int, retry_delay_s: float) -> dict[str, Any]:
    """A 429 body as the Gemini API sends it."""
    return {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota, please check your plan and billing "
            f"details. Please retry in {retry_delay_s:.1f}s.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {
                    "@type": QUOTA_FAILURE,
                    "violations": [
                        {
                            "quotaMetric": "generativelanguage.googleapis.com/"
                            + ("input_token_count" if "Token" in metric else "request_count"),
                            "quotaId": metric,
                            "quotaDimensions": {"location": "global", "model": model},
                            "quotaValue": str(limit),
                        }
                    ],
                },
                {"@type": RETRY_INFO, "retryDelay": f"{math.ceil(retry_delay_s)}s"},
            ],
        }
    }


# The API's status name for each HTTP code it answers with (google.rpc.Code).
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

SKIP_SIGNATURE = "skip_thought_signature_validator"  # the API's documented bypass


def api_error(code: int, message: str) -> web.Response:
    """An error as the Gemini API words it: its code, message and status name."""
    error = {"code": code, "message": message, "status": STATUS_NAMES.get(code, "UNKNOWN")}
    return web.json_response({"error": error}, status=code)


def checks_signatures(model: str) -> bool:
    """Gemini 3 and later validate thought signatures; earlier models do not."""
    found = re.match(r"gemini-(\d+)", model)
    return found is None or int(found.group(1)) >= 3


def signature_bytes(value: Any) -> bytes | None:
    """A `bytes` field as proto3 JSON reads it: standard or URL-safe base64, padded or
    not (the Python SDK sends URL-safe); None when it is not base64."""
    if not isinstance(value, str):
        return None
    text = value.replace("+", "-").replace("/", "_")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return None


def current_turn(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The contents after the last user message with standard content (text, not only
    function responses): the span in which the API validates signatures."""
    for i in range(len(contents) - 1, -1, -1):
        parts = contents[i].get("parts", [])
        user = contents[i].get("role", "user") == "user"
        answers = any("functionResponse" in p for p in parts)
        if user and not answers and any("text" in p or "inlineData" in p for p in parts):
            return contents[i + 1 :]
    return contents


def overload_error() -> dict[str, Any]:
    return {
        "error": {
            "code": 503,
            "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE",
        }
    }


JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"  # the `aud` Google's endpoint requires
TOKEN_LIFETIME_S = 3600
VERTEX_VERSIONS = ("v1", "v1beta1")


@dataclass(frozen=True)
class ServiceAccount:
    """An account the token endpoint knows: its key's public half, the projects it may use."""

    email: str
    key_id: str
    public_key: rsa.RSAPublicKey
    projects: frozenset[str]


@dataclass(frozen=True)
class TokenGrant:
    """One request to the token endpoint, and what it got (None: refused)."""

    email: str | None
    token: str | None
    error: str = ""


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def oauth_error(error: str, description: str) -> web.Response:
    return web.json_response({"error": error, "error_description": description}, status=400)


def _unauthenticated() -> web.Response:
    return api_error(
        401,
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login "
        "cookie or other valid authentication credential.",
    )


@dataclass
class GeminiSimulator(SimulatorServer):
    requests: list[GeminiRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()
        self._shared: deque[Scripted] = deque()
        self._per_model: dict[str, deque[Scripted]] = {}
        self._arrived = asyncio.Condition()
        self._quotas: dict[str, Quota] = {}
        self._outages: list[Outage] = []
        self._signatures: set[bytes] = set()  # every thoughtSignature this API issued
        self._accounts: dict[str, ServiceAccount] = {}
        self._tokens: dict[str, tuple[str, float]] = {}  # access token -> (account, expiry)
        self.grants: list[TokenGrant] = []

    def grant(self, email: str, key_id: str, public_key_pem: bytes, *projects: str) -> None:
        """Let the service account `email` (its key `key_id`) use Vertex AI in `projects`."""
        public_key = serialization.load_pem_public_key(public_key_pem)
        assert isinstance(public_key, rsa.RSAPublicKey), "service-account keys are RSA"
        self._accounts[email] = ServiceAccount(email, key_id, public_key, frozenset(projects))

    def limit(self, model: str, *, rpm: int = 0, tpm: int = 0, window_s: float = 60.0) -> None:
        """Give `model` a quota of `rpm` requests and `tpm` input tokens per window."""
        self._quotas[model] = Quota(rpm, tpm, window_s)

    def outage(
        self,
        seconds: float,
        *,
        status: int = 429,
        model: str | None = None,
        retry_delay_s: float | None = None,
    ) -> None:
        """Refuse every request (for `model`, or any) for the next `seconds`: 429 quota
        exhausted (RetryInfo says `retry_delay_s`, else the time left) or 503 overloaded
        (with Retry-After when `retry_delay_s` is given). `seconds` 0 ends every outage."""
        if seconds <= 0:  # ends the outages under way
            self._outages.clear()
            return
        self._outages.append(Outage(time.monotonic() + seconds, status, model, retry_delay_s))

    def max_in_window(self, window_s: float, model: str | None = None) -> int:
        """The most requests (refused ones too) that arrived within any `window_s`."""
        times = sorted(r.at for r in self.requests if model is None or r.model == model)
        most, start = 0, 0
        for end, at in enumerate(times):
            while at - times[start] >= window_s:
                start += 1
            most = max(most, end - start + 1)
        return most

    def refused(self) -> list[GeminiRequest]:
        return [r for r in self.requests if r.status in (429, 503)]

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
        app.router.add_post(
            "/{version}/projects/{project}/locations/{location}/publishers/google/models/"
            "{model_action}",
            self._vertex_generate,
        )
        app.router.add_post("/token", self._token)

    async def _token(self, request: web.Request) -> web.Response:
        """Google's token endpoint for a service account's JWT-bearer grant."""
        form = await request.post()
        if form.get("grant_type") != JWT_BEARER:
            self.grants.append(TokenGrant(None, None, "unsupported_grant_type"))
            return oauth_error("unsupported_grant_type", "Invalid grant_type.")
        email, problem = self._verified_assertion(str(form.get("assertion", "")))
        if problem:
            self.grants.append(TokenGrant(email, None, problem))
            return oauth_error("invalid_grant", problem)
        assert email is not None
        token = f"ya29.sandbox-{uuid.uuid4().hex}"
        self._tokens[token] = (email, time.time() + TOKEN_LIFETIME_S)
        self.grants.append(TokenGrant(email, token))
        return web.json_response(
            {"access_token": token, "expires_in": TOKEN_LIFETIME_S - 1, "token_type": "Bearer"}
        )

    def _verified_assertion(self, assertion: str) -> tuple[str | None, str]:
        """The account an RS256 assertion is from, or what is wrong with it."""
        try:
            header_b64, payload_b64, signature_b64 = assertion.split(".")
            header = json.loads(_b64url(header_b64))
            claims = json.loads(_b64url(payload_b64))
            signature = _b64url(signature_b64)
        except ValueError:
            return None, "Invalid JWT: not a signed JWT."
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return None, "Invalid JWT: not a signed JWT."
        if header.get("alg") != "RS256":
            return None, f"Invalid JWT: algorithm {header.get('alg')!r} is not RS256."
        email = str(claims.get("iss", ""))
        account = self._accounts.get(email)
        if account is None:
            return email, "Invalid grant: account not found"
        if header.get("kid") not in (None, account.key_id):
            return email, "Invalid JWT Signature."
        try:
            account.public_key.verify(
                signature,
                f"{header_b64}.{payload_b64}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except InvalidSignature:
            return email, "Invalid JWT Signature."
        now = time.time()
        if claims.get("aud") != TOKEN_AUDIENCE:
            return email, f"Invalid JWT: audience must be {TOKEN_AUDIENCE}."
        issued, expires = claims.get("iat"), claims.get("exp")
        if not isinstance(issued, int) or not isinstance(expires, int):
            return email, "Invalid JWT: iat and exp must be whole seconds."
        if not issued <= now + 60 or not now < expires <= issued + TOKEN_LIFETIME_S:
            return email, "Invalid JWT: Token must be a short-lived token (60 minutes)."
        if not claims.get("scope"):
            return email, "Invalid JWT: no scope."
        return email, ""

    async def _vertex_generate(self, request: web.Request) -> web.StreamResponse:
        """Vertex AI's generateContent: a bearer token of an account granted the project."""
        if request.match_info["version"] not in VERTEX_VERSIONS:
            return api_error(404, f"API version {request.match_info['version']!r} is not found.")
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        holder = self._tokens.get(token) if scheme == "Bearer" else None
        if holder is None or holder[1] <= time.time():
            return _unauthenticated()
        project = request.match_info["project"]
        if project not in self._accounts[holder[0]].projects:
            model = request.match_info["model_action"].partition(":")[0]
            return api_error(
                403,
                f"Permission 'aiplatform.endpoints.predict' denied on resource "
                f"'//aiplatform.googleapis.com/projects/{project}/locations/"
                f"{request.match_info['location']}/publishers/google/models/{model}' "
                "(or it may not exist).",
            )
        return await self._generate(request)

    def _capacity_refusal(self, request: GeminiRequest) -> web.Response | None:
        """A 429 or 503 when the model has no capacity for this request now."""
        now = request.at
        self._outages = [o for o in self._outages if o.until > now]
        for outage in self._outages:
            if outage.model in (None, request.model):
                left = outage.until - now
                delay = outage.retry_delay_s if outage.retry_delay_s is not None else left
                if outage.status == 503:
                    headers = {} if outage.retry_delay_s is None else {"Retry-After": f"{delay:g}"}
                    return web.json_response(overload_error(), status=503, headers=headers)
                body = quota_error(
                    "GenerateRequestsPerMinutePerProjectPerModel", request.model, 0, delay
                )
                return web.json_response(body, status=429)
        quota = self._quotas.get(request.model)
        if quota is None:
            return None
        refusal = quota.refusal(now, request.prompt_tokens)
        if refusal is None:
            return None
        metric, delay = refusal
        limit = quota.tpm if "Token" in metric else quota.rpm
        return web.json_response(quota_error(metric, request.model, limit, delay), status=429)

    def _signature_refusal(self, request: GeminiRequest) -> web.Response | None:
        """400 when a function call of the current turn comes back without the signature
        issued for it (or with one never issued), as Gemini 3 answers."""
        if not checks_signatures(request.model):
            return None
        for position, content in enumerate(current_turn(request.contents), start=1):
            calls = [p for p in content.get("parts", []) if "functionCall" in p]
            if content.get("role") != "model" or not calls:
                continue
            signature = calls[0].get("thoughtSignature")
            if signature is None:
                name = calls[0]["functionCall"].get("name", "")
                return api_error(
                    400,
                    "Function call is missing a thought_signature in functionCall parts. "
                    "This is required for tools to work correctly, and missing "
                    "thought_signature may lead to degraded model performance. Additional "
                    f"data, function call `default_api:{name}` , position {position}. Please "
                    "refer to https://ai.google.dev/gemini-api/docs/thought-signatures for "
                    "more details.",
                )
            if signature == SKIP_SIGNATURE:
                request.bypassed_signatures += 1
            elif signature_bytes(signature) not in self._signatures:
                return api_error(400, "Corrupted thought signature.")
        return None

    def _signed(self, reply: Reply) -> Reply:
        """The reply with a fresh thoughtSignature on its first function call."""
        parts = [dict(p) for p in reply.parts]
        first_call = next((p for p in parts if "functionCall" in p), None)
        if first_call is None or "thoughtSignature" in first_call:
            return reply
        signature = b"sandbox-thought:" + os.urandom(18)
        self._signatures.add(signature)
        first_call["thoughtSignature"] = base64.b64encode(signature).decode()
        return dataclasses.replace(reply, parts=tuple(parts))

    def _cached(self, request: GeminiRequest) -> int:
        """Implicit caching as Gemini reports it: the longest prompt prefix this model was
        already sent (answered), counted at about 4 characters a token, when it reaches the
        minimum cacheable size (IMPLICIT_CACHE_MIN_TOKENS); 0 otherwise."""
        key = request.cache_key
        best = 0
        for earlier in self.requests:
            if earlier is request or earlier.model != request.model or earlier.status != 200:
                continue
            best = max(best, _common_prefix(key, earlier.cache_key))
        tokens = best // 4
        return tokens if tokens >= IMPLICIT_CACHE_MIN_TOKENS else 0

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
            return api_error(404, f"Method {action!r} is not found for models/{model}.")
        recorded = GeminiRequest(
            model, await request.json(), action == "streamGenerateContent", path=request.path
        )
        self.requests.append(recorded)
        async with self._arrived:
            self._arrived.notify_all()
        refused = self._capacity_refusal(recorded)
        if refused is None:
            refused = self._signature_refusal(recorded)
        if refused is not None:
            recorded.status = refused.status
            return refused
        reply = self._signed(self._next(recorded))
        recorded.status = reply.status
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.status == 429:
            delay = float(reply.error_message)
            body = quota_error("GenerateRequestsPerMinutePerProjectPerModel", model, 0, delay)
            return web.json_response(body, status=429)
        if reply.status == 503:
            return web.json_response(overload_error(), status=503)
        if reply.status != 200:
            return api_error(reply.status, reply.error_message)
        recorded.cached_tokens = self._cached(recorded)
        if not recorded.stream:
            return web.json_response(reply.body(recorded.prompt_tokens, recorded.cached_tokens))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        body = reply.body(recorded.prompt_tokens, recorded.cached_tokens)
        await response.write(f"data: {json.dumps(body)}\r\n\r\n".encode())
        await response.write_eof()
        return response
