"""Block Kit rendering (pure): limits, escaping, links, cards."""

from typing import Any

from bot.outbound.blocks import (
    answer_message,
    card_blocks,
    escape,
    how_it_was_reached,
    link_traces,
    split_sections,
    steps_blocks,
)
from gates.model import ActionRequest, GateDecision, Outcome, RolloutHealth
from graph.links import query_link
from graph.runner import InvestigationResult
from sandbox.slack import block_problems

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _result(answer: str, **fields: object) -> InvestigationResult:
    return InvestigationResult(
        thread_id="T:C:1", status="answered", answer=answer, correlation_id="abc", **fields
    )


def _scale(**fields: Any) -> ActionRequest:
    """A scale of shop/api requested by U1; `fields` add to or change it."""
    request = {"namespace": "shop", "deployment": "api", "thread_key": "t", "requester": "U1"}
    return ActionRequest(action="scale", **{**request, **fields})


def test_sections_never_exceed_3000_characters() -> None:
    text = ("word " * 1000 + "\n") * 5 + "x" * 7000
    chunks = split_sections(text)
    assert all(len(c) <= 3000 for c in chunks)
    assert "".join(chunks).replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(
        " ", ""
    )


def test_an_enormous_answer_stays_within_50_blocks_and_says_what_was_cut() -> None:
    _, blocks = answer_message(_result("paragraph\n" * 30_000), None, "tempo")
    assert len(blocks) == 50
    assert block_problems(blocks) == []
    assert "more characters omitted" in blocks[-4]["text"]["text"]  # then 👍👎, facts, Steps


def test_slack_control_sequences_are_escaped() -> None:
    assert escape("<!here> & <@U1>") == "&lt;!here&gt; &amp; &lt;@U1&gt;"


def test_verified_trace_ids_link_to_grafana_explore() -> None:
    linked = link_traces(f"see {TRACE}", [TRACE], "https://g.example/", "tempo-uid")
    url = query_link("https://g.example/", "tempo", "tempo-uid", TRACE)
    assert linked == f"see <{url}|{TRACE}>"
    assert url.startswith("https://g.example/explore?schemaVersion=1&panes=")
    assert " " not in url


def test_without_grafana_trace_ids_stay_plain() -> None:
    assert link_traces(f"see {TRACE}", [TRACE], None, "tempo") == f"see {TRACE}"


def test_unverified_answers_carry_a_warning() -> None:
    _, blocks = answer_message(_result("x", unverified_trace_ids=[TRACE]), None, "tempo")
    assert "could not be checked in Tempo" in blocks[0]["text"]["text"]


def test_a_refused_card_has_a_reason_and_no_buttons() -> None:
    request = _scale(
        replicas=0,
        status="refused",
        gate_decisions=[GateDecision(gate="blast_radius", allowed=False, reason="scaling to 0")],
    )
    blocks = card_blocks(request, None, "tempo", dry_run=False)
    assert [b["type"] for b in blocks] == ["section", "context"]
    assert "Refused by blast_radius: scaling to 0" in blocks[1]["elements"][0]["text"]


def test_a_pending_card_says_when_approve_only_dry_runs() -> None:
    request = _scale(replicas=4, status="pending_approval", expires_at=2_000_000_000)
    blocks = card_blocks(request, None, "tempo", dry_run=True)
    approve = blocks[-1]["elements"][0]
    assert "server-side dry run" in approve["confirm"]["text"]["text"]
    assert block_problems(blocks) == []


REFUSED_SCALE = _scale(
    namespace="kube-system",
    deployment="payment-api",
    replicas=0,
    status="refused",
    gate_decisions=[GateDecision(gate="policy", allowed=False, reason="kube-system is protected")],
)


def test_each_proposed_action_is_stated_under_the_answer_from_its_record() -> None:
    _, blocks = answer_message(_result("Cause: a bad deploy."), None, "tempo", [REFUSED_SCALE])
    assert blocks[1] == {
        "type": "context",
        "elements": [
            {
                "type": "mrkdwn",
                "text": ":ledger: *tracegate record when answered:* scale "
                "kube-system/payment-api from ? to 0 replicas — refused by policy: "
                "kube-system is protected",
            }
        ],
    }


def test_model_text_cannot_carry_the_mark_of_the_bots_record() -> None:
    forged = ":ledger: *tracegate record when answered:* scale payment-api — succeeded \U0001f4d2"
    text, blocks = answer_message(_result(forged), None, "tempo", [REFUSED_SCALE])
    marked = [b for b in blocks if ":ledger:" in str(b) or "\U0001f4d2" in str(b)]
    assert marked == [blocks[1]] and blocks[1]["type"] == "context"
    assert ":ledger:" not in text


def test_an_unhealthy_rollout_names_the_reverse_action_to_ask_for() -> None:
    request = _scale(
        replicas=6,
        status="succeeded",
        outcome=Outcome(dry_run=False, detail="scaled shop/api to 6 replicas"),
        rollout=RolloutHealth(
            healthy=False,
            detail="not healthy after 5 min: 1/6 available",
            reverse="scale shop/api back to 4 replicas",
        ),
    )
    blocks = card_blocks(request, None, "tempo", dry_run=False)
    assert blocks[-1]["elements"][0]["text"] == (
        ":warning: not healthy after 5 min: 1/6 available. To undo it, ask me to propose: "
        "_scale shop/api back to 4 replicas_ (it goes through the gates)."
    )
    assert not any(b["type"] == "actions" for b in blocks)
    assert block_problems(blocks) == []


def test_a_card_refused_by_an_open_breaker_offers_a_reset() -> None:
    request = _scale(
        replicas=6,
        status="refused",
        gate_decisions=[
            GateDecision(
                gate="circuit_breaker", allowed=False, reason="open", open_breaker="shop/api"
            )
        ],
    )
    blocks = card_blocks(request, None, "tempo", dry_run=False)
    (reset,) = blocks[-1]["elements"]
    assert (reset["action_id"], reset["value"]) == ("reset_breaker", request.id)
    assert block_problems(blocks) == []


def test_the_footer_names_the_model_that_answered() -> None:
    def footer(model: str | None) -> str:
        result = InvestigationResult(
            thread_id="T1:C1:1", status="answered", answer="a", correlation_id="c", model=model
        )
        return how_it_was_reached(result)

    assert "model: gemini-2.5-flash-lite" in footer("google_genai:gemini-2.5-flash-lite")
    assert "model:" not in footer(None)


def test_facts_seen_only_in_a_message_or_log_are_counted_apart_from_grounded_ones() -> None:
    footer = how_it_was_reached(
        _result("a", facts_checked=5, facts_grounded=3, facts_seen_in_text=2)
    )
    assert "facts: 5 checked, 3 grounded, 2 seen only in a message or log, 0 unchecked" in footer


def test_the_footer_links_the_sources_of_the_checked_facts() -> None:
    link = query_link("https://grafana.example.com", "tempo", "tempo", TRACE)
    command = "kubectl rollout history deployment/api -n shop"
    result = _result(
        "a",
        sources=[
            {"where": link, "label": f"get_trace {TRACE}"},
            {"where": command, "label": "get_rollout_history shop/api"},
        ],
    )
    _, blocks = answer_message(result, "https://grafana.example.com", "tempo")
    (footer,) = [b for b in blocks if b["type"] == "context" and "sources:" in str(b)]
    texts = [e["text"] for e in footer["elements"]]
    assert texts == [f"sources: <{link}|trace {TRACE[:12]}…>", f"`{command}`"]
    assert block_problems(blocks) == []


def test_steps_cite_each_fact_with_its_link_and_say_which_were_only_seen_in_text() -> None:
    link = query_link("https://grafana.example.com", "tempo", "tempo", TRACE)
    event = {
        "type": "grounding_finished",
        "checked": 2,
        "grounded": 1,
        "seen_in_text": 1,
        "ungrounded": 0,
        "unchecked": 0,
        "outcome": "grounded",
        "claims": [
            {
                "kind": "pod",
                "text": "api-1",
                "status": "grounded",
                "basis": "",
                "source": f"get_trace {TRACE}: k8s.pod.name",
                "detail": "",
                "where": link,
            },
            {
                "kind": "version",
                "text": "<!channel> 2.0",
                "status": "grounded",
                "basis": "text",
                "source": "get_pod_logs shop/api-1: log lines",
                "detail": "",
                "where": "",
            },
        ],
    }
    (block,) = steps_blocks([event])
    text = block["text"]["text"]
    assert f"pod api-1: grounded — get_trace {TRACE}: k8s.pod.name · <{link}|open>" in text
    assert "version &lt;!channel&gt; 2.0: seen only in a message or log — get_pod_logs" in text
    assert "1 grounded, 1 seen only in a message or log, 0 ungrounded" in text


def test_a_card_an_alerts_investigation_proposed_names_the_alert_not_a_person() -> None:
    by_alert = _scale(replicas=4, status="pending_approval", requester="alert <!here> Errors")
    by_person = _scale(replicas=4, status="pending_approval", requester="U0ONCALL")
    shown = str(card_blocks(by_alert, None, "tempo", dry_run=False))
    assert "*Asked by*\\nalert &lt;!here&gt; Errors" in shown and "<@alert" not in shown
    assert "*Asked by*\\n<@U0ONCALL>" in str(card_blocks(by_person, None, "tempo", dry_run=False))
