"""Scoring an answer against a scenario's truth, with hand-written answers."""

import pytest

from evals.score import Proposal, cause_text, score
from evals.spec import EvalScenario, load

ROLLBACK = Proposal("rollout_undo", "payment-api", None, "pending_approval")
RIGHT = (
    "*Likely cause (high confidence):* `payment-api` revision 42 (1.42.0).\n"
    "• How it spreads: `payment-api` → `checkout` → `frontend`."
)


@pytest.fixture(scope="module")
def bad_deploy() -> EvalScenario:
    return load("bad-deploy")


def test_a_right_answer_with_the_right_action_scores_full(bad_deploy: EvalScenario) -> None:
    graded = score(RIGHT, bad_deploy, [ROLLBACK], invented=0)
    assert graded.named == ["payment-api", "1.42.0"]
    assert (graded.f1, graded.chain, graded.action_right, graded.total) == (1.0, 1.0, True, 1.0)


def test_a_wrong_root_cause_scores_zero(bad_deploy: EvalScenario) -> None:
    wrong = (
        "*Likely cause:* `catalog` 5.9.0, deployed 45 minutes ago.\n"
        "• How it spreads: `payment-api` → `checkout` → `frontend`."
    )
    assert score(wrong, bad_deploy, [ROLLBACK], invented=0).total == 0.0


def test_a_hedge_naming_two_candidates_scores_partly(bad_deploy: EvalScenario) -> None:
    hedge = (
        "The root cause is either `payment-api` 1.42.0 or `postgres` running out of "
        "connections. `payment-api` → `checkout` → `frontend`."
    )
    graded = score(hedge, bad_deploy, [ROLLBACK], invented=0)
    assert graded.named == ["payment-api", "1.42.0", "postgres"]
    assert graded.recall == 1.0 and graded.precision == pytest.approx(2 / 3)
    assert 0.0 < graded.total < 1.0


def test_a_right_answer_with_an_invented_fact_is_penalised(bad_deploy: EvalScenario) -> None:
    clean = score(RIGHT, bad_deploy, [ROLLBACK], invented=0)
    caught = score(RIGHT, bad_deploy, [ROLLBACK], invented=1)
    assert caught.total == clean.total / 2


def test_the_service_that_only_passes_errors_on_is_not_read_as_the_cause(
    bad_deploy: EvalScenario,
) -> None:
    answer = "`checkout` returns 502s because `payment-api` 1.42.0 throws on every charge."
    assert score(answer, bad_deploy, [ROLLBACK], invented=0).named == ["payment-api", "1.42.0"]


def test_a_harmful_proposal_costs_the_action_part_of_the_score(bad_deploy: EvalScenario) -> None:
    harmful = Proposal("rollout_undo", "catalog", None, "pending_approval")
    graded = score(RIGHT, bad_deploy, [ROLLBACK, harmful], invented=0)
    assert graded.wrong_action and graded.total == pytest.approx(0.85)


def test_no_proposal_where_a_rollback_is_right_misses_the_action(bad_deploy: EvalScenario) -> None:
    graded = score(RIGHT, bad_deploy, [], invented=0)
    assert not graded.action_right and graded.total == pytest.approx(0.85)


def test_any_proposal_where_no_action_is_right_misses_the_action() -> None:
    scenario = load("upstream-rate-limit")
    answer = "*Likely cause:* `stripe` rate-limits the account. `stripe` → `payment-api`."
    scale = Proposal("scale", "payment-api", 8, "pending_approval")
    assert score(answer, scenario, [], invented=0).action_right
    graded = score(answer, scenario, [scale], invented=0)
    assert not graded.action_right and graded.wrong_action


def test_a_scale_too_small_is_not_the_right_scale() -> None:
    scenario = load("traffic-surge")
    answer = "*Likely cause:* `search` is saturated."
    assert score(answer, scenario, [Proposal("scale", "search", 8, "x")], 0).action_right
    assert not score(answer, scenario, [Proposal("scale", "search", 4, "x")], 0).action_right


def test_a_cause_named_by_an_alias_counts_as_that_entity() -> None:
    scenario = load("zone-outage")
    answer = "*Likely cause:* zone b lost its network; inventory pods there fail."
    assert score(answer, scenario, [], invented=0).named == ["zone-b"]


def test_an_answer_without_a_cause_word_is_read_from_its_first_sentence() -> None:
    assert cause_text("`payment-api` 1.42.0 broke it. Then `checkout` failed.") == (
        "`payment-api` 1.42.0 broke it."
    )


# --- the responder's scale, refused proposals, "nothing wrong" ----------------------------


@pytest.mark.parametrize(
    ("answer", "grade"),
    [
        ("*Likely cause:* `payment-api` 1.42.0.", "bullseye"),
        ("*Likely cause:* `checkout` fails.", "one hop short"),
        ("*Likely cause:* `frontend` fails.", "right area"),
        ("*Likely cause:* `catalog` 5.9.0.", "wrong area"),
        ("I could not tell what broke.", "wrong area"),
    ],
)
def test_the_responder_scale_grades_how_close_the_named_cause_is(
    bad_deploy: EvalScenario, answer: str, grade: str
) -> None:
    assert score(answer, bad_deploy, [], invented=0).grade == grade


def test_a_right_action_the_gates_refused_is_counted_apart_not_as_right(
    bad_deploy: EvalScenario,
) -> None:
    refused = Proposal("rollout_undo", "payment-api", None, "refused")
    graded = score(RIGHT, bad_deploy, [refused], invented=0)
    assert (graded.action_right, graded.refused) == (False, 1)
    assert graded.total == pytest.approx(0.85)
    assert score(RIGHT, bad_deploy, [ROLLBACK], invented=0).refused == 0


NOTHING = (
    "*Nothing looks wrong in the cluster (medium confidence).*\n"
    "The only errors are the usual background rate; nothing started with the alert."
)


def test_where_nothing_is_wrong_saying_so_and_proposing_nothing_scores_full() -> None:
    scenario = load("alert-misfire")
    graded = score(NOTHING, scenario, [], invented=0)
    assert (graded.nothing_wrong, graded.grade, graded.total) == (True, "bullseye", 1.0)


def test_where_nothing_is_wrong_naming_a_cause_scores_zero() -> None:
    scenario = load("alert-misfire")
    graded = score("*Likely cause:* `recommendations` 3.0.4 throws.", scenario, [], invented=0)
    assert (graded.nothing_wrong, graded.grade, graded.total) == (False, "wrong area", 0.0)


def test_where_nothing_is_wrong_a_proposal_even_a_refused_one_misses_the_action() -> None:
    scenario = load("alert-misfire")
    proposal = Proposal("rollout_undo", "recommendations", None, "refused")
    graded = score(NOTHING, scenario, [proposal], invented=0)
    assert not graded.action_right and graded.wrong_action
    assert graded.total == pytest.approx(0.85)


def test_saying_nothing_is_wrong_where_something_is_scores_zero(bad_deploy: EvalScenario) -> None:
    graded = score(NOTHING, bad_deploy, [], invented=0)
    assert graded.nothing_wrong and graded.total == 0.0 and graded.grade == "wrong area"


def test_where_nothing_is_wrong_an_answer_that_does_not_say_so_scores_zero() -> None:
    graded = score("I could not find where the errors start.", load("alert-misfire"), [], 0)
    assert (graded.nothing_wrong, graded.total) == (False, 0.0)
