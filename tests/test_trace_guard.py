"""The trace guard end to end: real ChatGoogleGenerativeAI and httpx against the simulators."""

import asyncio

from langgraph.checkpoint.base import BaseCheckpointSaver

from graph.config import GraphLimits, TempoSpec
from graph.runner import Investigator
from graph.tools.tempo import TempoClient
from graph.trace_guard import REMOVED_PLACEHOLDER, UNVERIFIED_MARK, TraceVerifier
from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.scenarios import Scenario
from tests.conftest import OpenInvestigator

INVENTED = "deadbeefdeadbeefdeadbeefdeadbeef"
SEARCH = Reply.call(
    "query_tempo_traces", traceql='{ resource.service.name = "payment-api" && status = error }'
)


async def test_an_invented_id_sends_the_agent_back_with_feedback_naming_it(
    investigator: Investigator, gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> None:
    real = scenario.error_trace_ids[2]
    gemini.script(
        Reply.text(f"payment-api is failing, see trace {INVENTED}."),
        SEARCH,
        Reply.text(f"payment-api is failing, see trace {real}."),
    )
    result = await investigator.investigate(thread_id, "checkout 500s, why?", "U1")

    feedback_request = gemini.requests[1]
    assert f"do not exist in Tempo: {INVENTED}" in feedback_request.text()
    assert "query_tempo_traces" in feedback_request.text()
    assert real in result.answer and INVENTED not in result.answer
    assert (result.trace_revisions, result.verified_trace_ids) == (1, [real])


async def test_ids_still_invented_when_revisions_run_out_are_removed_and_counted(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    other = "cafebabecafebabecafebabecafebabe"
    gemini.script(*[Reply.text(f"Caused by {INVENTED} and {other}.")] * 3)
    result = await investigator.investigate(thread_id, "why?", "U1")

    assert len(gemini.requests) == 3  # first draft + TRACE_MAX_REVISIONS (2) revisions
    assert INVENTED not in result.answer and other not in result.answer
    assert result.answer.count(REMOVED_PLACEHOLDER) == 2
    assert "2 trace ID references removed: Tempo has no such trace" in result.answer
    assert sorted(result.removed_trace_ids) == sorted([INVENTED, other])


async def test_tempo_down_marks_ids_unverified_without_blocking_the_answer(
    investigator: Investigator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    cited = scenario.error_trace_ids[3]
    tempo.faults.status = 503
    gemini.script(Reply.text(f"Probably a bad deploy; see {cited}."))
    result = await investigator.investigate(thread_id, "why?", "U1")

    assert result.status == "answered"
    assert result.unverified_trace_ids == [cited]
    assert f"{cited}{UNVERIFIED_MARK}" in result.answer
    assert result.verified_trace_ids == []


async def test_tempo_hanging_past_the_timeout_marks_ids_unverified(
    investigator: Investigator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    cited = scenario.error_trace_ids[3]
    tempo.faults.hang = True
    gemini.script(Reply.text(f"See {cited}."))
    result = await investigator.investigate(thread_id, "why?", "U1")

    assert result.unverified_trace_ids == [cited]
    assert UNVERIFIED_MARK in result.answer


async def test_short_upper_case_and_zero_stripped_ids_are_verified(
    investigator: Investigator, gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> None:
    sixty_four_bit = scenario.traces[0].trace_id  # 16 zeros + 16 hex
    zero_stripped = scenario.traces[1].trace_id  # "00" + 30 hex
    upper = scenario.error_trace_ids[3]
    draft = (
        f"Traces {sixty_four_bit[16:]}, {zero_stripped.lstrip('0')} and {upper.upper()} "
        "all fail in payment-api."
    )
    gemini.script(Reply.text(draft))
    result = await investigator.investigate(thread_id, "why?", "U1")

    assert sorted(result.verified_trace_ids) == sorted([sixty_four_bit, zero_stripped, upper])
    assert result.answer == draft


async def test_hex_looking_words_that_are_not_traces_do_not_crash_the_guard(
    investigator: Investigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    draft = "The config hash is abcdefabcdef0123 and the build id DEADBEEFDEADBEEF."
    gemini.script(*[Reply.text(draft)] * 3)
    result = await investigator.investigate(thread_id, "why?", "U1")

    assert result.status == "answered"
    assert result.answer.count(REMOVED_PLACEHOLDER) == 2


async def test_a_draft_without_trace_ids_is_posted_unchanged(
    investigator_for: OpenInvestigator, gemini: GeminiSimulator, thread_id: str
) -> None:
    gemini.script(Reply.text("I found no traces in that window; nothing to cite."))
    async with investigator_for() as investigator:
        result = await investigator.investigate(thread_id, "why?", "U1")
    assert result.answer == "I found no traces in that window; nothing to cite."
    assert result.trace_revisions == 0


async def test_every_id_of_a_draft_is_asked_for_at_once_by_default(
    tempo: TempoSimulator, tempo_spec: TempoSpec
) -> None:
    """A normal answer's IDs cost one Tempo round trip, not one per concurrency slot: all
    40 requests are in flight before Tempo has answered any."""
    ids = [f"{n:032x}" for n in range(1, 41)]
    client = TempoClient(tempo_spec.model_copy(update={"timeout_s": 30}))
    verifier = TraceVerifier(client, GraphLimits().trace_verify_concurrency)
    tempo.faults.latency_s = 30
    checking = asyncio.create_task(verifier.check(ids))
    try:
        await tempo.wait_for_request("/api/v2/traces/", timeout_s=10, count=len(ids))
        assert not checking.done()
    finally:
        checking.cancel()
        await client.aclose()


async def test_an_id_confirmed_in_an_earlier_turn_is_not_asked_of_tempo_again(
    investigator: Investigator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    scenario: Scenario,
    thread_id: str,
) -> None:
    cited = scenario.error_trace_ids[1]
    gemini.script(Reply.text(f"See {cited}."), Reply.text(f"As before, {cited} shows it."))
    await investigator.investigate(thread_id, "why?", "U1")
    asked_first = len(tempo.requests_for("/api/v2/traces/"))
    again = await investigator.investigate(thread_id, "and now?", "U1")

    assert asked_first == 1
    assert len(tempo.requests_for("/api/v2/traces/")) == asked_first
    assert again.verified_trace_ids == [cited]


async def test_known_ids_are_stored_again_only_when_tempo_confirmed_a_new_one(
    investigator: Investigator, gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> None:
    first, second = scenario.error_trace_ids[:2]
    gemini.script(
        Reply.text(f"See {first}."),
        Reply.text(f"As before, {first}."),
        Reply.text(f"And {second}."),
    )
    versions = []
    for question in ("why?", "and now?", "anything else?"):
        await investigator.investigate(thread_id, question, "U1")
        versions.append(await _version_of(investigator, thread_id, "known_traces"))

    assert versions[1] == versions[0]  # nothing new: not written (every write is stored)
    assert versions[2] != versions[1]
    state = await investigator.graph.aget_state({"configurable": {"thread_id": thread_id}})
    assert state.values["known_traces"] == {first: "found", second: "found"}


async def _version_of(investigator: Investigator, thread_id: str, channel: str) -> object:
    saver = investigator.graph.checkpointer
    assert isinstance(saver, BaseCheckpointSaver)
    saved = await saver.aget_tuple({"configurable": {"thread_id": thread_id}})
    assert saved is not None
    return saved.checkpoint["channel_versions"][channel]


async def test_a_draft_the_trace_guard_sends_back_is_not_checked_for_action_claims(
    investigator: Investigator, gemini: GeminiSimulator, scenario: Scenario, thread_id: str
) -> None:
    real = scenario.error_trace_ids[2]
    gemini.script(
        Reply.text(f"I rolled back payment-api; see trace {INVENTED}."),
        Reply.text(f"payment-api is failing, see trace {real}."),
    )
    result = await investigator.investigate(thread_id, "checkout 500s, why?", "U1")

    kinds = [e["type"] for e in result.events]
    assert (kinds.count("verification_finished"), kinds.count("claims_checked")) == (2, 1)
    assert (result.trace_revisions, result.claim_revisions) == (1, 0)
