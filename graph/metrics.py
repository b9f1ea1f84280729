"""What one investigation does, for Prometheus: model calls and tokens, tool calls, trace-guard
and rubric outcomes. Incremented where they happen; exposed on /metrics by `bot.process.health`."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from prometheus_client import Histogram

from gates.metrics import counter

MODEL_CALLS = counter("model_calls", "Chat model calls that returned", "model", "role")
MODEL_TOKENS = counter(
    "model_tokens", "Tokens the model reported in its usage metadata", "model", "role", "direction"
)
# outcome: succeeded | failed
TOOL_CALLS = counter("tool_calls", "Tool calls by the agent", "tool", "outcome")
TRACE_GUARD = counter(  # outcome: found | missing | unverified | removed
    "trace_guard", "Trace IDs cited in drafts, by what the trace guard found", "outcome"
)
GROUNDING = counter(  # outcome: grounded | ungrounded | unchecked
    "grounding_claims",
    "Facts stated in drafts, by kind and by what the grounding check found",
    "kind",
    "outcome",
)
GROUNDING_REMOVED = counter(
    "grounding_removed", "Ungrounded facts removed (with their sentence) from posted answers"
)
RUBRIC_VERDICTS = counter("rubric_verdicts", "Rubric grading passes by verdict", "verdict")

QUOTA_ERRORS = counter(  # reason: quota | overload
    "model_quota_errors",
    "Model calls refused for capacity (429 quota, 503 overload), by model",
    "model",
    "reason",
)
LIMITER_DELAY = Histogram(
    "tracegate_model_limiter_delay_seconds",
    "How long a model call waited for the shared limit (MODEL_RPM / MODEL_TPM)",
    ["model", "role"],
    buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
)
FALLBACK_USES = counter(
    "model_fallback",
    "Calls answered by LLM_FALLBACK_MODEL because the primary stayed exhausted",
    "model",
    "fallback",
    "role",
)
BUDGET_STOPS = counter(  # budget: thread | channel | automatic
    "token_budget_stops", "Turns stopped because a token budget was spent", "budget"
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
