"""The chat models behind the agent, the rubric grader and the action judge."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from langchain_google_genai import ChatGoogleGenerativeAI

from graph.config import ConfigError, ModelSpec
from graph.metrics import ROLES, ModelUsage

SUPPORTED_PROVIDERS = ("google_genai",)


def make_chat_model(spec: ModelSpec, setting: str = "LLM_MODEL") -> BaseChatModel:
    """Build the model named `provider:model`; `setting` names the variable in errors."""
    provider, sep, name = spec.model.partition(":")
    if not sep or not provider or not name:
        raise ConfigError(
            f"{setting}={spec.model!r} is not of the form provider:model, "
            "e.g. google_genai:gemini-3.8-flash"
        )
    if provider not in SUPPORTED_PROVIDERS:
        raise ConfigError(
            f"{setting}: provider {provider!r} is not supported; use google_genai:<model>"
        )
    if not spec.api_key:
        raise ConfigError(f"GOOGLE_API_KEY is not set; {setting} ({spec.model}) needs it")
    return ChatGoogleGenerativeAI(
        model=name,
        google_api_key=spec.api_key,
        base_url=spec.base_url,
        timeout=spec.timeout_s,
        # The Google SDK counts attempts: 1 means a single request, no retry.
        max_retries=spec.max_retries + 1,
        callbacks=[ModelUsage(spec.model, ROLES.get(setting, setting.lower()))],
    )
