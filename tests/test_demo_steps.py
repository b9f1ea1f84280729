"""The Steps view the demo clicks: what the trace guard did with each missing ID."""

from typing import Any

from bot.outbound.blocks import steps_blocks

INVENTED = "7f3a9c0d2b1e4f5a6b7c8d9e0f1a2b3c"


def _guard(outcome: str, missing: list[str], found: int = 0) -> dict[str, Any]:
    return {
        "type": "verification_finished",
        "found": found,
        "missing": len(missing),
        "unverified": 0,
        "missing_ids": missing,
        "outcome": outcome,
    }


def _text(events: list[dict[str, Any]]) -> str:
    return "\n".join(b["text"]["text"] for b in steps_blocks(events))


def test_an_id_still_cited_when_revisions_run_out_is_named_as_removed() -> None:
    text = _text([_guard("revise", [INVENTED]), _guard("removed", [INVENTED])])

    assert f"not in Tempo, sent back to the agent: {INVENTED}" in text
    assert f"not in Tempo, removed from the answer: {INVENTED}" in text
    assert "corrected" not in text
