"""The chat models behind the agent, the rubric grader and the action judge."""

from __future__ import annotations

import functools
import json
import ssl
from typing import Any, cast

import google.auth
import google.auth.exceptions
from google.auth.credentials import Credentials
from google.genai.types import HttpOptions, HttpRetryOptions
from google.oauth2 import service_account
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_google_genai import ChatGoogleGenerativeAI
from pydantic import Field

from graph.capacity import SDK_RETRIED_STATUSES, ModelGuard
from graph.config import ConfigError, ModelSpec
from graph.metrics import ANSWERED_BY, ROLES, ModelUsage

SUPPORTED_PROVIDERS = ("google_genai",)
VERTEX_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]  # what the Google SDK asks


@functools.cache
def _plain_http_tls() -> ssl.SSLContext:
    """The TLS context of clients whose base URL is plain HTTP (a local proxy, the
    simulators): never used for a handshake, so one per process will do. Left to itself the
    SDK builds three per client (httpx, aiohttp, websockets), each loading the CA bundle:
    ~50 ms of CPU apiece, for every model, grader and judge a process (or a test) opens.
    HTTPS base URLs keep the SDK's own contexts."""
    return ssl.create_default_context()


class GuardedGemini(ChatGoogleGenerativeAI):
    """Gemini with every call taken through a `ModelGuard` (shared limit, budgets, quota
    errors that wait, the fallback model). Calls are never streamed, so every one passes
    here."""

    guard: Any = Field(default=None, exclude=True)  # ModelGuard
    spec_name: str = ""  # provider:model, as the settings and the metrics name it
    role: str = "agent"
    inline: bool = False  # wait for capacity in place (the judge: it cannot unwind)
    fallback: Any = Field(default=None, exclude=True)  # GuardedGemini of the fallback

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        guard: ModelGuard | None = self.guard
        if guard is None:
            return await super()._agenerate(messages, stop, run_manager, **kwargs)
        # The SDK retries other transient errors (LLM_MAX_RETRIES); 429 and 503 are the
        # guard's, which waits as long as the API asks instead of a few seconds.
        kwargs.setdefault(
            "http_options",
            HttpOptions(
                retry_options=HttpRetryOptions(
                    attempts=self.max_retries, http_status_codes=list(SDK_RETRIED_STATUSES)
                )
            ),
        )
        fallback: GuardedGemini | None = self.fallback

        async def generate(name: str) -> ChatResult:
            model = fallback if fallback is not None and name == fallback.spec_name else self
            result = await ChatGoogleGenerativeAI._agenerate(
                model, messages, stop, run_manager, **kwargs
            )
            for generation in result.generations:
                generation.message.response_metadata[ANSWERED_BY] = name
            return result

        return await guard.call(
            self.spec_name,
            self.role,
            messages,
            kwargs.get("tools"),
            generate,
            fallback=fallback.spec_name if fallback is not None else None,
            inline=self.inline,
        )


def _model_name(spec_model: str, setting: str) -> str:
    provider, sep, name = spec_model.partition(":")
    if not sep or not provider or not name:
        raise ConfigError(
            f"{setting}={spec_model!r} is not of the form provider:model, "
            "e.g. google_genai:gemini-3.8-flash"
        )
    if provider not in SUPPORTED_PROVIDERS:
        raise ConfigError(
            f"{setting}: provider {provider!r} is not supported; use google_genai:<model>"
        )
    return name


def _backend(spec: ModelSpec, setting: str) -> dict[str, Any]:
    """The Gemini API with its key, or Vertex AI with a project, a location and Application
    Default Credentials. Passed explicitly, `vertexai` included: the SDKs would otherwise
    pick a backend from environment variables of their own."""
    if not spec.vertexai:
        if not spec.api_key:
            raise ConfigError(f"GOOGLE_API_KEY is not set; {setting} ({spec.model}) needs it")
        return {"vertexai": False, "google_api_key": spec.api_key}
    if not spec.project or not spec.location:
        raise ConfigError(
            "GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION: GOOGLE_GENAI_USE_VERTEXAI=true "
            f"needs both; {setting} ({spec.model}) is called through Vertex AI"
        )
    return {
        "vertexai": True,
        "google_api_key": None,
        "project": spec.project,
        "location": spec.location,
        "credentials": _vertex_credentials(spec.credentials_file),
    }


def _vertex_credentials(path: str | None) -> Credentials | None:
    """The file's credentials; None leaves Application Default Credentials to the SDK, at its
    first call: the environment's GOOGLE_APPLICATION_CREDENTIALS, gcloud's login, or the
    metadata server (GKE Workload Identity). A service account's key is loaded as one (its
    own loader checks the type); another kind (a Workload Identity Federation configuration)
    by google-auth's general loader: the file is the operator's own setting."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as file:
            kind = json.load(file).get("type")
        if kind == "service_account":
            from_file = service_account.Credentials.from_service_account_file
            found = from_file(path, scopes=VERTEX_SCOPES)  # type: ignore[no-untyped-call]
        else:
            general = google.auth.load_credentials_from_file
            found, _ = general(path, scopes=VERTEX_SCOPES)  # type: ignore[no-untyped-call]
    except (OSError, ValueError, AttributeError, google.auth.exceptions.GoogleAuthError) as exc:
        raise ConfigError(f"GOOGLE_APPLICATION_CREDENTIALS: {path}: {exc}") from None
    return cast(Credentials, found)


def make_chat_model(
    spec: ModelSpec,
    setting: str = "LLM_MODEL",
    guard: ModelGuard | None = None,
    *,
    inline: bool = False,
) -> BaseChatModel:
    """Build the model named `provider:model`; `setting` names the variable in errors.
    With `guard`, every call goes through it, and LLM_FALLBACK_MODEL (the guard's) stands
    in when the model stays exhausted."""
    name = _model_name(spec.model, setting)
    role = ROLES.get(setting, setting.lower())
    common: dict[str, Any] = {
        **_backend(spec, setting),
        "base_url": spec.base_url,
        "timeout": spec.timeout_s,
        # The Google SDK counts attempts: 1 means a single request, no retry.
        "max_retries": spec.max_retries + 1,
        "disable_streaming": True,
    }
    if spec.base_url and spec.base_url.startswith("http://"):
        tls = _plain_http_tls()
        common["client_args"] = {"verify": tls, "ssl": tls}  # httpx's name, aiohttp's name
    fallback = None
    fallback_spec = guard.limits.fallback_model if guard is not None else None
    if fallback_spec and fallback_spec != spec.model:
        fallback = GuardedGemini(
            model=_model_name(fallback_spec, "LLM_FALLBACK_MODEL"),
            spec_name=fallback_spec,
            role=role,
            **common,
        )
    return GuardedGemini(
        model=name,
        guard=guard,
        spec_name=spec.model,
        role=role,
        inline=inline,
        fallback=fallback,
        callbacks=[ModelUsage(spec.model, role)],
        **common,
    )
