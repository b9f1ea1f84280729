"""Running one investigation turn for the bot: `Investigator.investigate(...)`."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from typing import Any, cast

import redis.asyncio as aioredis
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphRecursionError
from pydantic import BaseModel

from gates.pipeline import ActionPipeline
from graph.build import InvestigationGraph, build_graph
from graph.capacity import BudgetExceeded, CallScope, ModelBusy, ModelGuard, call_scope
from graph.charts import charts_for_answer
from graph.checkpoint import FENCE, Fence, Superseded, open_checkpointer
from graph.config import GraphLimits, ModelSpec, TempoSpec
from graph.context import ThreadContext
from graph.grader import Grader
from graph.grounding.evidence import (
    QUESTION_TIME,
    TEXT,
    Fact,
    source_call,
    text_facts,
    times_from,
)
from graph.grounding.sources import LiveSources
from graph.log_context import bind_log_context
from graph.model import make_chat_model
from graph.nodes.grade import OnEvaluation
from graph.progress import TurnContext
from graph.result import InvestigationResult, RubricReport, Status
from graph.state import InvestigationState
from graph.tools import ToolSet
from graph.tools.registry import TOOLSETS, open_tools
from graph.tools.tempo import TempoClient
from graph.trace_guard import TraceVerifier, ids_with

__all__ = [
    "EMPTY_QUESTION",
    "InvestigationResult",
    "Investigator",
    "RubricReport",
    "open_investigator",
]

log = logging.getLogger(__name__)

# C0/C1 controls (but tab and newline) and bidi overrides, which can disguise text.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

EMPTY_QUESTION = "Ask me about the incident, e.g. “checkout is throwing 500s since 14:05, why?”"
MAX_SOURCES = 10  # links under one answer
INCOMPLETE = "the answer may be incomplete — narrow the question."

ProgressCallback = Callable[[dict[str, Any]], Awaitable[None]]


def _turn_input(
    question: str, rubric: str | None, turn_id: str | None, context: ThreadContext | None
) -> InvestigationState:
    # Per-turn fields start afresh; messages, known_traces and evaluations carry over.
    # The question's message id is the turn id: a resumed turn finds itself by it.
    messages: list[AnyMessage] = []
    if context is not None and (context.alerts or context.messages):
        context_id = f"{turn_id}:context" if turn_id else None
        messages.append(HumanMessage(context.render(), id=context_id, name="thread_context"))
    messages.append(HumanMessage(question, id=turn_id) if turn_id else HumanMessage(question))
    anchor = context.incident_start if context is not None else None
    sticky: InvestigationState = {"incident_start": anchor.timestamp()} if anchor else {}
    return {
        **sticky,
        "evidence": _said(question, context),
        "messages": messages,
        "tool_calls_used": 0,
        "stop_reason": None,
        "draft_check": None,
        "charts": [],
        "trace_revision_count": 0,
        "grounding_revision_count": 0,
        "claim_revision_count": 0,
        "rubric": rubric,
        "rubric_run_id": uuid.uuid4().hex[:12] if rubric else None,
        "rubric_iteration": 0,
        "rubric_status": None,
        "rubric_revision_count": 0,
    }


def _said(question: str, context: ThreadContext | None) -> list[Fact]:
    """What the asker, the thread and its alerts said, and when the question was asked:
    facts a draft may repeat (people wrote them; the answer can quote them)."""
    facts = text_facts(question, "the question")
    facts += times_from([time.time()], QUESTION_TIME)
    if context is not None:
        facts += text_facts(context.render(), "the thread's messages and alerts")
        for alert in context.alerts:
            if alert.starts_at:
                start = alert.starts_at.timestamp()
                facts += times_from([start], f"alert {alert.alertname or alert.source} started")
    return facts


def _changes(update: InvestigationState, current: dict[str, Any]) -> InvestigationState:
    """Only the fields the thread's state does not already hold: every field written is a
    document the checkpointer stores, expires and indexes. A field the state lacks reads
    as None or 0 (nodes read them with `.get(field, 0)`)."""
    return cast(
        InvestigationState,
        {
            key: value
            for key, value in update.items()
            if key == "messages"
            or (current[key] != value if key in current else value not in (None, 0))
        },
    )


class _Turn:
    """The bookkeeping of one `investigate` call: events, timing, the final state.

    Nodes and tools report events through the run context; each is recorded at once and,
    while `delivering`, handed to `on_progress` in order by a task of its own, so the
    graph does not wait for the reporter (a Slack edit) between steps.
    """

    def __init__(self, thread_id: str, on_progress: ProgressCallback | None) -> None:
        self.thread_id = thread_id
        self.on_progress = on_progress
        self.started = time.monotonic()
        self.correlation_id = uuid.uuid4().hex[:12]
        bind_log_context(correlation_id=self.correlation_id)
        self.events: list[dict[str, Any]] = []
        self.final: dict[str, Any] = {}
        self.context = TurnContext(report=self.report)
        self.calls = CallScope(thread=thread_id)
        self._undelivered: asyncio.Queue[dict[str, Any] | None] | None = None

    def report(self, event: dict[str, Any]) -> None:
        event = {"at_ms": int((time.monotonic() - self.started) * 1000), **event}
        self.events.append(event)
        if self._undelivered is not None:
            self._undelivered.put_nowait(event)

    @asynccontextmanager
    async def delivering(self) -> AsyncIterator[None]:
        """Events reported inside go to `on_progress`, in order; once the block is left
        normally, all of them have been delivered. A run that raised (superseded,
        cancelled) reports nothing more. The model calls made inside are the turn's (`calls`)."""
        with call_scope(self.calls):
            if self.on_progress is None:
                yield
                return
            self._undelivered = asyncio.Queue()
            delivery = asyncio.create_task(self._deliver(self.on_progress, self._undelivered))
            try:
                yield
            except BaseException:
                delivery.cancel()
                raise
            self._undelivered.put_nowait(None)
            await delivery

    async def _deliver(
        self, on_progress: ProgressCallback, events: asyncio.Queue[dict[str, Any] | None]
    ) -> None:
        while (event := await events.get()) is not None:
            try:
                await on_progress(event)
            except Exception:  # progress is cosmetic: a failing reporter must not stop the run
                log.exception("progress callback failed [%s]", self.correlation_id)

    def result(self, status: Status, answer: str, **fields: Any) -> InvestigationResult:
        return InvestigationResult(
            model=self.calls.answered_by.get("agent"),
            thread_id=self.thread_id,
            status=status,
            answer=answer,
            action_request_ids=[
                e["request_id"] for e in self.events if e["type"] == "action_proposed"
            ],
            duration_s=round(time.monotonic() - self.started, 3),
            correlation_id=self.correlation_id,
            events=self.events,
            **fields,
        )

    def ended(
        self, status: Status, notices: list[str], stop_reason: str | None, instead: str = ""
    ) -> InvestigationResult:
        """The result of a turn that ran: its checked answer (else `instead`) and its checks."""
        return self.result(
            status,
            _answer(self.final) or instead,
            notices=notices,
            stop_reason=stop_reason,
            **_turn_fields(self.final),
        )


class Investigator:
    def __init__(
        self, graph: InvestigationGraph, limits: GraphLimits, default_rubric: str | None = None
    ) -> None:
        self.graph = graph
        self.limits = limits
        self.default_rubric = default_rubric or None

    def _config(
        self, thread_id: str, user: str = "", ref: str = "", fence: Fence | None = None
    ) -> RunnableConfig:
        configurable: dict[str, Any] = {"thread_id": thread_id}
        if fence is not None:
            configurable[FENCE] = fence
        return {
            "configurable": configurable,
            "recursion_limit": self.limits.recursion_limit,
            "metadata": {"user": user, "correlation_id": ref},
        }

    async def _stream(
        self, graph_input: InvestigationState | None, config: RunnableConfig, turn: _Turn
    ) -> None:
        async for values in self.graph.astream(
            graph_input, config, context=turn.context, stream_mode="values"
        ):
            turn.final = dict(values)

    async def investigate(
        self,
        thread_id: str,
        text: str,
        user: str,
        *,
        on_progress: ProgressCallback | None = None,
        rubric: str | None = None,
        channel_rubric: str | None = None,
        turn_id: str | None = None,
        context: ThreadContext | None = None,
        fence: Fence | None = None,
        channel: str | None = None,
        wait_until: float | None = None,
        automatic: bool = False,
    ) -> InvestigationResult:
        """Run one turn of the thread's investigation; never raises for a failed run.

        The rubric graded against is `rubric` if given, else the one already active on
        the thread, else `channel_rubric`, else the default rubric; none means no grading.
        `turn_id` names the turn: if the thread already holds it (a run of this turn was
        interrupted), the turn resumes from its last checkpoint instead of starting again.
        `context` is what the Slack thread holds that the investigation has not seen yet.
        `fence` is awaited before every checkpoint write and raises `Superseded` once
        another run holds the thread; that is the one exception this method lets through,
        with `ModelBusy`: the model has no capacity now and the caller will wait for it
        (its next try is at or before `wait_until`, epoch seconds) and run the turn again,
        which resumes from its checkpoint. Without `wait_until`, or past it, the turn ends
        with a message that says it was the model's capacity. `channel` names the channel
        whose daily token budget the turn spends (CHANNEL_DAILY_TOKEN_BUDGET). `automatic`:
        no one asked (an alert did): its calls wait behind people's for the shared limit
        and spend AUTO_INVESTIGATION_DAILY_TOKEN_BUDGET.
        """
        turn = _Turn(thread_id, on_progress)
        turn.calls.channel = channel
        turn.calls.automatic = automatic
        async with turn.delivering():
            # Control characters stripped and the length bounded; the answer says what was cut.
            question = _CONTROL.sub("", text).strip()
            notices: list[str] = []
            limit = self.limits.question_max_chars
            if len(question) > limit:
                notices.append(
                    f"Your message has {len(question):,} characters; "
                    f"only the first {limit:,} were read."
                )
                question = question[:limit]
            if not question:
                return turn.result("rejected", EMPTY_QUESTION)
            config = self._config(thread_id, user, turn.correlation_id, fence)
            try:
                snapshot = await self.graph.aget_state(config)
                # The steps a run of this thread has still to go through. `snapshot.next`
                # leaves out a task whose result is saved (its writes) when the checkpoint
                # after it is not: with checkpoints saved in the background, a process killed
                # between the two leaves the run unfinished all the same — resuming applies
                # that result and goes on from there.
                pending = tuple(task.name for task in snapshot.tasks)
                held = snapshot.values.get("messages") or []
                if turn_id is not None and any(m.id == turn_id for m in held):
                    # Finished super-steps are not run again; an interrupted one is.
                    turn.calls.under_way = True
                    turn.report({"type": "resumed", "pending": list(pending)})
                    turn.final = dict(snapshot.values)
                    if pending:
                        await self._stream(None, config, turn)
                else:
                    # A run interrupted while grading (e.g. a restart) finishes that pass
                    # first, so it runs once and its record is not lost. Other interrupted
                    # steps are dropped: the new question supersedes them.
                    if "grade" in pending:
                        turn.report({"type": "resumed", "pending": list(pending)})
                        try:
                            await self._stream(None, config, turn)
                        except GraphRecursionError:
                            log.warning(
                                "resumed grading hit the recursion limit [%s]", turn.correlation_id
                            )
                        snapshot = await self.graph.aget_state(config)
                    active = (
                        rubric
                        or snapshot.values.get("rubric")
                        or channel_rubric
                        or self.default_rubric
                    )
                    fresh = _turn_input(question, active, turn_id, context)
                    await self._stream(_changes(fresh, snapshot.values), config, turn)
            except Superseded:
                raise  # another run holds the thread
            except ModelBusy as busy:
                if wait_until is not None and busy.retry_at <= wait_until:
                    turn.report({"type": "waiting_for_model", "retry_at": busy.retry_at})
                    raise  # the model's capacity is awaited
                turn.report({"type": "failed", "error": "ModelBusy"})
                return turn.result("failed", _busy_message(busy, turn.correlation_id))
            except BudgetExceeded as spent:
                turn.report({"type": "stopped", "reason": "token_budget", "budget": spent.budget})
                message = _budget_message(spent)
                draft = _answer(turn.final)  # a checked draft of this turn, if it got that far
                listed = [*notices, message] if draft else notices
                return turn.ended("incomplete", listed, "token_budget", message)
            except GraphRecursionError:
                steps = self.limits.recursion_limit
                turn.report({"type": "stopped", "reason": "recursion_limit", "steps": steps})
                log.warning(
                    "thread %s hit the recursion limit [%s]", thread_id, turn.correlation_id
                )
                message = f"Stopped after {steps} steps; {INCOMPLETE}"
                return turn.ended("incomplete", [*notices, message], "recursion_limit", message)
            except Exception as exc:
                log.exception(
                    "investigation failed for thread %s [%s]", thread_id, turn.correlation_id
                )
                turn.report({"type": "failed", "error": type(exc).__name__})
                return turn.result(
                    "failed", _failure_message(exc, turn.correlation_id), notices=notices
                )

            stop_reason = turn.final.get("stop_reason")
            status: Status = "incomplete" if stop_reason == "step_limit" else "answered"
            turn.report({"type": "final", "status": status})
            if stop_reason == "step_limit":
                steps = self.limits.recursion_limit
                notices.append(f"Stopped near the step limit ({steps} steps); {INCOMPLETE}")
            elif stop_reason == "tool_budget":
                notices.append(
                    f"Used the whole tool budget ({self.limits.tool_budget} calls) "
                    "before answering; some evidence may be missing."
                )
            # Tools that failed this turn: the answer may lack their evidence.
            ended = [e for e in turn.events if e["type"] == "tool_finished"]
            if failed := sorted({e["tool"] for e in ended if e.get("outcome") == "failed"}):
                notices.append(
                    f"Failed this turn: {', '.join(failed)}; the answer may lack that evidence."
                )
            return turn.ended(status, notices, stop_reason)

    async def rubric_status(self, thread_id: str) -> RubricReport:
        """The thread's active rubric, its latest run's status and every evaluation."""
        values = (await self.graph.aget_state(self._config(thread_id))).values
        return RubricReport(
            thread_id=thread_id,
            rubric=values.get("rubric"),
            status=values.get("rubric_status"),
            grading_run_id=values.get("rubric_run_id"),
            iterations=values.get("rubric_iteration", 0),
            max_iterations=self.limits.rubric_max_iterations,
            evaluations=values.get("rubric_evaluations") or [],
        )


def _answer(state: dict[str, Any]) -> str | None:
    """The latest draft as both guards passed it (None: none passed)."""
    return (state.get("draft_check") or {}).get("answer")


def _turn_fields(state: dict[str, Any]) -> dict[str, Any]:
    check = state.get("draft_check") or {}
    verdict = check.get("traces") or {}
    checks = verdict.get("checks", {})
    claims = check.get("claims") or {}
    grounding = check.get("grounding") or {}
    facts = grounding.get("checks", [])
    # The links and commands that show the posted answer's grounded facts, each once,
    # labelled by the tool call that read them.
    sources = {c["where"]: source_call(c["source"]) for c in facts if c.get("where")}
    in_text = [f.get("basis") == TEXT for f in facts if f["status"] == "grounded"]  # each grounded
    return {
        "facts_checked": len(facts),
        "facts_grounded": in_text.count(False),
        "facts_seen_in_text": in_text.count(True),
        "sources": [{"where": w, "label": label} for w, label in sources.items()][:MAX_SOURCES],
        "facts_unchecked": sum(f["status"] == "unchecked" for f in facts),
        "facts_removed": grounding.get("removed", 0),
        "facts_marked": grounding.get("marked", 0),
        "grounding_revisions": state.get("grounding_revision_count", 0),
        "tool_calls": state.get("tool_calls_used", 0),
        "verified_trace_ids": ids_with(checks, "found"),
        "unverified_trace_ids": ids_with(checks, "unverified"),
        "removed_trace_ids": ids_with(checks, "missing") if verdict.get("removed") else [],
        "trace_revisions": state.get("trace_revision_count", 0),
        "claim_revisions": state.get("claim_revision_count", 0),
        "removed_claims": claims.get("false_claims", []) if claims.get("removed") else [],
        "rubric_status": state.get("rubric_status"),
        "rubric_passes": state.get("rubric_iteration", 0),
        "rubric_revisions": state.get("rubric_revision_count", 0),
        "charts": charts_for_answer(state, check.get("answer") or "", facts),
    }


def _busy_message(busy: ModelBusy, correlation_id: str) -> str:
    what = {
        "quota": "its quota is exhausted (429 RESOURCE_EXHAUSTED)",
        "overload": "it is overloaded (503 UNAVAILABLE)",
        "limit": "this deployment's own limit (MODEL_RPM / MODEL_TPM) is taken",
    }[busy.reason]
    return (
        f"The language model ({busy.model}) had no capacity for this question: {what}, and "
        "it did not come back within MODEL_WAIT_MAX. Ask again in a few minutes; if it keeps "
        "happening, raise the model's quota, set LLM_FALLBACK_MODEL, or lower the load "
        f"(MODEL_RPM). Reference {correlation_id}."
    )


def _budget_message(spent: BudgetExceeded) -> str:
    if spent.budget == "thread":
        return (
            f"This thread has used its token budget ({spent.limit:,} tokens, "
            "THREAD_TOKEN_BUDGET); I stopped here. Start a new thread for a new question, "
            "or ask an admin to raise the budget."
        )
    if spent.budget == "automatic":
        return (
            f"Investigations alerts start have used today's token budget ({spent.limit:,} "
            "tokens, AUTO_INVESTIGATION_DAILY_TOKEN_BUDGET); I stopped here. It resets at "
            "00:00 UTC; mention me in this thread to ask anyway."
        )
    return (
        f"This channel has used today's token budget ({spent.limit:,} tokens, "
        "CHANNEL_DAILY_TOKEN_BUDGET); I stopped here. It resets at 00:00 UTC, "
        "or ask an admin to raise the budget."
    )


def _failure_message(exc: Exception, correlation_id: str) -> str:
    module = type(exc).__module__
    if module.startswith(("google.", "langchain_google_genai")):
        what = "The language model did not answer"
    elif module.startswith("redis"):
        what = "The conversation store (Redis) is unavailable"
    else:
        what = "The investigation failed"
    return f"{what}. Try again in a minute; if it persists, quote reference {correlation_id}."


@asynccontextmanager
async def open_investigator(
    model: ModelSpec | BaseChatModel,
    tempo: TempoSpec,
    limits: GraphLimits,
    redis: aioredis.Redis | None,
    checkpoint_ttl_minutes: float | None = None,
    *,
    prefix: str,
    actions: ActionPipeline | None = None,
    grader_model: ModelSpec | BaseChatModel | None = None,
    default_rubric: str | None = None,
    on_evaluation: OnEvaluation | None = None,
    saver: BaseCheckpointSaver[str] | None = None,
    guard: ModelGuard | None = None,
    configured: Mapping[str, BaseModel] | None = None,
    toolsets: Sequence[ToolSet] = TOOLSETS,
) -> AsyncIterator[Investigator]:
    """Everything an investigation needs, opened together and closed together.

    With `actions`, the agent can read rollout history and propose actions through it.
    The grader uses `grader_model` (default: the agent's model) and the read-only evidence tools.
    Checkpoints are kept on `redis` under `prefix` (REDIS_PREFIX); `saver` replaces the
    Redis checkpointer (the demo's embedded mode; `redis` is then unused). `guard` takes every
    model call (agent, grader) through the shared limit, the budgets and the quota waits.
    The agent gets the tools of each of `toolsets` whose prerequisites hold: its settings
    in `configured` (by the set's name; Tempo's tools share the trace guard's client), the
    cluster (`actions`) for the sets that need it. Nothing else depends on an optional
    source: one that fails is a failed tool call.
    """
    chat_model = make_chat_model(model, guard=guard) if isinstance(model, ModelSpec) else model
    # With a guard, the agent's model is built again for the grader: its calls are the grader's.
    grader_spec = model if grader_model is None and guard is not None else grader_model
    if isinstance(grader_spec, ModelSpec):
        grading_model = make_chat_model(grader_spec, "GRADER_MODEL", guard)
    else:
        grading_model = grader_spec if grader_spec is not None else chat_model
    async with AsyncExitStack() as opened:
        client = await opened.enter_async_context(aclosing(TempoClient(tempo)))
        namespaces = actions.policy.allowed_namespaces if actions else ()
        sources = LiveSources(actions.cluster if actions else None, client, namespaces)
        agent_tools, grader_tools = await opened.enter_async_context(
            open_tools(toolsets, configured or {}, client, actions)
        )
        checkpointer = saver
        if checkpointer is None:
            if redis is None:
                raise ValueError("open_investigator needs a Redis client or a saver")
            checkpointer = await opened.enter_async_context(
                open_checkpointer(redis, checkpoint_ttl_minutes, prefix=prefix)
            )
        graph = build_graph(
            chat_model,
            agent_tools,
            TraceVerifier(client, limits.trace_verify_concurrency),
            Grader(grading_model, grader_tools, limits.grader_max_steps),
            checkpointer,
            limits,
            on_evaluation,
            actions.store if actions else None,
            sources,
        )
        yield Investigator(graph, limits, default_rubric)
