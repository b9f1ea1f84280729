"""docs/operating.md § Try it against your own Tempo: `tracegate investigate --json` prints the
whole result as JSON, and `--thread <id>` continues a thread (the model sees the earlier
question and answer). A real subprocess against the simulators and real Redis."""

from __future__ import annotations

import json
import uuid

from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.scenarios import Scenario
from tests.test_cli import _sandbox_env, _tracegate


async def test_json_prints_the_whole_result(
    gemini: GeminiSimulator, tempo: TempoSimulator, scenario: Scenario, redis_url: str
) -> None:
    real = scenario.error_trace_ids[0]
    gemini.script(Reply.text(f"payment-api 1.42.0 fails; see {real}."))
    env = _sandbox_env(gemini, tempo, redis_url)
    code, out, err = await _tracegate("investigate", "--json", "checkout 500s, why?", env=env)

    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "answered"
    assert result["answer"] == f"payment-api 1.42.0 fails; see {real}."
    assert result["verified_trace_ids"] == [real]
    assert result["thread_id"].startswith("cli:")
    assert isinstance(result["events"], list) and result["events"]


async def test_thread_continues_the_named_thread(
    gemini: GeminiSimulator, tempo: TempoSimulator, redis_url: str
) -> None:
    thread = f"cli:{uuid.uuid4().hex}"
    gemini.script(Reply.text("The checkout errors come from payment-api."), Reply.text("Nothing."))
    env = _sandbox_env(gemini, tempo, redis_url)
    first = await _tracegate("investigate", "--thread", thread, "why do checkouts fail?", env=env)
    second = await _tracegate(
        "investigate", "--thread", thread, "and what changed in payment-api?", env=env
    )

    assert (first[0], second[0]) == (0, 0), first[2] + second[2]
    seen = gemini.requests[-1].text()
    assert "why do checkouts fail?" in seen
    assert "The checkout errors come from payment-api." in seen
    assert "and what changed in payment-api?" in seen
