"""Block Kit rendering: answers, progress, approval cards, steps, rubric status, alert groups.

Pure functions. Model output and telemetry go through `bot.outbound.mrkdwn.escape` before our own
links are added, so no answer can ping `@channel`, mention anyone or smuggle a link. Limits
kept here: section text 3000 chars, at most 50 blocks, button text 75, confirm text 300.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.outbound.mrkdwn import escape
from bot.turn.notifications import Notification
from gates.model import ActionRequest
from graph.action_claims import remove_claims, true_state, unsupported_claims
from graph.grounding.evidence import TEXT
from graph.links import query_link
from graph.result import InvestigationResult, RubricReport
from graph.tools.registry import shown_by_name
from graph.trace_ids import rewrite_trace_ids
from graph.untrusted import truncate

Block = dict[str, Any]
SECTION_LIMIT = 3000
MAX_BLOCKS = 50
MESSAGE_TEXT_LIMIT = 3000  # the notification text; the blocks carry the whole answer


def section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def context(text: str) -> Block:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def button(text: str, action_id: str, value: str, style: str | None = None) -> Block:
    shown = {"type": "plain_text", "text": text[:75]}
    styled = {"style": style} if style else {}
    return {"type": "button", "text": shown, "action_id": action_id, "value": value, **styled}


def actions_block(block_id: str | None, *elements: Block) -> Block:
    named = {"block_id": block_id} if block_id else {}
    return {"type": "actions", **named, "elements": list(elements)}


def confirm(title: str, text: str, yes: str) -> Block:
    """Slack's confirmation dialog on a button."""
    return {
        "title": {"type": "plain_text", "text": title},
        "text": {"type": "mrkdwn", "text": text},
        "confirm": {"type": "plain_text", "text": yes},
        "deny": {"type": "plain_text", "text": "Cancel"},
    }


def link_traces(
    text: str, verified: Iterable[str], grafana_url: str | None, datasource: str
) -> str:
    """Verified trace IDs become Grafana Explore links (text must already be escaped)."""
    if not grafana_url:
        return text
    linked, _ = rewrite_trace_ids(
        text, verified, lambda t: f"<{query_link(grafana_url, 'tempo', datasource, t)}|{t}>"
    )
    return linked


def _pack(pieces: Iterable[str], separator: str, limit: int) -> list[str]:
    """Join pieces (each within `limit`) into runs of at most `limit` characters."""
    runs: list[str] = []
    current: str | None = None
    for piece in pieces:
        candidate = piece if current is None else f"{current}{separator}{piece}"
        if current is not None and len(candidate) > limit:
            runs.append(current)
            current = piece
        else:
            current = candidate
    if current is not None:
        runs.append(current)
    return runs


def split_sections(text: str, limit: int = SECTION_LIMIT) -> list[str]:
    """Chunks of at most `limit` characters, cut at line ends, else at spaces."""
    lines: list[str] = []
    for line in text.split("\n"):
        if len(line) <= limit:
            lines.append(line)
            continue
        # A single unbroken token longer than the limit is cut where it must be.
        words = [w[i : i + limit] for w in line.split(" ") for i in range(0, max(len(w), 1), limit)]
        lines.extend(_pack(words, " ", limit))
    chunks = _pack(lines, "\n", limit)
    return [c for c in chunks if c.strip()] or [" "]


# Starts every line in which the bot states an action's state; model text never contains it.
RECORD_MARK = ":ledger:"
RECORD_LABEL = f"{RECORD_MARK} *tracegate record when answered:*"
_RECORD_MARKS = re.compile(r":ledger:|\U0001f4d2", re.IGNORECASE)


def _sent_back(drafts: int) -> str:
    return f", {drafts} draft{'s' if drafts != 1 else ''} sent back" if drafts else ""


SEEN_IN_TEXT = "seen only in a message or log"
MAX_SOURCE_LABEL = 60


# What a link to a tool's result is called, as each tool declares it.
SOURCE_LABELS = {name: s.cited_as for name, s in shown_by_name().items() if s.cited_as}


def source_label(call: str) -> str:
    """A tool call as a link's label: "trace 1a11f5125227…", "Loki query"."""
    tool, _, argument = call.partition(" ")
    if tool == "get_trace":
        shown = argument.lstrip("0") or argument  # a 64-bit ID padded to 32 digits
        return f"trace {shown[:12]}…"
    return SOURCE_LABELS.get(tool, call[:MAX_SOURCE_LABEL])


def cited(where: str, label: str) -> str:
    """A citation as mrkdwn: a link labelled by the tool call, or the command in code."""
    if where.startswith(("https://", "http://")):
        return f"<{where}|{escape(source_label(label))}>"
    return f"`{escape(where)}`"


def _facts(result: InvestigationResult) -> str:
    """The grounding check's counts: what was checked and what became of it."""
    others = (
        result.facts_checked
        - result.facts_grounded
        - result.facts_seen_in_text
        - result.facts_unchecked
    )
    marked_unverified = max(0, result.facts_marked - result.facts_unchecked)
    counts = [f"{result.facts_checked} checked", f"{result.facts_grounded} grounded"]
    if result.facts_seen_in_text:
        counts.append(f"{result.facts_seen_in_text} {SEEN_IN_TEXT}")
    if result.facts_removed or (others and not marked_unverified):
        counts.append(f"{result.facts_removed} removed")
    if marked_unverified:
        counts.append(f"{marked_unverified} marked unverified")
    counts.append(f"{result.facts_unchecked} unchecked")
    return "facts: " + ", ".join(counts) + _sent_back(result.grounding_revisions)


def how_it_was_reached(result: InvestigationResult) -> str:
    """The footer. It says "verified" only of an answer every checked fact of which held:
    a trace ID or a fact left unchecked or marked makes it say what was found instead."""
    parts = [f"{result.tool_calls} tool call{'s' if result.tool_calls != 1 else ''}"]
    doubtful = result.unverified_trace_ids or result.facts_marked or result.facts_unchecked
    found = "found in Tempo" if doubtful else "verified"
    parts.append(
        f"traces: {len(result.verified_trace_ids)} {found}, "
        f"{len(result.unverified_trace_ids)} unverified, {len(result.removed_trace_ids)} removed"
        + _sent_back(result.trace_revisions)
    )
    if result.facts_checked or result.grounding_revisions:
        parts.append(_facts(result))
    if result.claim_revisions or result.removed_claims:
        parts.append(
            f"action claims: {result.claim_revisions} sent back, "
            f"{len(result.removed_claims)} removed"
        )
    if result.rubric_status:
        revisions = result.rubric_revisions
        parts.append(
            f"rubric: {result.rubric_status.replace('_', ' ')}"
            + (f" after {revisions} revision{'s' if revisions != 1 else ''}" if revisions else "")
        )
    if result.stop_reason:
        parts.append(f"stopped: {result.stop_reason.replace('_', ' ')}")
    if result.model:  # the model that answered (LLM_FALLBACK_MODEL's when it stood in)
        parts.append(f"model: {result.model.partition(':')[2] or result.model}")
    parts.append(f"{result.duration_s:.1f} s")
    return " · ".join(parts)


FEEDBACK_ACTION = "answer_feedback"
REASON_CALLBACK = "feedback_reason"
REASON_BLOCK, REASON_ACTION = "what_was_wrong", "text"
MAX_REASON_CHARS = 2000


def feedback_block(correlation_id: str) -> dict[str, Any]:
    """The feedback buttons under an answer (a `context_actions` block)."""

    def choice(text: str, verdict: str, label: str) -> dict[str, Any]:
        shown, value = {"type": "plain_text", "text": text}, f"{verdict}:{correlation_id}"
        return {"text": shown, "value": value, "accessibility_label": label}

    buttons = {
        "type": "feedback_buttons",
        "action_id": FEEDBACK_ACTION,
        "positive_button": choice("Good answer", "good", "This answer was right"),
        "negative_button": choice("Wrong answer", "bad", "This answer was wrong"),
    }
    return {"type": "context_actions", "elements": [buttons]}


def reason_view(correlation_id: str) -> dict[str, Any]:
    """The optional "what was wrong?" modal a 👎 opens."""
    return {
        "type": "modal",
        "callback_id": REASON_CALLBACK,
        "private_metadata": correlation_id,
        "title": {"type": "plain_text", "text": "What was wrong?"},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Skip"},
        "blocks": [
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": True,
                "label": {"type": "plain_text", "text": "What did the answer get wrong?"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_ACTION,
                    "multiline": True,
                    "max_length": MAX_REASON_CHARS,
                },
            }
        ],
    }


def answer_message(
    result: InvestigationResult,
    grafana_url: str | None,
    datasource: str,
    actions: Sequence[ActionRequest] = (),
) -> tuple[str, list[Block]]:
    """The final answer as (notification text, blocks); `actions` are this turn's
    proposals as stored, whose states the bot states under the model's text."""
    # Without the bot's record mark, so that model text cannot pass as the bot's word.
    answer = escape(_RECORD_MARKS.sub("", result.answer))
    body = link_traces(answer, result.verified_trace_ids, grafana_url, datasource)
    if result.unverified_trace_ids:
        body += "\n\n:warning: Trace IDs marked _unverified_ could not be checked in Tempo."
    notes = "".join(f"\n_{escape(n)}_" for n in result.notices)
    chunks = split_sections(body + ("\n" + notes if notes else ""))
    # Action states, the context line, the Steps button and the feedback buttons.
    # The footer's sources: where each grounded fact of the answer can be seen again.
    elements = [
        {"type": "mrkdwn", "text": text}
        for i, source in enumerate(result.sources[:9])
        if len(text := ("sources: " if i == 0 else "") + cited(source["where"], source["label"]))
        <= SECTION_LIMIT
    ]
    sources = {"type": "context", "elements": elements} if elements else None
    room = MAX_BLOCKS - 3 - (1 if actions else 0) - (1 if sources else 0)
    if len(chunks) > room:  # the last chunk that fits says how much does not
        omitted = sum(len(c) for c in chunks[room - 1 :])
        chunks[room - 1 :] = [f"_…{omitted:,} more characters omitted; ask for a summary._"]
    blocks = [section(c) for c in chunks]
    if actions:  # each action proposed this turn and its state, from the store, in the bot's voice
        lines = [
            f"{RECORD_LABEL} {escape(r.describe())} — {escape(true_state(r))}" for r in actions
        ]
        blocks.append(context("\n".join(lines)[:SECTION_LIMIT]))
    blocks.append(feedback_block(result.correlation_id))  # 👍 / 👎 right under the answer
    blocks.append(context(how_it_was_reached(result)))
    if sources:
        blocks.append(sources)
    blocks.append(actions_block(None, button("Steps", "show_steps", result.correlation_id)))
    text = truncate(answer, MESSAGE_TEXT_LIMIT)
    return text or "(empty answer)", blocks


def failure_message(result: InvestigationResult) -> tuple[str, list[Block]]:
    text = f":x: {escape(result.answer)}"
    return text, [section(text)]


PROGRESS = {
    "model_started": "Thinking…",
    "verification_started": "Checking the cited trace IDs in Tempo…",
    "forced_answer": "Limit reached; writing the answer with what I have…",
    "resumed": "Finishing an interrupted investigation first…",
}


def progress_text(event: dict[str, Any], max_iterations: int) -> str | None:
    kind = event.get("type")
    if kind == "tool_started":
        return f":mag: Running `{escape(str(event.get('tool')))}`…"
    if kind == "rubric_evaluation_start":
        return (
            f":clipboard: Grading the answer (pass {int(event.get('iteration', 0)) + 1} "
            f"of {max_iterations})…"
        )
    if kind in PROGRESS:
        return f":hourglass_flowing_sand: {PROGRESS[kind]}"
    return None


# --- steps ----------------------------------------------------------------------------------
# Each event kind's line, filled from its fields (one it lacks reads "None"); a kind not
# listed reads as its name. (The trace guard's and the grounding check's lines are
# `_guard_details`' and `_grounding_details`'.)
_STEP_LINES = {
    "tool_started": "tool {tool} started",
    "tool_finished": "tool {tool}: {status}",
    "model_started": "model ({node})",
    "model_finished": "model done; tool calls: {calls}",
    "rubric_evaluation_end": "rubric pass {pass_number}: {result}{unverified_mark}",
    "forced_answer": "forced answer: {reason}",
    "stopped": "stopped: {reason} after {steps} steps",
    "claims_checked": "action-claim guard: {unsupported} unsupported claim(s)",
    "grounding_started": "grounding check started",
    "action_proposed": "action {request_id}: {status}",
    "chart_posted": "chart posted: {chart}",
    "chart_not_posted": "chart not posted: {chart} — {reason}",
}


def _step_detail(e: dict[str, Any]) -> str:
    kind = str(e.get("type", "?"))
    line = _STEP_LINES.get(kind)
    if line is None:
        return kind.replace("_", " ")
    return line.format_map(
        defaultdict(
            lambda: None,
            e,
            calls=", ".join(e.get("tool_calls", [])) or "none",
            pass_number=int(e.get("iteration", 0)) + 1,
            unverified_mark=" (unverified)" if e.get("unverified") else "",
        )
    )


GUARD_ACTIONS = {"revise": "sent back to the agent", "removed": "removed from the answer"}


def _guard_details(events: list[dict[str, Any]]) -> dict[int, str]:
    """Each trace-guard step by position: its counts, each missing ID by name and what the
    guard did with it, and the IDs an earlier draft was sent back for that are gone now."""
    details: dict[int, str] = {}
    sent_back: list[str] = []
    for position, e in enumerate(events):
        if e.get("type") != "verification_finished":
            continue
        missing = [str(t) for t in e.get("missing_ids", [])]
        line = (
            f"trace guard: {e.get('found')} found, {e.get('missing')} missing, "
            f"{e.get('unverified')} unverified"
        )
        if missing:
            what = GUARD_ACTIONS.get(str(e.get("outcome")), "missing")
            line += f"; not in Tempo, {what}: {', '.join(missing)}"
        if corrected := [t for t in sent_back if t not in missing]:
            line += f"; corrected after being sent back: {', '.join(corrected)}"
        details[position] = line
        sent_back = missing if e.get("outcome") == "revise" else []
    return details


GROUNDING_OUTCOMES = {
    "revise": "sent back to the agent",
    "removed": "ungrounded ones removed from the answer",
    "marked": "marked in the answer",
    "grounded": "posted",
}
MAX_CITED_CHARS = 160


def _grounding_details(events: list[dict[str, Any]]) -> dict[int, str]:
    """Each grounding check by position, as mrkdwn: its counts and what was done, then every
    claim with its source (the tool call and field, or the live look-up) and the link or
    command that shows it, or why it failed — a citation list a person can audit."""
    details: dict[int, str] = {}
    for position, e in enumerate(events):
        if e.get("type") != "grounding_finished":
            continue
        seen = f"{e.get('seen_in_text')} {SEEN_IN_TEXT}, " if e.get("seen_in_text") else ""
        lines = [
            escape(
                f"grounding check: {e.get('checked')} facts, {e.get('grounded')} grounded, "
                f"{seen}{e.get('ungrounded')} ungrounded, {e.get('unchecked')} unchecked; "
                + GROUNDING_OUTCOMES.get(str(e.get("outcome")), str(e.get("outcome")))
            )
        ]
        for claim in e.get("claims") or []:
            why = str(claim.get("source") or claim.get("detail") or "")[:MAX_CITED_CHARS]
            status = claim.get("status")
            if status == "grounded" and claim.get("basis") == TEXT:
                status = SEEN_IN_TEXT
            line = escape(
                f"  • {claim.get('kind')} {str(claim.get('text'))[:80]}: {status}"
                + (f" — {why}" if why else "")
            )
            if where := str(claim.get("where") or ""):
                line += " · " + cited(where, "open")
            lines.append(line)
        details[position] = "\n".join(lines)
    return details


def steps_blocks(events: list[dict[str, Any]]) -> list[Block]:
    """The run's trace, for whoever clicks Steps: each event in order with its status."""
    guard = _guard_details(events)
    grounding = _grounding_details(events)  # mrkdwn already: its links are ours
    lines = [
        f"`{int(e.get('at_ms', 0)) / 1000:6.1f}s` "
        + (grounding.get(i) or escape(guard.get(i) or _step_detail(e)))
        for i, e in enumerate(events)
    ]
    chunks = split_sections("\n".join(lines) or "No steps recorded.")
    return [section(chunk) for chunk in chunks][:MAX_BLOCKS]


# --- approval cards ---------------------------------------------------------------------------
OUTCOME_ICONS = {
    "succeeded": ":white_check_mark:",
    "failed": ":x:",
    "aborted": ":no_entry:",
    "rejected": ":no_entry_sign:",
    "expired": ":hourglass:",
    "executing": ":gear:",
    "approved": ":gear:",
}


_USER_ID = re.compile(r"[UW][A-Z0-9]+")


def _change(request: ActionRequest) -> str:
    """What approval changes; for a rollback, the target pinned at proposal (what runs)."""
    snap = request.snapshot
    if request.action == "scale":
        return f"{snap.replicas if snap else '?'} → {request.replicas} replicas"
    target = request.target_revision
    if snap is None or target is None:
        return "previous revision"
    same = " — same images, other pod settings" if target.images == snap.images else ""
    return (
        f"revision {snap.current_revision} ({', '.join(snap.images)}) → "
        f"{target.revision} ({', '.join(target.images)}){same}"
    )


def _unclaimed(text: str, request: ActionRequest) -> str:
    """Model text on a card (the agent's reason, the judge's) without sentences saying the
    action was approved or ran that its record does not bear out: the status line says."""
    return remove_claims(text, unsupported_claims(text, [request]))[0]


def card_blocks(
    request: ActionRequest,
    grafana_url: str | None,
    datasource: str,
    dry_run: bool,
    note: str = "",
) -> list[Block]:
    """The approval card for a request in any state; `note` is one more line under it."""
    what = escape(request.describe())
    blocks: list[Block] = [section(f"*Proposed action:* {what}")]
    if request.status == "refused":
        refusal = request.refusal
        judged = _unclaimed(request.judge.reason, request) if request.judge else "no verdict"
        why = f"{refusal.gate}: {refusal.reason}" if refusal else f"judge: {judged}"
        blocks.append(context(f":no_entry: Refused by {escape(why)}"))
        if note:
            return [*blocks, context(note)]
        if refusal is not None and refusal.open_breaker is not None:
            reset = button("Reset breaker", "reset_breaker", request.id, "danger")
            blocks.append(actions_block(f"breaker:{request.id}", reset))
        return blocks
    evidence = ", ".join(
        f"<{query_link(grafana_url, 'tempo', datasource, t)}|{t.lstrip('0')[:12]}…>"
        if grafana_url
        else f"`{t}`"
        for t in request.evidence[:5]
    )
    expires = time.strftime("%H:%M UTC", time.gmtime(request.expires_at))
    # A person as a mention; an automatic investigation by its alert ("alert HighErrors").
    by = request.requester
    asker = f"<@{by}>" if _USER_ID.fullmatch(by) else escape(by[:150])
    fields = (
        f"*Where*\n`{escape(request.target)}`",
        f"*Change*\n{escape(_change(request))}",
        f"*Asked by*\n{asker}",
        f"*Expires*\n<!date^{int(request.expires_at)}^{{time}}|{expires}>",
    )
    blocks.append({"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in fields]})
    blocks.append(section(f"*Reason:* {escape(_unclaimed(request.reason, request))[:2500]}"))
    if evidence:
        blocks.append(context(f"Evidence: {evidence}"))
    gates = "\n".join(
        f"{':white_check_mark:' if d.allowed else ':x:'} *{d.gate}*: {escape(d.reason)}"
        for d in request.gate_decisions
    )
    if request.judge is not None:
        icon = ":warning:" if not request.judge.available else ":scales:"
        gates += f"\n{icon} *judge*: {escape(_unclaimed(request.judge.reason, request))}"
    if gates:  # Slack refuses an empty text
        blocks.append(context(gates[:3000]))
    if request.status == "pending_approval":
        mode = "a server-side dry run (ACTIONS_ENABLED is off)" if dry_run else "it for real"
        approve = button("Approve", "approve_action", request.id, "primary")
        approve["confirm"] = confirm(
            "Run this action?", f"{what[:200]} — this runs {mode}."[:300], "Approve"
        )
        reject = button("Reject", "reject_action", request.id, "danger")
        blocks.append(actions_block(f"action:{request.id}", approve, reject))
    else:
        blocks.append(context(status_line(request)))
    if request.rollout is not None:
        blocks.append(context(rollout_line(request)))
    if note:
        blocks.append(context(note))
    return blocks


def rollout_line(request: ActionRequest) -> str:
    """How the rollout went after a real success; when badly, the reverse action to ask for."""
    rollout = request.rollout
    assert rollout is not None
    if rollout.healthy:
        return f":large_green_circle: {escape(rollout.detail)}"
    reverse = (
        f" To undo it, ask me to propose: _{escape(rollout.reverse)}_ (it goes through the gates)."
        if rollout.reverse
        else ""
    )
    return f":warning: {escape(rollout.detail)}.{reverse}"


def status_line(request: ActionRequest) -> str:
    icon = OUTCOME_ICONS.get(request.status, ":grey_question:")
    who = {t.to_status: t.actor for t in request.history}
    if request.status in ("approved", "executing"):
        return f"{icon} Approved by <@{who.get('approved', '?')}> — executing…"
    if request.status == "rejected":
        return f"{icon} Rejected by <@{who.get('rejected', '?')}>"
    if request.status == "expired":
        return f"{icon} Expired — nobody approved it in time; ask again if still needed."
    outcome = escape(request.outcome.detail) if request.outcome else ""
    approver = who.get("approved")
    by = f" (approved by <@{approver}>)" if approver else ""
    label = (
        f"Dry run {request.status}"
        if request.outcome and request.outcome.dry_run
        else request.status.capitalize()
    )
    return f"{icon} {label}{by}: {outcome}"


# --- rubric -------------------------------------------------------------------------------------
def rubric_report_blocks(report: RubricReport, label: str) -> list[Block]:
    if not report.rubric and not report.evaluations:
        return [section(f"No rubric is active for {label}, and nothing has been graded.")]
    latest_run = report.grading_run_id
    latest = [e for e in report.evaluations if e["grading_run_id"] == latest_run]
    lines = [
        f"*Rubric for {label}:* {escape((report.status or 'not graded yet').replace('_', ' '))}"
        f" — pass {report.iterations} of {report.max_iterations}"
    ]
    if latest:
        last = latest[-1]
        for criterion in last["criteria"]:
            mark = ":white_check_mark:" if criterion.get("passed") else ":x:"
            gap = f" — {escape(str(criterion.get('gap')))}" if not criterion.get("passed") else ""
            lines.append(f"{mark} {escape(str(criterion.get('name')))}{gap}")
        if last["unverified"]:
            lines.append("_The grader's verdict was incomplete and is marked unverified._")
        if last["explanation"]:
            lines.append(f"_{escape(last['explanation'])[:500]}_")
    runs = len({e["grading_run_id"] for e in report.evaluations})
    lines.append(f"{runs} grading run{'s' if runs != 1 else ''} in this thread.")
    return [section(chunk) for chunk in split_sections("\n".join(lines))][:MAX_BLOCKS]


# --- alert groups -------------------------------------------------------------------------------
# An alert group as the bot posts it: the message an automatic investigation answers under.
# Alert name, severity, summary, the labels that matter, the start time and the generator's
# link; then how many alerts fire, and "Resolved at 14:32 UTC" once the group is resolved.
# Everything the alert's author wrote goes through `escape` (no mention, no link smuggled in);
# links are the sender's `generatorURL`/`dashboardURL`, shown only when they are http(s).
SHOWN_LABELS = ("service", "namespace", "deployment", "pod", "job", "cluster", "instance")
MAX_ALERTS_LISTED = 5
MAX_TEXT = 300


def _link(url: str, label: str) -> str:
    if not url.startswith(("https://", "http://")) or any(c in url for c in "<>| \n"):
        return ""
    return f"<{url}|{label}>"


def alert_text(n: Notification) -> str:
    """The notification text (what a phone shows)."""
    alerts = n.firing or n.alerts
    name = (alerts[0].labels.get("alertname") if alerts else "") or n.title or "alert"
    state = "RESOLVED" if n.resolved else f"FIRING:{len(n.firing)}"
    return truncate(f"[{state}] {name}", 150)


def alert_blocks(n: Notification, *, investigated: bool) -> list[Block]:
    firing = n.firing
    shown = (firing or n.alerts)[:MAX_ALERTS_LISTED]
    first = shown[0] if shown else None
    labels = {**n.common_labels, **(first.labels if first else {})}
    name = labels.get("alertname") or n.title or "alert"
    severity = labels.get("severity", "")
    icon = ":white_check_mark:" if n.resolved else ":rotating_light:"
    head = f"{icon} *{escape(truncate(name, 150))}*" + (
        f" · {escape(severity)}" if severity else ""
    )
    blocks = [section(head)]
    notes = {**n.common_annotations, **(first.annotations if first else {})}
    summary = notes.get("summary") or notes.get("description") or notes.get("message")
    if first and summary:
        blocks.append(section(escape(truncate(summary, MAX_TEXT))))
    facts = [
        f"*{escape(k)}:* `{escape(truncate(labels[k], 100))}`"
        for k in SHOWN_LABELS
        if labels.get(k)
    ]
    if first:
        facts.append(f"*started:* {first.starts_at.astimezone(UTC):%Y-%m-%d %H:%M UTC}")
    if facts:
        blocks.append(context(" · ".join(facts)))
    if len(firing) > 1:
        others = [
            ", ".join(f"{k}={v}" for k, v in a.labels.items() if k != "alertname")
            for a in firing[1:MAX_ALERTS_LISTED]
        ]
        listed = "; ".join(escape(truncate(other, 150)) for other in others)
        unlisted = len(firing) - MAX_ALERTS_LISTED
        more = f" and {unlisted} more" if unlisted > 0 else ""
        blocks.append(context(f"{len(firing)} alerts firing: {listed}{more}"))
    sent = [(first.generator_url, "source"), (first.dashboard_url, "dashboard")] if first else []
    sent.append((n.external_url, n.source.capitalize()))
    links = [link for url, label in sent if (link := _link(url, label))]
    status = []
    if n.resolved:
        at = max((a.resolved_at for a in n.alerts if a.resolved_at), default=datetime.now(UTC))
        status.append(f"Resolved at {at.astimezone(UTC).strftime('%H:%M UTC')}")
    elif investigated:
        status.append("tracegate is investigating in the thread")
    if links or status:
        blocks.append(context(" · ".join([*status, *links])))
    return blocks
