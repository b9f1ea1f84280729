"""Every setting, read once from the environment (or `.env`) and handed down as typed objects.

Errors name the variable to fix. The README's settings table mirrors this class.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from graph.config import GraphLimits, ModelSpec, TempoSpec


class SettingsError(Exception):
    """One line per bad setting: `NAME: what is wrong; what to set`."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", frozen=True)

    # The model
    google_api_key: SecretStr | None = None
    llm_model: str = "google_genai:gemini-3.8-flash"
    gemini_base_url: str | None = None
    llm_timeout: float = Field(default=60.0, gt=0)
    llm_max_retries: int = Field(default=2, ge=0, le=10)
    # Grafana Tempo
    tempo_url: str | None = None
    tempo_tenant: str | None = None
    tempo_timeout: float = Field(default=5.0, gt=0)
    # Redis (checkpoints)
    redis_url: str = "redis://localhost:6379/0"
    checkpoint_ttl_minutes: float = Field(default=7 * 24 * 60, gt=0)
    # Limits of one investigation turn (validated by GraphLimits)
    tool_budget: int = 8
    recursion_limit: int = 25
    trace_max_revisions: int = 2
    trace_verify_concurrency: int = 8
    question_max_chars: int = 8000
    # Logging
    log_level: str = "INFO"

    def model_spec(self) -> ModelSpec:
        return ModelSpec(
            model=self.llm_model,
            api_key=self.google_api_key.get_secret_value() if self.google_api_key else None,
            base_url=self.gemini_base_url,
            timeout_s=self.llm_timeout,
            max_retries=self.llm_max_retries,
        )

    def tempo_spec(self) -> TempoSpec:
        if not self.tempo_url:
            raise SettingsError(
                "TEMPO_URL: not set; set it to your Tempo's HTTP API, e.g. http://tempo:3200"
            )
        return TempoSpec(url=self.tempo_url, tenant=self.tempo_tenant, timeout_s=self.tempo_timeout)

    def graph_limits(self) -> GraphLimits:
        return GraphLimits(
            tool_budget=self.tool_budget,
            recursion_limit=self.recursion_limit,
            trace_max_revisions=self.trace_max_revisions,
            trace_verify_concurrency=self.trace_verify_concurrency,
            question_max_chars=self.question_max_chars,
        )


def describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        name = str(error["loc"][0]).upper() if error["loc"] else "settings"
        message = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"{name}: {message} (got {error.get('input')!r})")
    return "\n".join(lines)


def load_settings(**overrides: Any) -> Settings:
    """Read and validate the settings, including the limits handed to the graph."""
    try:
        settings = Settings(**overrides)
        settings.graph_limits()
    except ValidationError as exc:
        raise SettingsError(describe(exc)) from None
    return settings
