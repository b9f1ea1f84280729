"""A checkpoint written before `draft_check` replaced the trace verdict, the claim verdict
and the answer is read as today's graph expects it (a turn running across the deploy).
Checked end to end against the previous release's code by hand (see the #14 note)."""

from __future__ import annotations

import copy
from typing import Any

from graph.checkpoint import upgrade_channels

VERIFIED = {"outcome": "verified", "checks": {}, "removed": 0}
MISSING = {"7f3a": {"status": "missing", "detail": "not in Tempo"}}
REVISE = {"outcome": "revise", "checks": MISSING, "removed": 0}


def _checkpoint(values: dict[str, Any], versions: dict[str, Any]) -> Any:
    return {"channel_values": values, "channel_versions": versions}


def test_a_previous_release_s_checked_answer_becomes_the_draft_check() -> None:
    checkpoint = _checkpoint(
        {
            "messages": ["…"],
            "budget": 8,
            "trace_verdict": VERIFIED,
            "claim_verdict": None,
            "answer": "payment-api 1.42.0 broke checkout.",
        },
        {"messages": "00005", "trace_verdict": "00004", "answer": "00005", "budget": "00001"},
    )

    upgrade_channels(checkpoint)

    assert checkpoint["channel_values"] == {
        "messages": ["…"],
        "draft_check": {
            "traces": VERIFIED,
            "claims": None,
            "answer": "payment-api 1.42.0 broke checkout.",
        },
    }
    assert checkpoint["channel_versions"]["draft_check"] == "00005"


def test_a_previous_release_s_draft_sent_back_stays_sent_back() -> None:
    checkpoint = _checkpoint(
        {"messages": [], "trace_verdict": REVISE, "answer": None}, {"trace_verdict": "00003"}
    )

    upgrade_channels(checkpoint)

    assert checkpoint["channel_values"]["draft_check"] == {
        "traces": REVISE,
        "claims": None,
        "answer": None,
    }


def test_today_s_checkpoints_are_left_as_they_are() -> None:
    check = {"traces": VERIFIED, "claims": None, "answer": "ok"}
    today = _checkpoint({"messages": [], "draft_check": check}, {"draft_check": "00002"})
    before_any_draft = _checkpoint({"messages": []}, {"messages": "00001"})
    expected = copy.deepcopy((today, before_any_draft))

    upgrade_channels(today)
    upgrade_channels(before_any_draft)

    assert (today, before_any_draft) == expected
