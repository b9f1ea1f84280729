"""The grounding check against the evidence the real tools return from the simulators
(the demo's incidents at a fixed clock, bench/grounding.py), live look-ups included."""

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from bench.grounding import NOW, World, corpus_world
from graph.grounding.check import ClaimCheck
from graph.grounding.evidence import (
    QUESTION_TIME,
    Evidence,
    Fact,
    fact,
    iso,
    merge_evidence,
    text_facts,
    times_from,
)
from graph.grounding.guard import finalise, ground_draft

TOLERANCE_S = 300


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with corpus_world() as opened:
        yield opened


async def checked(world: World, draft: str) -> list[ClaimCheck]:
    _, checks = await ground_draft(draft, world.facts, world.sources, TOLERANCE_S)
    return checks


def status(checks: list[ClaimCheck], text: str) -> str:
    (check,) = [c for c in checks if c["text"] == text]
    return check["status"]


async def test_the_issue_draft_grounds_none_of_its_invented_facts(world: World) -> None:
    checks = await checked(
        world,
        "deployment payment-api rolled out v9.9.9-invented (revision 17) at 14:02; pod "
        "payment-api-5c6d7e8f9-qqqqq returns 503 to checkout.",
    )
    assert [(c["text"], c["status"]) for c in checks] == [
        ("payment-api", "grounded"),
        ("v9.9.9-invented", "ungrounded"),
        ("17", "ungrounded"),
        ("14:02", "ungrounded"),  # a rollout sentence: payment-api's rollouts were 11:10-13:10
        ("payment-api-5c6d7e8f9-qqqqq", "ungrounded"),
    ]


async def test_the_same_draft_with_real_values_is_grounded_with_sources(world: World) -> None:
    checks = await checked(
        world,
        "deployment payment-api rolled out v1.42.0 (revision 42) at 13:10; pod "
        "payment-api-a9dfd1c984-h4kzp returns 503 to checkout.",
    )
    assert {c["status"] for c in checks} == {"grounded"}
    sources = {c["text"]: c["source"] for c in checks}
    assert sources["42"].startswith("get_rollout_history shop/payment-api")
    assert sources["payment-api-a9dfd1c984-h4kzp"].endswith(": k8s.pod.name")


async def test_a_pod_one_character_off_is_ungrounded_and_the_real_pods_are_named(
    world: World,
) -> None:
    (check,) = await checked(world, "pod payment-api-a9dfd1c984-h4kzq is failing")
    assert check["status"] == "ungrounded"
    assert "payment-api-a9dfd1c984-h4kzp" in check["detail"]


async def test_a_version_of_another_service_is_ungrounded_for_this_one(world: World) -> None:
    checks = await checked(world, "checkout runs 2.7.0 now.")
    assert status(checks, "2.7.0") == "ungrounded"
    assert "checkout's current version is 3.4.0" in checks[-1]["detail"]


async def test_the_previous_revision_stated_as_current_is_ungrounded(world: World) -> None:
    checks = await checked(world, "payment-api's current revision 41 fails.")
    assert status(checks, "41") == "ungrounded"
    assert "current revision is 42" in checks[-1]["detail"]


async def test_a_revision_to_roll_back_to_must_be_an_earlier_one(world: World) -> None:
    checks = await checked(world, "Roll payment-api back to revision 41; not back to revision 42.")
    assert [c["status"] for c in checks if c["kind"] == "revision"] == ["grounded", "ungrounded"]


async def test_a_time_is_grounded_within_the_tolerance_and_in_any_written_zone(
    world: World,
) -> None:
    checks = await checked(world, "Errors since 14:03 UTC, i.e. 15:03 CET; errors at 09:30.")
    assert [c["status"] for c in checks] == ["grounded", "grounded", "ungrounded"]


async def test_a_rollout_time_must_be_a_rollout_s(world: World) -> None:
    # 14:05 is an error time, not a rollout time: payment-api's revision 42 went out at 13:10
    checks = await checked(world, "payment-api revision 42 rolled out at 14:05.")
    assert status(checks, "14:05") == "ungrounded"
    checks = await checked(world, f"payment-api revision 42 rolled out at {iso(NOW - 3600)}.")
    assert {c["status"] for c in checks} == {"grounded"}


async def test_a_rollout_time_with_no_deployment_named_must_be_some_rollout_s(
    world: World,
) -> None:
    # 13:40: no rollout's; 14:10 is a rollout's clock (days before the incident: with no
    # date written, the clock is what is claimed)
    checks = await checked(world, "The rollout went out at 13:40, and another at 14:10.")
    assert [c["status"] for c in checks] == ["ungrounded", "grounded"]
    checks = await checked(world, "The rollout went out at 13:10.")
    assert [c["status"] for c in checks] == ["grounded"]


async def test_a_deployment_not_in_the_evidence_is_looked_up_in_the_cluster(world: World) -> None:
    facts = [f for f in world.facts if f.get("subject") != "checkout" and f["value"] != "checkout"]
    _, checks = await ground_draft(
        "checkout's current revision 18 runs registry/checkout:3.4.0.",
        facts,
        world.sources,
        TOLERANCE_S,
    )
    assert {c["status"] for c in checks} == {"grounded"}
    assert all(c["source"].startswith("live lookup of Kubernetes") for c in checks[1:])


async def test_a_deployment_the_cluster_does_not_have_is_ungrounded(world: World) -> None:
    checks = await checked(world, "kubectl rollout undo deployment/payment-gateway -n shop")
    assert status(checks, "payment-gateway") == "ungrounded"


async def test_a_service_not_in_the_evidence_is_looked_up_in_tempo(world: World) -> None:
    facts = [f for f in world.facts if f["value"] != "postgres"]
    _, checks = await ground_draft("service postgres is fine", facts, world.sources, TOLERANCE_S)
    assert checks[0]["status"] == "grounded"
    assert checks[0]["source"] == "live lookup of Tempo's resource.service.name values"


async def test_a_source_that_cannot_be_reached_leaves_the_claim_unchecked(world: World) -> None:
    world.kube.faults.status = 503
    checks = await checked(world, "deployment inventory-api is healthy")
    assert checks[0]["status"] == "unchecked"
    assert "could not be read" in checks[0]["detail"]


async def test_remove_mode_cuts_the_sentence_and_says_so(world: World) -> None:
    draft = "payment-api 1.42.0 fails.\n- pod payment-api-a9dfd1c984-zzzzz restarts.\n- Roll back."
    claims, checks = await ground_draft(draft, world.facts, world.sources, TOLERANCE_S)
    text, removed, marked = finalise(draft, claims, checks, "remove")
    assert text.startswith("payment-api 1.42.0 fails.\n- Roll back.\n\n_1 sentence was removed")
    assert "zzzzz" not in text
    assert (removed, marked) == (1, 0)


async def test_mark_mode_keeps_the_sentence_and_marks_the_fact(world: World) -> None:
    draft = "payment-api 1.42.1 fails since 14:02."
    claims, checks = await ground_draft(draft, world.facts, world.sources, TOLERANCE_S)
    text, removed, marked = finalise(draft, claims, checks, "mark")
    assert text.startswith("payment-api 1.42.1 _(unverified)_ fails since 14:02.")
    assert "1 fact marked _unverified_" in text
    assert (removed, marked) == (0, 1)


async def test_an_unchecked_fact_is_marked_in_either_mode(world: World) -> None:
    world.kube.faults.status = 503
    draft = "deployment inventory-api is healthy."
    claims, checks = await ground_draft(draft, world.facts, world.sources, TOLERANCE_S)
    text, removed, marked = finalise(draft, claims, checks, "remove")
    assert text.startswith("deployment inventory-api _(unchecked)_ is healthy.")
    assert (removed, marked) == (0, 1)


@pytest.mark.parametrize(
    ("draft", "text", "expected"),
    [
        ("ReplicaSet payment-api-a9dfd1c984 serves 1.42.0", "payment-api-a9dfd1c984", "grounded"),
        ("ReplicaSet payment-api-a9dfd1c985 serves 1.42.0", "payment-api-a9dfd1c985", "ungrounded"),
        ("in namespace shop", "shop", "grounded"),
        ("in namespace payments", "payments", "ungrounded"),
        ("image registry/orders-api:2.6.0 ran first", "registry/orders-api:2.6.0", "grounded"),
        ("image registry/orders-api:2.6.1 ran first", "registry/orders-api:2.6.1", "ungrounded"),
        ("service checkout returns 502", "checkout", "grounded"),
        ("service cart-api returns 502", "cart-api", "ungrounded"),
        ("node gke-prod-pool-1-ab12 is under pressure", "gke-prod-pool-1-ab12", "ungrounded"),
    ],
)
async def test_each_kind_is_grounded_only_by_evidence_of_its_kind(
    world: World, draft: str, text: str, expected: str
) -> None:
    assert status(await checked(world, draft), text) == expected


async def test_a_node_the_thread_named_is_grounded(world: World) -> None:
    facts = [*world.facts, *text_facts("node gke-prod-pool-1-ab12 is NotReady", "the thread")]
    _, checks = await ground_draft("node gke-prod-pool-1-ab12 went NotReady", facts, None, 300)
    assert [(c["status"], c["source"]) for c in checks] == [("grounded", "the thread")]


async def test_a_clock_time_takes_the_date_its_sentence_states(world: World) -> None:
    # orders-api's revision 7 went out two days before the incident, at 14:10
    for stated, expected in [
        ("on 2026-11-28 at 14:10 UTC", "grounded"),
        ("on Nov 28, 14:10", "grounded"),
        ("on 2026-11-29 at 14:10 UTC", "ungrounded"),
        ("at 14:10", "grounded"),  # a clock time alone claims its clock, not a day
        ("yesterday at 14:10", "ungrounded"),  # the day before the incident's: not that day
    ]:
        checks = await checked(world, f"orders-api revision 7 rolled out {stated}.")
        assert [c["status"] for c in checks if c["kind"] == "time"] == [expected], stated


async def test_a_replicaset_s_name_stated_as_a_pod_is_not_grounded_by_it(world: World) -> None:
    checks = await checked(world, "pod payment-api-a9dfd1c984 restarted twice")
    assert [(c["kind"], c["status"]) for c in checks] == [("pod", "ungrounded")]


async def test_a_time_on_a_day_that_does_not_exist_is_unchecked(world: World) -> None:
    checks = await checked(world, "Errors started 2026-11-31 14:02 UTC.")
    assert [c["status"] for c in checks] == ["unchecked"]


async def test_a_version_the_asker_guessed_is_no_evidence_against_the_service_s_own(
    world: World,
) -> None:
    facts = [*world.facts, *text_facts("Is 1.43.0 the bad build?", "the question")]
    _, checks = await ground_draft("payment-api 1.43.0 broke it.", facts, None, TOLERANCE_S)
    # payment-api's rollout history is in the evidence: what it lacks, payment-api never ran
    assert [c["status"] for c in checks] == ["ungrounded"]
    assert "1.42.0" in checks[0]["detail"]  # what payment-api does run


def test_marks_go_after_code_and_cuts_leave_markdown_whole() -> None:
    from graph.grounding.claims import find_claims

    draft = (
        "**Revision 43 is current. Roll back to 41.**\n"
        "| svc | ver |\n|---|---|\n| payment-api | 1.43.0 |\n| checkout | 3.4.0 |\n"
        "1. payment-api runs 1.43.0\n2. Run `kubectl rollout undo --to-revision 43` now."
    )
    claims = find_claims(draft)
    checks: list[ClaimCheck] = [
        {
            "kind": c.kind,
            "text": c.text,
            "status": "grounded" if c.value in ("41", "3.4.0") else "ungrounded",
            "source": "",
            "detail": "",
        }
        for c in claims
    ]
    removed, _, _ = finalise(draft, claims, checks, "remove")
    marked, _, _ = finalise(draft, claims, checks, "mark")

    assert removed.split("\n\n")[0] == (
        "Roll back to 41.\n| svc | ver |\n|---|---|\n| checkout | 3.4.0 |"
    )
    assert "`kubectl rollout undo --to-revision 43` _(unverified)_ now" in marked


@pytest.mark.parametrize(
    ("draft", "expected"),
    [
        # a role said after the value, or by "is on" / "runs"
        ("payment-api is on revision 41.", "ungrounded"),
        ("payment-api runs revision 42 right now.", "grounded"),
        ("Revision 41 is the current one.", "ungrounded"),
        # a version or image written with its revision is that revision's
        ("Roll back to revision 41 (1.41.3).", "grounded"),
        ("Roll back to revision 40 (1.41.3).", "ungrounded"),
        ("The target is revision 41, image registry/payment-api:1.40.2.", "ungrounded"),
        # a named service's values are its own, not another's
        ("postgres was upgraded to 1.42.0.", "ungrounded"),
        ("checkout runs registry/payment-api:1.42.0.", "ungrounded"),
        # rollout verbs make a rollout time; a role is read in its own clause
        ("payment-api 1.42.0 went out at 14:05 UTC.", "ungrounded"),
        ("payment-api revision 42 is the current one; revision 41 is the last good.", "grounded"),
        ("Everything is in the `shop` namespace: checkout, payment-api and postgres.", "grounded"),
        ("Errors started at 2:03 PM UTC.", "grounded"),
        ("Errors started at 14:03 UTC+1.", "ungrounded"),  # 13:03 UTC
        ("payment-api 1.42.0 went out at 14:00 UTC, right before the errors.", "ungrounded"),
        ("The errors began after revision 42, at 14:01 UTC.", "grounded"),
        ("checkout's current revision is 19.", "ungrounded"),
        # a short pod suffix names the one pod that ends with it
        ("Pods h4kzp and w9t2r fail.", "grounded"),
        # a look-alike letter is no real name
        ("pod payment-api-a9dfd1c984-h4kz\u0440 fails.", "ungrounded"),
    ],
)
async def test_what_an_adversarial_review_found_is_judged_by_what_the_evidence_says(
    world: World, draft: str, expected: str
) -> None:
    checks = await checked(world, draft)
    statuses = {c["status"] for c in checks if c["status"] != "grounded"} or {"grounded"}
    assert checks and statuses == {expected}, checks


async def test_a_mark_in_a_sentence_that_is_cut_moves_nothing_after_it(world: World) -> None:
    world.kube.faults.status = 503  # the Deployment below cannot be looked up: unchecked
    draft = (
        "Errors began at 09:00 UTC on deployment `billing-api`. Checkout is fine. "
        "Errors also began at 09:30 UTC. The end is near."
    )
    claims, checks = await ground_draft(draft, world.facts, world.sources, TOLERANCE_S)
    text, removed, _ = finalise(draft, claims, checks, "remove")
    assert text.split("\n\n")[0] == "Checkout is fine. The end is near."
    assert removed == 2


async def test_a_list_item_whose_every_sentence_is_cut_goes_whole(world: World) -> None:
    draft = (
        "- Checkout is fine.\n"
        "- payment-api 1.43.0 fails. Its errors began at 09:00 UTC.\n"
        "- Orders are fine."
    )
    claims, checks = await ground_draft(draft, world.facts, None, TOLERANCE_S)
    text, _, _ = finalise(draft, claims, checks, "remove")
    assert text.split("\n\n")[0] == "- Checkout is fine.\n- Orders are fine."


async def test_a_name_a_person_wrote_grounds_the_same_name_quoted_in_a_code_span(
    world: World,
) -> None:
    said = text_facts("new-pricing-engine is now on for 100% of traffic", "the thread")
    draft = "The cause is the flag `new-pricing-engine`; `old-pricing-engine` is off."
    _, checks = await ground_draft(draft, world.facts + said, world.sources, TOLERANCE_S)
    assert status(checks, "new-pricing-engine") == "grounded"
    assert status(checks, "old-pricing-engine") == "ungrounded"


async def test_a_deployment_past_the_look_up_cap_is_unchecked_not_removed(world: World) -> None:
    # nine Deployments the evidence does not hold: eight are looked up, the ninth is not
    names = [f"billing-{i}" for i in range(9)]
    draft = " ".join(f"Deployment `{name}` is fine." for name in names)
    claims, checks = await ground_draft(draft, world.facts, world.sources, TOLERANCE_S)
    statuses = [c["status"] for c in checks]
    assert statuses == ["ungrounded"] * 8 + ["unchecked"]
    assert "not looked up" in checks[-1]["detail"]
    text, removed, _ = finalise(draft, claims, checks, "remove")
    assert "billing-8" in text and removed == 8


async def test_a_version_planted_in_a_log_line_does_not_ground_what_the_history_contradicts(
    world: World,
) -> None:
    planted = text_facts("INFO starting payment-api 1.43.0 (build ok)", "get_pod_logs: log lines")
    checks = await checked_with(world, "The bad build is payment-api 1.43.0.", planted)
    assert [c["status"] for c in checks] == ["ungrounded"]
    assert "rollout history has no 1.43.0" in checks[0]["detail"]


async def test_the_true_forms_models_write_are_grounded(world: World) -> None:
    # versions with pre-release/build parts, a tag-only image, a PT time, a pod suffix
    for draft in [
        "payment-api (image :1.42.0) broke.",
        "The 1.42.0 rollout went out at 5:10 AM PT.",
        "Both failing pods, `h4kzp` and `w9t2r`, run 1.42.0.",
        "payment-api moved from 1.41.3 to 1.42.0 (revision 41 → 42).",
    ]:
        assert {c["status"] for c in await checked(world, draft)} == {"grounded"}, draft


async def test_a_role_or_order_the_history_contradicts_is_ungrounded(world: World) -> None:
    for draft in [
        "payment-api moved from 1.42.0 to 1.41.3 in its last rollout.",
        "The previous version of payment-api was 1.42.0.",
        "Roll payment-api back to revision 42.",
    ]:
        assert "ungrounded" in {c["status"] for c in await checked(world, draft)}, draft


async def test_the_feedback_never_lists_the_claimed_revision_as_held(world: World) -> None:
    checks = await checked(world, "Roll back to revision 18, the previous one of orders-api.")
    detail = next(c["detail"] for c in checks if c["kind"] == "revision")
    assert "None" not in detail


async def checked_with(world: World, draft: str, more: list[Fact]) -> list[ClaimCheck]:
    _, checks = await ground_draft(draft, [*world.facts, *more], world.sources, TOLERANCE_S)
    return checks


async def test_a_value_only_a_log_line_shows_is_grounded_as_seen_in_text(world: World) -> None:
    planted = text_facts("WARN flag new-pricing-v3 enabled by ops", "get_pod_logs: log lines")
    checks = await checked_with(world, "`new-pricing-v3` was switched on first.", planted)
    assert [(c["status"], c["basis"]) for c in checks] == [("grounded", "text")]


async def test_a_value_a_record_and_a_log_line_both_show_is_cited_from_the_record(
    world: World,
) -> None:
    pod = "payment-api-a9dfd1c984-h4kzp"
    planted = text_facts(f"ERROR {pod} charge failed", "get_pod_logs: log lines")
    _, checks = await ground_draft(
        f"Pod {pod} fails.", [*planted, *world.facts], world.sources, TOLERANCE_S
    )
    assert [(c["status"], c["basis"]) for c in checks] == [("grounded", "")]
    assert checks[0]["source"].endswith(": k8s.pod.name")


async def test_a_revision_a_person_named_is_seen_in_text_when_no_history_was_read() -> None:
    said = text_facts("we shipped revision 17 of billing an hour ago", "the question")
    _, checks = await ground_draft("Revision 17 is the suspect.", said, None, TOLERANCE_S)
    assert [(c["status"], c["basis"]) for c in checks] == [("grounded", "text")]


async def test_each_fact_the_rollout_history_grounds_cites_the_command_that_shows_it(
    world: World,
) -> None:
    checks = await checked(world, "payment-api revision 42 runs 1.42.0.")
    where = {c["text"]: c["where"] for c in checks}
    assert (
        where["42"] == where["1.42.0"] == "kubectl rollout history deployment/payment-api -n shop"
    )


def test_the_state_keeps_a_record_that_arrives_after_the_same_value_in_text() -> None:
    said = text_facts("is pod payment-api-a9dfd1c984-h4kzp ok?", "the question")
    read = [fact("pod", "payment-api-a9dfd1c984-h4kzp", "get_trace 4bf9: k8s.pod.name")]
    found = Evidence(merge_evidence(said, read)).find(["pod"], "payment-api-a9dfd1c984-h4kzp")
    assert found is not None and found["source"] == "get_trace 4bf9: k8s.pod.name"


async def test_a_rollout_time_written_with_its_revision_must_be_that_revision_s(
    world: World,
) -> None:
    # payment-api's revisions 41 and 42 went out at 12:10 and 13:10
    checks = await checked(world, "payment-api revision 41 rolled out at 13:10.")
    assert status(checks, "13:10") == "ungrounded"
    checks = await checked(world, "payment-api revision 41 rolled out at 12:10.")
    assert status(checks, "12:10") == "grounded"


async def test_revisions_in_pasted_json_yaml_and_kubectl_output_are_checked(world: World) -> None:
    for pasted in [
        '```json\n{"deployment": "payment-api", "revision": 47}\n```',
        '```yaml\nname: payment-api\nrevision: "47"\n```',
        "```\n$ kubectl rollout history deployment/payment-api\nREVISION  CHANGE-CAUSE\n"
        "41        deploy 1.41.3\n47        deploy 1.42.0\n```",
    ]:
        assert status(await checked(world, pasted), "47") == "ungrounded", pasted


async def test_a_table_row_or_key_line_takes_the_subject_its_row_or_block_names(
    world: World,
) -> None:
    # revision 7 is orders-api's, not payment-api's: the row's image, the block's
    # "Deployment:" line say whose the revision is
    for draft in [
        "| Revision | Image |\n|---|---|\n| 7 | registry/payment-api:1.42.0 |",
        "payment-api's rollouts:\n\n| Revision | Deployed |\n|---|---|\n| 7 | 13:10 |",
        "**Deployment:** payment-api\n**Revision:** 7\n**Status:** failing",
    ]:
        assert status(await checked(world, draft), "7") == "ungrounded", draft


async def test_a_line_with_no_subject_takes_none_from_prose_above_it(world: World) -> None:
    # checkout above is what is affected, not whose revision 42 is (payment-api's)
    draft = "*Impact*\n- checkout returns 502s\n- Root cause: revision 42 throws NPEs"
    assert status(await checked(world, draft), "42") == "grounded"


async def test_a_weekday_or_a_slashed_date_next_to_a_time_dates_it(world: World) -> None:
    # orders-api's revision 7 went out on Saturday 2026-11-28 at 14:10 (the incident: Monday)
    for stated, expected in [
        ("on Saturday at 14:10 UTC", "grounded"),
        ("Sat 14:10 UTC", "grounded"),
        ("on Sunday at 14:10 UTC", "ungrounded"),
        ("on 11/28 at 14:10 UTC", "grounded"),
        ("on 11/29 at 14:10 UTC", "ungrounded"),
        ("on 11/12 at 14:10 UTC", "grounded"),  # Nov 12 or 11 Dec: no date, the clock holds
    ]:
        checks = await checked(world, f"orders-api revision 7 rolled out {stated}.")
        assert [c["status"] for c in checks if c["kind"] == "time"] == [expected], stated


async def test_a_weekday_or_slashed_number_on_a_line_above_dates_nothing(world: World) -> None:
    draft = "Monday looked like 5/30 pods failing.\n- 14:10 UTC: orders-api revision 7 rolled out"
    checks = await checked(world, draft)
    assert [c["status"] for c in checks if c["kind"] == "time"] == ["grounded"]


async def test_when_the_question_was_asked_grounds_no_symptom_time(world: World) -> None:
    asked = NOW + 3 * 3600  # hours after every event of the incident
    facts = times_from([asked], QUESTION_TIME)
    at = datetime.fromtimestamp(asked, UTC).strftime("%H:%M")
    checks = await checked_with(world, f"Errors started at {at} UTC.", facts)
    assert [c["status"] for c in checks] == ["ungrounded"]
