"""Claim extraction: which fact-identifiers a draft states, by kind (pure, no I/O)."""

import pytest

from graph.grounding.claims import find_claims


def claims(text: str) -> list[tuple[str, str]]:
    return [(c.kind, c.value) for c in find_claims(text)]


def test_the_issue_draft_yields_each_invented_fact_by_kind() -> None:
    draft = (
        "deployment payment-api rolled out v9.9.9-invented (revision 17) at 14:02; pod "
        "payment-api-5c6d7e8f9-qqqqq returns 503 to checkout. Evidence: trace 4bf92f3577b34da6."
    )
    assert claims(draft) == [
        ("deployment", "payment-api"),
        ("version", "9.9.9-invented"),
        ("revision", "17"),
        ("time", "14:02"),
        ("pod", "payment-api-5c6d7e8f9-qqqqq"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pod payment-api-a9dfd1c984-h4kzp crashed", ("pod", "payment-api-a9dfd1c984-h4kzp")),
        ("on pod postgres-0 only", ("pod", "postgres-0")),
        ("`k8s.pod.name=orders-api-5de2206a53-c3j7d`", ("pod", "orders-api-5de2206a53-c3j7d")),
        ("ReplicaSet payment-api-a9dfd1c984 is new", ("replicaset", "payment-api-a9dfd1c984")),
        ("the orders-api deployment", ("deployment", "orders-api")),
        ("kubectl get deployment/payment-api", ("deployment", "payment-api")),
        ("in namespace shop", ("namespace", "shop")),
        ("on node gke-prod-pool-1-ab12", ("node", "gke-prod-pool-1-ab12")),
        ("service payment-api fails", ("service", "payment-api")),
        ("`orders-api` is slow", ("workload", "orders-api")),
        ("image registry/payment-api:1.42.0", ("image", "registry/payment-api:1.42.0")),
        ("ran payment-api:1.42.0", ("image", "payment-api:1.42.0")),
        ("moved to **v2.3.1-rc1**", ("version", "2.3.1-rc1")),
        ("1.42.0 fails", ("version", "1.42.0")),
        ("rev 42 went out", ("revision", "42")),
        ("since 13:55 UTC", ("time", "13:55 utc")),
        ("at 2026-11-30T13:10:05Z", ("time", "2026-11-30t13:10:05z")),
        ("rolled out at 13:10:05.120Z", ("time", "13:10:05.120z")),
        ("payment-api@1.42.0 is the bad build", ("version", "1.42.0")),
    ],
)
def test_each_kind_is_recognised(text: str, expected: tuple[str, str]) -> None:
    assert expected in claims(text)


@pytest.mark.parametrize(
    "text",
    [
        "p99 went from 1.2 s to 4.5 s; 99.5% of calls; 12 of 14 checkouts",  # numbers, counts
        "the payment service is slow",  # loose talk: a plain word before a kind word
        "the service is down and the pod restarts",  # kind words with no name
        "client at 10.0.1.23 saw Tempo 2.6",  # an IP address, a two-part number
        "see <https://grafana.example/d/payment-api-a9dfd1c984-h4kzp|the dashboard>",  # a URL
        "the `http.status_code` attribute",  # an attribute key in a code span
        "INSERT orders waits 2\u20135 s",  # a range with an en dash
    ],
)
def test_what_is_not_a_claim(text: str) -> None:
    assert claims(text) == []


def test_a_link_label_is_read_and_its_target_is_not() -> None:
    text = "[pod payment-api-a9dfd1c984-w9t2r](https://x.example/payment-api-abc123def4-zzzzz)"
    assert claims(text) == [("pod", "payment-api-a9dfd1c984-w9t2r")]


def test_a_table_row_yields_its_cells() -> None:
    text = "| version | pod |\n|---|---|\n| 3.4.0 | checkout-b5ebe37c4a-q7x2m |"
    assert claims(text) == [("version", "3.4.0"), ("pod", "checkout-b5ebe37c4a-q7x2m")]


def test_revision_roles_are_read_from_the_words_around() -> None:
    found = find_claims("Current revision 42 broke it; roll back to revision 41 (previous).")
    assert [(c.value, c.role) for c in found] == [("42", "current"), ("41", "previous")]


def test_a_list_of_revisions_is_each_a_claim() -> None:
    assert claims("revisions 40, 41 and 42") == [
        ("revision", "40"),
        ("revision", "41"),
        ("revision", "42"),
    ]


def test_a_time_in_another_zone_keeps_its_zone() -> None:
    assert claims("at 15:02 CET") == [("time", "15:02 cet")]


def test_a_date_that_does_not_exist_is_read_not_raised() -> None:
    assert claims("errors started 2026-11-31 14:02 UTC") == [("time", "2026-11-31 14:02 utc")]


def test_digits_of_other_scripts_are_not_times() -> None:
    assert claims("at ١٤:٠٢") == []
