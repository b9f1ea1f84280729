"""Choosing the chat model from LLM_MODEL."""

import pytest

from graph.config import ConfigError, ModelSpec
from graph.model import make_chat_model


def test_a_model_without_provider_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"LLM_MODEL='gemini-3.8-flash' is not of the form"):
        make_chat_model(ModelSpec(model="gemini-3.8-flash", api_key="k"))


def test_an_unsupported_provider_is_refused() -> None:
    with pytest.raises(ConfigError, match="provider 'openai' is not supported"):
        make_chat_model(ModelSpec(model="openai:gpt-5", api_key="k"))


def test_a_missing_api_key_names_google_api_key() -> None:
    with pytest.raises(ConfigError, match="GOOGLE_API_KEY is not set"):
        make_chat_model(ModelSpec(api_key=None))


def test_retries_are_counted_after_the_first_attempt() -> None:
    model = make_chat_model(ModelSpec(api_key="k", max_retries=0, base_url="http://127.0.0.1:9"))
    assert model.max_retries == 1  # type: ignore[attr-defined]
