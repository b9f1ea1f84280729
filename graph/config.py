"""Typed settings for the graph floor, built by `bot/` from the environment.

Lower floors never read environment variables; errors name the setting to fix.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ModelSpec(BaseModel):
    """Which chat model to talk to, and how."""

    model_config = ConfigDict(frozen=True)

    model: str = "google_genai:gemini-3.8-flash"  # LLM_MODEL, "provider:model"
    api_key: str | None = Field(default=None, repr=False)  # GOOGLE_API_KEY
    base_url: str | None = None  # GEMINI_BASE_URL
    timeout_s: float = 60.0  # LLM_TIMEOUT
    max_retries: int = 2  # LLM_MAX_RETRIES


class TempoSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    url: str  # TEMPO_URL
    tenant: str | None = None  # TEMPO_TENANT -> X-Scope-OrgID
    timeout_s: float = 5.0  # TEMPO_TIMEOUT: per request, tools and verification alike


class GraphLimits(BaseModel):
    """Bounds on one investigation turn."""

    model_config = ConfigDict(frozen=True)

    tool_budget: int = Field(default=8, ge=1)  # TOOL_BUDGET: tool calls per turn
    recursion_limit: int = 25  # RECURSION_LIMIT: graph steps per turn
    trace_max_revisions: int = Field(default=2, ge=0)  # TRACE_MAX_REVISIONS
    claim_max_revisions: int = Field(default=2, ge=0)  # CLAIM_MAX_REVISIONS
    # TRACE_VERIFY_CONCURRENCY: a draft's IDs are checked at once up to this many
    trace_verify_concurrency: int = Field(default=64, ge=1)
    # CONTEXT_BUDGET_TOKENS: earlier turns the model re-reads (estimated tokens)
    context_budget_tokens: int = Field(default=2000, ge=200)
    question_max_chars: int = Field(default=8000, ge=100)  # QUESTION_MAX_CHARS
    rubric_max_iterations: int = 3  # RUBRIC_MAX_ITERATIONS: grader passes per run
    grader_max_steps: int = Field(default=3, ge=0)  # GRADER_MAX_STEPS: evidence look-ups

    @field_validator("rubric_max_iterations", mode="before")
    @classmethod
    def _whole_iterations(cls, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            if isinstance(value, str) and value.strip().isdigit() and int(value) >= 1:
                return int(value)
            raise ValueError(
                f"RUBRIC_MAX_ITERATIONS is {value!r}; it must be a whole number of at least 1"
            )
        return value

    @field_validator("recursion_limit")
    @classmethod
    def _enough_steps(cls, value: int) -> int:
        if value < 3:
            raise ValueError(
                f"RECURSION_LIMIT is {value}; it must be at least 3 "
                "(agent, verify_traces and one step to spare)"
            )
        return value


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names it and says what to set."""
