"""The Steps view: each event of a run as one line, in order (plain function, no Slack)."""

from typing import Any

import pytest

from bot.outbound.blocks import steps_blocks


@pytest.mark.parametrize(
    ("event", "line"),
    [
        ({"type": "tool_started", "tool": "get_trace"}, "tool get_trace started"),
        ({"type": "tool_finished", "tool": "get_trace", "status": "ok"}, "tool get_trace: ok"),
        ({"type": "model_started", "node": "agent"}, "model (agent)"),
        (
            {"type": "model_finished", "tool_calls": ["get_trace", "query_tempo_traces"]},
            "model done; tool calls: get_trace, query_tempo_traces",
        ),
        ({"type": "model_finished", "tool_calls": []}, "model done; tool calls: none"),
        (
            {"type": "verification_finished", "found": 2, "missing": 1, "unverified": 0},
            "trace guard: 2 found, 1 missing, 0 unverified",
        ),
        (
            {"type": "rubric_evaluation_end", "iteration": 1, "result": "satisfied"},
            "rubric pass 2: satisfied",
        ),
        (
            {"type": "rubric_evaluation_end", "iteration": 0, "result": "failed", "unverified": 1},
            "rubric pass 1: failed (unverified)",
        ),
        ({"type": "forced_answer", "reason": "tool_budget"}, "forced answer: tool_budget"),
        (
            {"type": "stopped", "reason": "step_limit", "steps": 25},
            "stopped: step_limit after 25 steps",
        ),
        (
            {"type": "claims_checked", "unsupported": 1},
            "action-claim guard: 1 unsupported claim(s)",
        ),
        (
            {"type": "action_proposed", "request_id": "act-1", "status": "refused"},
            "action act-1: refused",
        ),
        ({"type": "rubric_evaluation_start"}, "rubric evaluation start"),
        ({"type": "tool_started"}, "tool None started"),
    ],
)
def test_each_step_reads_as_one_line_with_its_time(event: dict[str, Any], line: str) -> None:
    (block,) = steps_blocks([{**event, "at_ms": 1500}])
    assert block["text"]["text"] == f"`   1.5s` {line}"
