"""Running one investigation turn for the bot: `Investigator.investigate(...)`."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphRecursionError
from pydantic import BaseModel, Field

from gates.pipeline import ActionPipeline
from graph.build import InvestigationGraph, build_graph
from graph.checkpoint import open_checkpointer
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.model import make_chat_model
from graph.state import InvestigationState
from graph.tools.kubernetes import kubernetes_tools
from graph.tools.tempo import TempoClient, tempo_tools
from graph.trace_guard import TraceVerifier, ids_with

log = logging.getLogger(__name__)

# C0/C1 controls (but tab and newline) and bidi overrides, which can disguise text.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

EMPTY_QUESTION = "Ask me about the incident, e.g. “checkout is throwing 500s since 14:05, why?”"

Status = Literal["answered", "incomplete", "rejected", "failed"]
ProgressCallback = Callable[[dict[str, Any]], Awaitable[None]]


class InvestigationResult(BaseModel):
    thread_id: str
    status: Status
    answer: str
    notices: list[str] = Field(default_factory=list)
    stop_reason: str | None = None
    tool_calls: int = 0
    verified_trace_ids: list[str] = Field(default_factory=list)
    unverified_trace_ids: list[str] = Field(default_factory=list)
    removed_trace_ids: list[str] = Field(default_factory=list)
    trace_revisions: int = 0
    # Actions the agent proposed this turn (pending approval or refused), for the bot's cards.
    action_request_ids: list[str] = Field(default_factory=list)
    duration_s: float = 0.0
    correlation_id: str
    events: list[dict[str, Any]] = Field(default_factory=list)


def clean_question(text: str, max_chars: int) -> tuple[str, list[str]]:
    """Strip control characters and bound the length; say what was changed."""
    cleaned = _CONTROL.sub("", text).strip()
    notices = []
    if len(cleaned) > max_chars:
        notices.append(
            f"Your message has {len(cleaned):,} characters; only the first {max_chars:,} were read."
        )
        cleaned = cleaned[:max_chars]
    return cleaned, notices


def _turn_input(question: str, limits: GraphLimits) -> InvestigationState:
    # Per-turn fields start afresh; messages and known_traces carry over.
    return {
        "messages": [HumanMessage(question)],
        "tool_calls_used": 0,
        "budget": limits.tool_budget,
        "stop_reason": None,
        "trace_verdict": None,
        "trace_revision_count": 0,
        "rubric_feedback": None,
        "rubric_revision_count": 0,
        "answer": None,
    }


class Investigator:
    def __init__(self, graph: InvestigationGraph, limits: GraphLimits) -> None:
        self.graph = graph
        self.limits = limits

    async def investigate(
        self,
        thread_id: str,
        text: str,
        user: str,
        *,
        on_progress: ProgressCallback | None = None,
    ) -> InvestigationResult:
        """Run one turn of the thread's investigation; never raises for a failed run."""
        started = time.monotonic()
        correlation_id = uuid.uuid4().hex[:12]
        events: list[dict[str, Any]] = []

        def result(status: Status, answer: str, **fields: Any) -> InvestigationResult:
            return InvestigationResult(
                thread_id=thread_id,
                status=status,
                answer=answer,
                action_request_ids=[
                    e["request_id"] for e in events if e["type"] == "action_proposed"
                ],
                duration_s=round(time.monotonic() - started, 3),
                correlation_id=correlation_id,
                events=events,
                **fields,
            )

        question, notices = clean_question(text, self.limits.question_max_chars)
        if not question:
            return result("rejected", EMPTY_QUESTION)

        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id},
            "recursion_limit": self.limits.recursion_limit,
            "metadata": {"user": user, "correlation_id": correlation_id},
        }
        final: dict[str, Any] = {}
        try:
            async for part in self.graph.astream(
                _turn_input(question, self.limits),
                config,
                stream_mode=["custom", "values"],
                version="v2",
            ):
                if part["type"] == "values":
                    final = dict(part["data"])
                    continue
                if part["type"] != "custom":
                    continue
                event = {"at_ms": int((time.monotonic() - started) * 1000), **part["data"]}
                events.append(event)
                await _report(on_progress, event, correlation_id)
        except GraphRecursionError:
            steps = self.limits.recursion_limit
            events.append({"type": "stopped", "reason": "recursion_limit", "steps": steps})
            log.warning("thread %s hit the recursion limit [%s]", thread_id, correlation_id)
            message = (
                f"Stopped after {steps} steps; the answer may be incomplete — narrow the question."
            )
            answer = final.get("answer") or message
            return result(
                "incomplete",
                answer,
                notices=[*notices, message],
                stop_reason="recursion_limit",
                **_trace_fields(final),
            )
        except Exception as exc:
            log.exception("investigation failed for thread %s [%s]", thread_id, correlation_id)
            events.append({"type": "failed", "error": type(exc).__name__})
            return result("failed", _failure_message(exc, correlation_id), notices=notices)

        stop_reason = final.get("stop_reason")
        status: Status = "incomplete" if stop_reason == "step_limit" else "answered"
        done = {
            "at_ms": int((time.monotonic() - started) * 1000),
            "type": "final",
            "status": status,
        }
        events.append(done)
        await _report(on_progress, done, correlation_id)
        if stop_reason == "step_limit":
            notices.append(
                f"Stopped near the step limit ({self.limits.recursion_limit} steps); "
                "the answer may be incomplete — narrow the question."
            )
        elif stop_reason == "tool_budget":
            notices.append(
                f"Used the whole tool budget ({self.limits.tool_budget} calls) "
                "before answering; some evidence may be missing."
            )
        return result(
            status,
            final.get("answer") or "",
            notices=notices,
            stop_reason=stop_reason,
            **_trace_fields(final),
        )


def _trace_fields(state: dict[str, Any]) -> dict[str, Any]:
    verdict = state.get("trace_verdict") or {}
    checks = verdict.get("checks", {})
    return {
        "tool_calls": state.get("tool_calls_used", 0),
        "verified_trace_ids": ids_with(checks, "found"),
        "unverified_trace_ids": ids_with(checks, "unverified"),
        "removed_trace_ids": ids_with(checks, "missing") if verdict.get("removed") else [],
        "trace_revisions": state.get("trace_revision_count", 0),
    }


def _failure_message(exc: Exception, correlation_id: str) -> str:
    module = type(exc).__module__
    if module.startswith(("google.", "langchain_google_genai")):
        what = "The language model did not answer"
    elif module.startswith("redis"):
        what = "The conversation store (Redis) is unavailable"
    else:
        what = "The investigation failed"
    return f"{what}. Try again in a minute; if it persists, quote reference {correlation_id}."


async def _report(callback: ProgressCallback | None, event: dict[str, Any], ref: str) -> None:
    if callback is None:
        return
    try:
        await callback(event)
    except Exception:  # progress is cosmetic: a failing reporter must not stop the run
        log.exception("progress callback failed [%s]", ref)


@asynccontextmanager
async def open_investigator(
    model: ModelSpec | BaseChatModel,
    tempo: TempoSpec,
    limits: GraphLimits,
    redis_url: str,
    checkpoint_ttl_minutes: float | None = None,
    actions: ActionPipeline | None = None,
) -> AsyncIterator[Investigator]:
    """Everything an investigation needs, opened together and closed together.

    With `actions`, the agent can read rollout history and propose actions through it.
    """
    chat_model = make_chat_model(model) if isinstance(model, ModelSpec) else model
    client = TempoClient(tempo)
    try:
        tools = tempo_tools(client) + (kubernetes_tools(actions) if actions else [])
        verifier = TraceVerifier(client, limits.trace_verify_concurrency)
        async with open_checkpointer(redis_url, checkpoint_ttl_minutes) as saver:
            yield Investigator(build_graph(chat_model, tools, verifier, saver, limits), limits)
    finally:
        await client.aclose()


__all__ = [
    "InvestigationResult",
    "InvestigationState",
    "Investigator",
    "ProgressCallback",
    "clean_question",
    "open_investigator",
]
