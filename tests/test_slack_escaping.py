"""No text from outside the bot — model, telemetry, gates, judge, grader — carries a
mention, a ping, a disguised link or a control or bidi character into Slack."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.outbound.blocks import (
    answer_message,
    card_blocks,
    failure_message,
    progress_text,
    rubric_report_blocks,
    steps_blocks,
)
from bot.outbound.mrkdwn import escape, plain
from bot.process.server import RunningBot
from gates.model import ActionRequest, GateDecision, JudgeVerdict, Outcome, Transition
from graph.runner import InvestigationResult, RubricReport
from sandbox import GeminiSimulator, Reply
from sandbox.slack import SlackDriver, SlackSimulator
from tests.gates_fixtures import APPROVER, REQUESTER
from tests.slack_fixtures import GRAFANA
from tests.slack_markup import HOSTILE_TOKENS, smuggled

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
BOT_USERS = frozenset({REQUESTER, APPROVER})
HOSTS = frozenset({"grafana.example"})

hostile_text = st.lists(
    st.one_of(st.text(max_size=12), st.sampled_from(HOSTILE_TOKENS)), max_size=12
).map("".join)
bounded = settings(max_examples=120, derandomize=True, deadline=None, database=None)


def _answer(text: str) -> Any:
    result = InvestigationResult(
        thread_id="T:C:1",
        status="answered",
        answer=f"{text} see {TRACE}",
        notices=[text],
        verified_trace_ids=[TRACE],
        correlation_id="abc",
    )
    return answer_message(result, GRAFANA, "tempo")


def _failure(text: str) -> Any:
    return failure_message(
        InvestigationResult(thread_id="T:C:1", status="failed", answer=text, correlation_id="a")
    )


def _card(text: str) -> Any:
    request = ActionRequest(
        action="scale",
        namespace="shop",
        deployment="payment-api",
        replicas=6,
        reason=text,
        thread_key="t",
        requester=REQUESTER,
        status="succeeded",
        evidence=[TRACE],
        gate_decisions=[GateDecision(gate="policy", allowed=True, reason=text)],
        judge=JudgeVerdict(safe_to_proceed=True, reason=text),
        outcome=Outcome(dry_run=False, detail=text),
        history=[
            Transition(from_status="pending_approval", to_status="approved", at=0, actor=APPROVER)
        ],
    )
    refused = request.model_copy(
        update={
            "status": "refused",
            "gate_decisions": [GateDecision(gate=text, allowed=False, reason=text)],
        }
    )
    return [card_blocks(r, GRAFANA, "tempo", dry_run=False) for r in (request, refused)]


def _rubric_report(text: str) -> Any:
    evaluation = {
        "grading_run_id": "r",
        "iteration": 0,
        "result": "needs_revision",
        "explanation": text,
        "criteria": [{"name": text, "passed": False, "gap": text}],
        "unverified": False,
    }
    report = RubricReport(
        thread_id="T:C:1",
        rubric=text,
        status=text,
        grading_run_id="r",
        iterations=1,
        max_iterations=3,
        evaluations=[evaluation],  # type: ignore[list-item]
    )
    return rubric_report_blocks(report, "this thread")


def _steps(text: str) -> Any:
    events = [
        {"type": "tool_started", "tool": text, "at_ms": 1},
        {"type": "tool_finished", "tool": text, "status": text},
        {"type": "forced_answer", "reason": text},
        {"type": text},
    ]
    return [steps_blocks(events), progress_text({"type": "tool_started", "tool": text}, 3)]


RENDERERS: dict[str, Callable[[str], Any]] = {
    "answer": _answer,
    "failure": _failure,
    "approval card": _card,
    "rubric status": _rubric_report,
    "steps and progress": _steps,
}


@pytest.mark.parametrize("render", RENDERERS.values(), ids=RENDERERS.keys())
@bounded
@given(text=hostile_text)
def test_outside_text_rendered_for_slack_carries_no_mention_link_or_control(
    render: Callable[[str], Any], text: str
) -> None:
    assert smuggled(render(text), bot_users=BOT_USERS, link_hosts=HOSTS) == []


@bounded
@given(text=hostile_text)
def test_a_cleaned_rubric_keeps_no_slack_markup_or_control(text: str) -> None:
    assert smuggled(plain(text)) == []


def test_escaping_shows_markup_as_the_literal_text_it_was() -> None:
    assert escape("<!here> & <@U1>") == "&lt;!here&gt; &amp; &lt;@U1&gt;"
    assert escape("a\u202eb\x00c\td\ne") == "abc\td\ne"


HOSTILE = (
    "<!channel> <!everyone> <!here> <@U999ADMIN> "
    "<https://evil.example/login|Grafana (click to re-auth)> \u202egnp.exe\x07"
)


async def test_no_message_the_bot_sends_carries_what_the_model_smuggled(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    """The model's answer, its proposal's reason and the grader's explanation, through
    the real bot: every posted, updated, ephemeral and response_url message is clean."""
    await driver.slash("/rubric", "set cause stated", user=APPROVER)
    proposal = {"action": "scale", "namespace": "shop", "replicas": 6, "reason": HOSTILE}
    gemini.script(
        Reply.calls(
            ("propose_action", {**proposal, "deployment": "payment-api"}),
            ("propose_action", {**proposal, "deployment": HOSTILE}),  # refused by validation
        ),
        Reply.json({"safe_to_proceed": True, "reason": HOSTILE}),
        Reply.text(HOSTILE),
        Reply.call(
            "SubmitVerdict",
            result="satisfied",
            explanation=HOSTILE,
            criteria=[{"name": "cause stated", "passed": True}],
        ),
    )
    await driver.mention("why?", ts="1700000000.000100")
    assert await bot.services.jobs.join(15)
    answer = slack.thread("C1", "1700000000.000100")[0]
    permalink = "https://sim.slack.com/archives/C1/p1700000000000100"
    await driver.slash("/rubric", f"status {permalink}")
    await driver.click(
        "show_steps",
        answer.blocks[-1]["elements"][0]["value"],
        user=REQUESTER,
        channel="C1",
        message_ts=answer.ts,
    )
    assert await bot.services.jobs.join(15)

    sent = [c.args for c in slack.calls if c.method.startswith("chat.")] + slack.responses
    assert len(sent) >= 7  # placeholder, answer, two cards, rubric replies, steps
    assert HOSTILE.split()[0].replace("<", "&lt;").replace(">", "&gt;") in str(answer.text)
    assert smuggled(sent, bot_users=BOT_USERS, link_hosts=HOSTS) == []
