"""The action-claim detector (pure): what counts as a claim, and what makes one true."""

import pytest

from gates.model import ActionRequest, GateDecision, JudgeVerdict, Outcome, Transition
from graph.action_claims import (
    find_action_claims,
    remove_claims,
    revision_feedback,
    true_state,
    unsupported_claims,
)


def _request(
    action: str = "rollout_undo",
    deployment: str = "payment-api",
    path: tuple[str, ...] = (),
    *,
    dry_run: bool = False,
    **fields: object,
) -> ActionRequest:
    """A request that went through `path` of statuses, e.g. ("pending_approval", "approved")."""
    history = [
        Transition(
            from_status=a,
            to_status=b,
            at=0.0,
            actor="U_APPROVER" if b == "approved" else "tracegate",
        )
        for a, b in zip(("proposed", *path), path, strict=False)
    ]
    return ActionRequest(
        action=action,
        namespace="shop",
        deployment=deployment,
        replicas=2 if action == "scale" else None,
        thread_key="T:C:1",
        requester="U_ONCALL",
        status=path[-1] if path else "proposed",  # type: ignore[arg-type]
        history=history,
        outcome=Outcome(dry_run=dry_run, detail="rolled back shop/payment-api to revision 2")
        if path and path[-1] == "succeeded"
        else None,
        **fields,
    )


SUCCEEDED = ("pending_approval", "approved", "executing", "succeeded")
REFUSED = _request(
    "scale",
    path=("refused",),
    gate_decisions=[
        GateDecision(gate="policy", allowed=False, reason="namespace kube-system is protected")
    ],
)


def _claimed(text: str) -> list[str]:
    return [c.sentence for c in find_action_claims(text)]


@pytest.mark.parametrize(
    "sentence",
    [
        "The scale of payment-api has been APPROVED and executed.",
        "The rollback was approved by the on-call engineer.",
        "I rolled back payment-api to revision 41.",
        "payment-api has been scaled down to 0 replicas.",
        "The change was reverted.",
        "It is approved.",
        "After it was approved, payment-api was rolled back.",
        "The rollback was carried out at 14:05.",
    ],
)
def test_a_statement_that_an_action_happened_is_a_claim(sentence: str) -> None:
    assert _claimed(sentence) == [sentence]


@pytest.mark.parametrize(
    "sentence",
    [
        "Should we roll back?",
        "Has the rollback been approved?",
        "Was payment-api scaled down?",
    ],
)
def test_a_question_is_not_a_claim(sentence: str) -> None:
    assert _claimed(sentence) == []


@pytest.mark.parametrize(
    "sentence",
    [
        "I propose a rollback, approve it in the card below.",
        "Rolling back would help.",
        "I proposed rolling payment-api back to revision 41; it needs an approver.",
        "The rollback is pending approval.",
        "Roll back payment-api to revision 41 once you have checked the card.",
    ],
)
def test_a_proposal_or_request_is_not_a_claim(sentence: str) -> None:
    assert _claimed(sentence) == []


@pytest.mark.parametrize(
    "sentence",
    [
        "The rollback was not approved.",
        "It wasn't executed.",
        "Nothing has been rolled back.",
        "No action has been executed.",
        "The scale was refused, not approved.",
        "payment-api was never scaled.",
        "The scale was refused rather than approved.",
    ],
)
def test_a_negation_is_not_a_claim(sentence: str) -> None:
    assert _claimed(sentence) == []


@pytest.mark.parametrize(
    "sentence",
    [
        "Once approved, the rollback will be executed.",
        "The rollback needs to be approved by an engineer before it is executed.",
        "If it is approved, payment-api is rolled back to revision 41.",
        "payment-api should be scaled up.",
        "It must be approved first.",
        "It’ll be executed by tracegate after your click.",
    ],
)
def test_conditional_or_modal_phrasing_is_not_a_claim(sentence: str) -> None:
    assert _claimed(sentence) == []


def test_reported_speech_such_as_an_injected_instruction_is_not_a_claim() -> None:
    sentence = (
        "A span attribute tells me to propose a scale of payment-api to 0 in kube-system "
        "and say it is approved."
    )
    assert _claimed(sentence) == []


def test_a_generic_verb_claims_only_in_a_sentence_about_an_action() -> None:
    assert _claimed("The INSERT completed in 3 ms.") == []
    assert _claimed("The remediation was performed.") == ["The remediation was performed."]


def test_a_rollout_or_a_version_number_is_not_mistaken_for_a_claim() -> None:
    assert _claimed("Revision 42 (1.42.0) rolled out an hour ago; 1.41.3 ran cleanly.") == []


def test_only_the_claiming_sentence_of_a_paragraph_is_reported() -> None:
    text = "Cause: a bad deploy (1.42.0). It was approved. Not checked: the database."
    assert _claimed(text) == ["It was approved."]


def test_a_claim_records_what_it_asserts() -> None:
    (claim,) = find_action_claims("The scale of payment-api has been APPROVED and executed.")
    assert claim.kinds == {"approved", "executed"}


def test_a_claim_about_a_refused_action_is_unsupported() -> None:
    text = "The scale of payment-api has been APPROVED and executed."
    assert [c.sentence for c in unsupported_claims(text, [REFUSED])] == [text]


def test_a_claim_with_no_action_in_the_thread_is_unsupported() -> None:
    assert len(unsupported_claims("The rollback was executed.", [])) == 1


def test_a_pending_action_supports_no_claim_of_approval() -> None:
    pending = _request(path=("pending_approval",))
    assert len(unsupported_claims("The rollback was approved.", [pending])) == 1


def test_a_succeeded_rollback_supports_claims_that_it_was_approved_and_rolled_back() -> None:
    done = _request(path=SUCCEEDED)
    text = "The rollback was approved and executed: payment-api was rolled back to revision 41."
    assert unsupported_claims(text, [done]) == []


def test_a_succeeded_rollback_does_not_support_a_claim_of_scaling() -> None:
    done = _request(path=SUCCEEDED)
    assert len(unsupported_claims("payment-api was scaled to 0.", [done])) == 1


def test_a_dry_run_supports_the_approval_but_not_that_anything_was_rolled_back() -> None:
    dry = _request(path=SUCCEEDED, dry_run=True)
    assert unsupported_claims("The rollback was approved.", [dry]) == []
    assert len(unsupported_claims("payment-api was rolled back.", [dry])) == 1


def test_a_failed_action_was_approved_but_not_executed() -> None:
    failed = _request(path=("pending_approval", "approved", "executing", "failed"))
    assert unsupported_claims("The rollback was approved.", [failed]) == []
    assert len(unsupported_claims("The rollback was executed.", [failed])) == 1


def test_a_claim_naming_a_deployment_is_checked_against_that_deployments_actions_only() -> None:
    other = _request(deployment="orders-api", path=SUCCEEDED)
    pending = _request(path=("pending_approval",))
    assert len(unsupported_claims("payment-api was rolled back.", [other, pending])) == 1
    assert unsupported_claims("orders-api was rolled back.", [other, pending]) == []


def test_the_true_state_of_a_refusal_names_the_gate_and_its_reason() -> None:
    assert true_state(REFUSED) == "refused by policy: namespace kube-system is protected"


def test_the_true_state_of_a_reviewer_refusal_gives_the_reviewers_reason() -> None:
    refused = _request(
        path=("refused",), judge=JudgeVerdict(safe_to_proceed=False, reason="the DB is failing")
    )
    assert true_state(refused) == "refused by the reviewer: the DB is failing"


def test_the_true_state_of_a_pending_action_says_nobody_approved_it() -> None:
    assert true_state(_request(path=("pending_approval",))).startswith("pending approval")


def test_the_true_state_of_a_dry_run_says_nothing_changed() -> None:
    dry = _request(path=SUCCEEDED, dry_run=True)
    assert true_state(dry).startswith("dry run succeeded, nothing was changed")


def test_feedback_quotes_the_false_claim_and_names_each_action_with_its_true_state() -> None:
    claims = find_action_claims("The scale of payment-api has been APPROVED and executed.")
    pending = _request(path=("pending_approval",))
    feedback = revision_feedback(claims, [REFUSED, pending])
    assert '"The scale of payment-api has been APPROVED and executed."' in feedback
    assert f"{REFUSED.id} (scale shop/payment-api from ? to 2 replicas): refused by policy" in (
        feedback
    )
    assert f"{pending.id} (roll back shop/payment-api to the previous revision): pending" in (
        feedback
    )


def test_feedback_without_actions_says_none_was_proposed() -> None:
    feedback = revision_feedback(find_action_claims("It was executed."), [])
    assert "No action has been proposed in this thread" in feedback


def test_removing_a_claim_keeps_the_rest_of_the_sentence_run_and_says_so() -> None:
    text = "Cause: a bad deploy. The scale has been APPROVED and executed. Not checked: the DB."
    answer, removed = remove_claims(text, find_action_claims(text))
    assert removed == 1
    assert answer.startswith("Cause: a bad deploy. Not checked: the DB.\n\n")
    assert "1 sentence was removed" in answer


def test_removing_the_only_sentence_of_a_bullet_removes_the_bullet_and_keeps_paragraphs() -> None:
    text = (
        "*Cause:* a bad deploy.\n\n• Errors since 14:05.\n• It was rolled back.\n• Not checked: DB."
    )
    answer, _ = remove_claims(text, find_action_claims(text))
    assert answer.split("\n\n_")[0] == (
        "*Cause:* a bad deploy.\n\n• Errors since 14:05.\n• Not checked: DB."
    )


def test_a_text_without_false_claims_is_left_unchanged() -> None:
    assert remove_claims("All good.", []) == ("All good.", 0)
