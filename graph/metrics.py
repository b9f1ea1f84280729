"""What one investigation does, for Prometheus: model calls and tokens, tool calls, trace-guard
and rubric outcomes. Incremented where they happen; exposed on /metrics by `bot.health`."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import LLMResult
from prometheus_client import Counter

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

# The setting a model is built from names its role in the labels.
ROLES = {"LLM_MODEL": "agent", "GRADER_MODEL": "grader", "JUDGE_MODEL": "judge"}


class ModelUsage(BaseCallbackHandler):
    """Counts each finished model call and the tokens its response reports."""

    run_inline = True  # a counter increment needs no thread pool

    def __init__(self, model: str, role: str) -> None:
        self.model = model
        self.role = role

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        MODEL_CALLS.labels(self.model, self.role).inc()
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None)
                if usage:
                    MODEL_TOKENS.labels(self.model, self.role, "input").inc(usage["input_tokens"])
                    MODEL_TOKENS.labels(self.model, self.role, "output").inc(usage["output_tokens"])
