"""The chat models behind the agent, the rubric grader and the action judge."""

from __future__ import annotations

import functools
import ssl
from typing import Any

from google.genai.types import HttpOptions, HttpRetryOptions
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
    if not spec.api_key:
        raise ConfigError(f"GOOGLE_API_KEY is not set; {setting} ({spec.model}) needs it")
    role = ROLES.get(setting, setting.lower())
    common: dict[str, Any] = {
        "google_api_key": spec.api_key,
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
