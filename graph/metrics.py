"""What one investigation does, for Prometheus: model calls and tokens, tool calls, trace-guard
and rubric outcomes. Incremented where they happen; exposed on /metrics by `bot.process.health`."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from prometheus_client import Counter, Histogram

MODEL_CALLS = Counter(
    "tracegate_model_calls_total", "Chat model calls that returned", ["model", "role"]
)
MODEL_TOKENS = Counter(
    "tracegate_model_tokens_total",
    "Tokens the model reported in its usage metadata",
    ["model", "role", "direction"],
)
TOOL_CALLS = Counter(
    "tracegate_tool_calls_total", "Tool calls by the agent", ["tool", "outcome"]
)  # outcome: succeeded | failed
TRACE_GUARD = Counter(
    "tracegate_trace_guard_total",
    "Trace IDs cited in drafts, by what the trace guard found",
    ["outcome"],  # found | missing | unverified | removed
)
GROUNDING = Counter(
    "tracegate_grounding_claims_total",
    "Facts stated in drafts, by kind and by what the grounding check found",
    ["kind", "outcome"],  # outcome: grounded | ungrounded | unchecked
)
GROUNDING_REMOVED = Counter(
    "tracegate_grounding_removed_total",
    "Ungrounded facts removed (with their sentence) from posted answers",
)
RUBRIC_VERDICTS = Counter(
    "tracegate_rubric_verdicts_total", "Rubric grading passes by verdict", ["verdict"]
)

QUOTA_ERRORS = Counter(
    "tracegate_model_quota_errors_total",
    "Model calls refused for capacity (429 quota, 503 overload), by model",
    ["model", "reason"],  # reason: quota | overload
)
LIMITER_DELAY = Histogram(
    "tracegate_model_limiter_delay_seconds",
    "How long a model call waited for the shared limit (MODEL_RPM / MODEL_TPM)",
    ["model", "role"],
    buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
)
FALLBACK_USES = Counter(
    "tracegate_model_fallback_total",
    "Calls answered by LLM_FALLBACK_MODEL because the primary stayed exhausted",
    ["model", "fallback", "role"],
)
BUDGET_STOPS = Counter(
    "tracegate_token_budget_stops_total",
    "Turns stopped because a token budget was spent",
    ["budget"],  # thread | channel
)

# The setting a model is built from names its role in the labels.
ANSWERED_BY = "tracegate_model"  # in a response's metadata: the model that answered
ROLES = {"LLM_MODEL": "agent", "GRADER_MODEL": "grader", "JUDGE_MODEL": "judge"}


class ModelUsage(BaseCallbackHandler):
    """Counts each finished model call and the tokens its response reports."""

    run_inline = True  # a counter increment needs no thread pool

    def __init__(self, model: str, role: str) -> None:
        self.model = model
        self.role = role

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        model = self.model
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                # The model that answered: the fallback's name when it did (graph.model).
                model = getattr(message, "response_metadata", {}).get(ANSWERED_BY, model)
                usage = getattr(message, "usage_metadata", None)
                if usage:
                    MODEL_TOKENS.labels(model, self.role, "input").inc(usage["input_tokens"])
                    MODEL_TOKENS.labels(model, self.role, "output").inc(usage["output_tokens"])
                    # Part of the input, served from Gemini's cache (cachedContentTokenCount).
                    cached = (usage.get("input_token_details") or {}).get("cache_read") or 0
                    MODEL_TOKENS.labels(model, self.role, "cached").inc(cached)
        MODEL_CALLS.labels(model, self.role).inc()
