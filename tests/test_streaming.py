"""The answer as a live task timeline (chat.startStream / appendStream / stopStream): the
steps in order with their statuses, the answer only once every guard passed, and the
fallback to the placeholder whenever Slack will not stream. The real bot against the strict
Slack simulator; every chunk it sends is checked there with slack_sdk's models."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.exceptions import RedisError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound.stream import StreamProgress
from bot.outbound.timeline import Timeline
from bot.process.redis_client import RedisSpec, connect_redis
from bot.process.server import RunningBot
from bot.turn.store import TurnStore
from graph.tools.registry import shown_by_name
from sandbox import GeminiSimulator, Reply
from sandbox.fleet import RedisStackServer
from sandbox.scenarios import Scenario
from sandbox.slack import TEAM, SlackDriver, SlackMessage, SlackSimulator, chunk_problems
from tests.slack_fixtures import GRAFANA, SECRET, BotFactory, settled

ROOT = "1700000000.000100"
ASKER = "U_ASKER"
ANSWER = "payment-api throws NullPointerException after the deploy."
SEARCH = '{ resource.service.name = "payment-api" && status = error }'


def _driver(bot: RunningBot, slack: SlackSimulator) -> SlackDriver:
    return SlackDriver(bot.url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}", slack=slack)


@pytest.fixture
async def streaming(bot_for: BotFactory) -> AsyncIterator[RunningBot]:
    async with bot_for(slack_streaming="auto") as running:
        yield running


def _investigation(gemini: GeminiSimulator, scenario: Scenario) -> str:
    """Search, read a trace, answer citing it: the trace ID cited."""
    trace_id = scenario.error_trace_ids[0]
    gemini.script(
        Reply.call("query_tempo_traces", traceql=SEARCH),
        Reply.call("get_trace", trace_id=trace_id),
        Reply.text(f"{ANSWER} See trace {trace_id}."),
    )
    return trace_id


def _args(slack: SlackSimulator, method: str) -> list[dict[str, Any]]:
    return [c.args for c in slack.calls_to(method)]


def _chunks_of(slack: SlackSimulator, task_id: str) -> list[dict[str, Any]]:
    sent = [
        chunk
        for method in ("chat.startStream", "chat.appendStream", "chat.stopStream")
        for args in _args(slack, method)
        for chunk in args.get("chunks") or []
    ]
    return [c for c in sent if c.get("id") == task_id]


def _answer_in(message: SlackMessage) -> bool:
    return ANSWER in message.text or ANSWER in json.dumps(message.blocks)


async def test_the_timeline_shows_each_step_in_order_then_the_checked_answer(
    streaming: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, scenario: Scenario
) -> None:
    trace_id = _investigation(gemini, scenario)
    driver = _driver(streaming, slack)
    await driver.mention("checkout is throwing 500s, why?", ts=ROOT, user=ASKER)
    await settled(streaming, 30)

    (message,) = slack.thread("C1", ROOT)
    (start,) = _args(slack, "chat.startStream")
    assert (start["recipient_user_id"], start["recipient_team_id"]) == (ASKER, driver.team)
    assert not message.streaming() and message.recipient == ASKER
    tasks = list(message.tasks().values())
    titles = [t["title"] for t in tasks]
    assert titles[:3] == [
        "Reading the thread",
        f"Searching Tempo: {SEARCH}".replace("&", "&amp;"),
        f"Reading trace {trace_id}",
    ]
    assert titles[3:] == [
        "Checking 1 trace ID in Tempo",
        next(t for t in titles if t.startswith("Checking ") and t.endswith(" facts")),
        "Checking what the answer says about actions",
    ]
    assert {t["status"] for t in tasks} == {"complete"}
    search = tasks[1]
    assert [c["status"] for c in _chunks_of(slack, search["id"])] == ["in_progress", "complete"]
    assert search["output"].endswith("traces")
    assert search["sources"][0]["url"].startswith(f"{GRAFANA}/explore")
    assert tasks[3]["output"] == "1 found, 0 missing, 0 unverified"


async def test_no_model_text_is_streamed_before_the_answer_is_stopped_in(
    streaming: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, scenario: Scenario
) -> None:
    _investigation(gemini, scenario)
    await _driver(streaming, slack).mention("why 500s?", ts=ROOT, user=ASKER)
    await settled(streaming, 30)

    before_stop = _args(slack, "chat.startStream") + _args(slack, "chat.appendStream")
    assert before_stop and not any(ANSWER in json.dumps(args) for args in before_stop)
    assert not any(
        c["type"] == "markdown_text" for args in before_stop for c in args.get("chunks") or []
    )
    (stop,) = _args(slack, "chat.stopStream")
    assert ANSWER in json.dumps(stop["blocks"])
    kinds = [b["type"] for b in stop["blocks"]]
    assert "context_actions" in kinds  # 👍 / 👎 under the streamed answer too
    sent = [c for args in [*before_stop, stop] for c in args.get("chunks") or []]
    assert chunk_problems(sent) == []


@pytest.mark.parametrize(
    "refusal", ["unknown_method", "method_deprecated", "not_allowed_token_type"]
)
async def test_a_workspace_that_cannot_stream_gets_the_placeholder_and_is_not_asked_again(
    streaming: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, refusal: str
) -> None:
    slack.streaming_refused = refusal
    gemini.script(Reply.text(ANSWER), Reply.text(ANSWER))
    driver = _driver(streaming, slack)
    for root in (ROOT, slack.new_ts()):
        await driver.mention("why?", ts=root, user=ASKER)
        await settled(streaming, 30)
        (message,) = slack.thread("C1", root)
        assert ANSWER in message.text and not message.chunks  # the placeholder, edited

    assert len(slack.calls_to("chat.startStream")) == 1  # auto remembers the refusal


async def test_streaming_on_tries_every_turn_and_still_falls_back(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.streaming_refused = "method_deprecated"
    gemini.script(Reply.text(ANSWER), Reply.text(ANSWER))
    async with bot_for(slack_streaming="on") as bot:
        driver = _driver(bot, slack)
        for root in (ROOT, slack.new_ts()):
            await driver.mention("why?", ts=root, user=ASKER)
            await settled(bot, 30)
            assert ANSWER in slack.thread("C1", root)[0].text

    assert len(slack.calls_to("chat.startStream")) == 2


async def test_streaming_off_never_starts_a_stream(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text(ANSWER))
    async with bot_for(slack_streaming="off") as bot:
        await _driver(bot, slack).mention("why?", ts=ROOT, user=ASKER)
        await settled(bot, 30)

    assert slack.calls_to("chat.startStream") == []
    assert ANSWER in slack.thread("C1", ROOT)[0].text


async def test_a_rate_limited_start_falls_back_for_that_turn_only(
    streaming: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.rate_limit("chat.startStream", times=4, retry_after=1)  # past slack_sdk's 3 retries
    gemini.script(Reply.text(ANSWER), Reply.text(ANSWER))
    driver = _driver(streaming, slack)
    await driver.mention("why?", ts=ROOT, user=ASKER)
    await settled(streaming, 30)
    later = slack.new_ts()
    await driver.mention("and now?", ts=later, user=ASKER)
    await settled(streaming, 30)

    (first,) = slack.thread("C1", ROOT)
    (second,) = slack.thread("C1", later)
    assert ANSWER in first.text and not first.chunks  # placeholder and edits
    assert _answer_in(second) and second.tasks()  # streamed: a rate limit is not remembered


async def test_a_stream_slack_closed_by_itself_gets_the_answer_written_over_it(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.stream_timeout_s = 0.5  # Slack closes streams nobody stopped (after minutes)
    gemini.script(Reply(parts=({"text": ANSWER},), delay_s=1.0))
    async with bot_for(slack_streaming="auto") as bot:
        await _driver(bot, slack).mention("why?", ts=ROOT, user=ASKER)
        await settled(bot, 30)

    (message,) = slack.thread("C1", ROOT)
    assert _answer_in(message) and not message.streaming()
    assert slack.calls_to("chat.update"), "the answer is written with chat.update"
    assert slack.reactions_on("C1", ROOT) == ["white_check_mark"]  # answered, not failed


async def test_a_stop_whose_answer_was_lost_delivers_the_answer_once(
    streaming: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.drop_after_applying("chat.stopStream")  # applied; the bot never hears of it
    gemini.script(Reply.text(ANSWER))
    await _driver(streaming, slack).mention("why?", ts=ROOT, user=ASKER)
    await settled(streaming, 30)

    (message,) = slack.thread("C1", ROOT)
    assert _answer_in(message) and not message.streaming()
    assert json.dumps(message.blocks).count(ANSWER) == 1
    assert slack.reactions_on("C1", ROOT) == ["white_check_mark"]  # answered, not failed


async def test_a_start_whose_answer_was_lost_is_not_retried_into_a_second_stream(
    streaming: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.drop_after_applying("chat.startStream")
    gemini.script(Reply.text(ANSWER))
    await _driver(streaming, slack).mention("why?", ts=ROOT, user=ASKER)
    await settled(streaming, 30)

    assert len(slack.calls_to("chat.startStream")) == 1
    answers = [m for m in slack.thread("C1", ROOT) if _answer_in(m)]
    assert len(answers) == 1 and not answers[0].chunks  # the placeholder took over


# --- the simulator is as strict as Slack -------------------------------------------------
@pytest.fixture
async def client(slack: SlackSimulator) -> AsyncIterator[AsyncWebClient]:
    web = AsyncWebClient(token=slack.bot_token, base_url=f"{slack.url}/api/")
    yield web
    if web.session is not None:
        await web.session.close()


async def _refused(call: Any) -> str:
    with pytest.raises(SlackApiError) as raised:
        await call
    return str(raised.value.response["error"])


async def test_a_stream_in_a_channel_must_name_the_person_it_is_for(
    client: AsyncWebClient,
) -> None:
    start = client.chat_startStream(channel="C1", thread_ts=ROOT, recipient_team_id=TEAM)
    assert await _refused(start) == "missing_recipient_user_id"


@pytest.mark.parametrize(
    "chunk",
    [
        {"type": "task_update", "id": "a", "title": "x", "status": "done"},
        {"type": "task_update", "id": "a", "title": "x", "status": "complete", "colour": "red"},
        {"type": "task_update", "id": "", "title": "x", "status": "complete"},
        {"type": "task_update", "id": "a", "title": "x", "status": "complete", "sources": ["x"]},
        {"type": "spinner"},
    ],
)
async def test_a_chunk_slack_would_refuse_is_invalid_chunks(
    client: AsyncWebClient, chunk: dict[str, Any]
) -> None:
    start = client.chat_startStream(
        channel="C1",
        thread_ts=ROOT,
        recipient_team_id=TEAM,
        recipient_user_id=ASKER,
        chunks=[chunk],
    )
    assert await _refused(start) == "invalid_chunks"


async def test_a_stopped_stream_takes_no_more_and_a_live_one_is_not_edited(
    client: AsyncWebClient, slack: SlackSimulator
) -> None:
    started = await client.chat_startStream(
        channel="C1", thread_ts=ROOT, recipient_team_id=TEAM, recipient_user_id=ASKER
    )
    ts = started["ts"]
    assert await _refused(client.chat_update(channel="C1", ts=ts, text="x")) == (
        "cant_update_message"
    )
    await client.chat_stopStream(channel="C1", ts=ts, markdown_text="done")
    append = client.chat_appendStream(channel="C1", ts=ts, markdown_text="more")
    assert await _refused(append) == "message_not_in_streaming_state"
    await client.chat_update(channel="C1", ts=ts, text="edited after the stop")


async def test_slack_closes_a_stream_nobody_stopped(
    client: AsyncWebClient, slack: SlackSimulator
) -> None:
    slack.stream_timeout_s = 0.2
    started = await client.chat_startStream(
        channel="C1", thread_ts=ROOT, recipient_team_id=TEAM, recipient_user_id=ASKER
    )
    deadline = time.monotonic() + 5
    while slack.messages[("C1", started["ts"])].streaming():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    stop = client.chat_stopStream(channel="C1", ts=started["ts"])
    assert await _refused(stop) == "message_not_in_streaming_state"


# --- the timeline itself (pure) -----------------------------------------------------------
def _started(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """A call's start as the tools node reports it: titled as the tool declares."""
    event: dict[str, Any] = {"type": "tool_started", "tool": tool, "args": args}
    if declared := shown_by_name().get(tool):
        event["title"] = declared.title_for(args)
    return event


def test_model_arguments_on_the_timeline_are_escaped_and_short() -> None:
    timeline = Timeline()
    (chunk,) = timeline.update(_started("get_trace", {"trace_id": "<!channel> " * 40}))
    assert "<!channel>" not in chunk["title"] and "&lt;!channel&gt;" in chunk["title"]
    assert len(chunk["title"]) <= 120


def test_a_resumed_run_closes_the_dead_run_s_tasks_and_never_reuses_their_ids() -> None:
    dead = Timeline(run=1)
    dead.opening()
    dead.update(_started("get_trace", {"trace_id": "abc"}))
    dead.update({"type": "waiting_for_model"})
    resumed = Timeline(run=2)

    closed = resumed.interrupted(dead.dump())

    assert [(c["title"], c["status"]) for c in closed] == [("Reading trace abc", "error")]
    (next_tool,) = resumed.update(_started("get_trace", {}))[-1:]
    assert next_tool["id"] not in {c["id"] for c in closed}
    # The wait the dead run was in ends with this run's first model call.
    assert [c["status"] for c in resumed.update({"type": "model_started"})] == ["complete"]


def test_finishing_a_failed_turn_marks_what_still_runs_as_failed() -> None:
    timeline = Timeline()
    timeline.opening()
    timeline.update({"type": "verification_started", "trace_ids": 2})

    assert [c["status"] for c in timeline.finish(failed=True)] == ["error"]


async def test_a_wait_for_model_capacity_shows_on_the_timeline_and_ends_when_the_model_answers(
    streaming: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.quota(1), Reply.text(ANSWER))  # 429 RESOURCE_EXHAUSTED, retry in 1 s
    await _driver(streaming, slack).mention("why?", ts=ROOT, user=ASKER)
    await settled(streaming, 60)

    (message,) = slack.thread("C1", ROOT)
    assert _answer_in(message) and not message.streaming()
    tasks = list(message.tasks().values())
    (wait,) = [t for t in tasks if t["title"] == "Waiting for model capacity"]
    assert [c["status"] for c in _chunks_of(slack, wait["id"])] == ["in_progress", "complete"]
    assert not [t for t in tasks if t["status"] != "complete"]


@pytest.mark.parametrize(
    ("tool", "args", "title"),
    [
        (
            "propose_action",
            {"action": "rollout_undo", "deployment": "payment-api"},
            "Proposing a rollback of payment-api",
        ),
        (
            "propose_action",
            {"action": "scale", "deployment": "cart", "replicas": 6},
            "Proposing to scale cart to 6",
        ),
        (
            "get_kubernetes_events",
            {"namespace": "shop", "deployment": "", "pod": "cart-7d-x"},
            "Reading Kubernetes events of cart-7d-x",
        ),
        ("an_invented_tool", {}, "Running an_invented_tool"),
    ],
)
def test_each_step_is_titled_by_what_it_does(tool: str, args: dict[str, Any], title: str) -> None:
    chunk = Timeline().update(_started(tool, args))[-1]

    assert (chunk["title"], chunk["status"]) == (title, "in_progress")


@pytest.mark.parametrize(
    "tool", ["x{0}", "q{traceql.__class__.__mro__}", "a{deployment:50000000}", "<b>{pod}</b>"]
)
def test_a_tool_name_the_model_made_up_is_shown_as_text_never_formatted(tool: str) -> None:
    """Not a template: no IndexError, no Python internals, no 50 MB padding of a field."""
    args = {"traceql": "{ status = error }", "deployment": "payment-api", "pod": "cart-7d-x"}
    chunk = Timeline().update(_started(tool, args))[-1]

    assert chunk["title"] == "Running " + tool.replace("<", "&lt;").replace(">", "&gt;")


async def test_chunks_are_kept_while_redis_cannot_save_their_tasks_and_sent_when_it_is_back(
    client: AsyncWebClient, slack: SlackSimulator, redis_server: RedisStackServer
) -> None:
    """Redis stopped mid-turn: the flush fails saving the running tasks, and its chunks stay
    pending (not dropped); Redis back, the next flush saves the tasks and sends them."""
    # fails within 2 s while Redis is stopped, not after the default 30
    redis = connect_redis(RedisSpec(redis_server.url, failover_timeout_s=2.0))
    turns = TurnStore(redis, ttl_s=600)
    started = await client.chat_startStream(
        channel="C1", thread_ts=ROOT, recipient_team_id=TEAM, recipient_user_id=ASKER
    )

    async def save_tasks(dumped: str) -> None:  # as the turn's runner keeps them
        await turns.update("turn-1", stream_tasks=dumped)

    async def fence() -> None:  # the run holds its thread
        return None

    stream = StreamProgress(
        client, "C1", started["ts"], Timeline(), interval_s=0, fence=fence, save_tasks=save_tasks
    )
    try:
        await redis_server.stop()
        with pytest.raises(RedisError):
            await stream.progress(_started("get_trace", {"trace_id": "abc"}))
        assert [c["title"] for c in stream.pending] == ["Reading trace abc"]
        await redis_server.start()
        await stream.flush()
        tasks = slack.messages[("C1", started["ts"])].tasks()
        assert [t["title"] for t in tasks.values()] == ["Reading trace abc"]
        assert stream.pending == []
        saved = [await redis.hget(k, "stream_tasks") async for k in redis.scan_iter("*turn-1*")]
        assert saved and b"Reading trace abc" in saved[0]
    finally:
        await redis.aclose()
