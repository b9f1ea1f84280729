"""Charts under the answer, through Slack's external upload flow: the simulator holds the
flow to Slack's rules, the bot uploads each chart once and only after the answer, a
refused upload leaves the answer and says so in Steps, SLACK_CHARTS=off uploads nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.process.server import RunningBot
from bot.turn.store import turn_id_of
from graph.runner import InvestigationResult
from sandbox import GeminiSimulator, Reply
from sandbox.scenarios import Scenario
from sandbox.slack import SlackDriver, SlackSimulator
from tests.slack_fixtures import BotFactory, settled

ROOT = "1700000000.000100"
PNG = b"\x89PNG\r\n\x1a\n" + b"0" * 100
MANIFEST = Path(__file__).resolve().parent.parent / "manifest.yml"


def _client(slack: SlackSimulator) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=f"{slack.url}/api/")


async def test_an_upload_of_other_than_the_declared_length_is_refused(
    slack: SlackSimulator,
) -> None:
    client = _client(slack)
    handed = await client.files_getUploadURLExternal(filename="c.png", length=len(PNG) + 1)
    async with (
        aiohttp.ClientSession() as session,
        session.post(str(handed["upload_url"]), data=PNG) as response,
    ):
        assert response.status == 400
    with pytest.raises(SlackApiError, match="file_not_found"):
        await client.files_completeUploadExternal(
            files=[{"id": handed["file_id"], "title": "c"}], channel_id="C1", thread_ts=ROOT
        )


async def test_completing_needs_the_file_ids_that_were_handed_out(slack: SlackSimulator) -> None:
    client = _client(slack)
    with pytest.raises(SlackApiError, match="file_not_found"):
        await client.files_completeUploadExternal(
            files=[{"id": "FNOTHANDED", "title": "c"}], channel_id="C1", thread_ts=ROOT
        )
    done = await client.files_upload_v2(
        file=PNG, filename="c.png", title="c", channel="C1", thread_ts=ROOT
    )
    (shared,) = slack.files_in("C1", ROOT)
    assert (shared.id, shared.data, shared.title) == (done["file"]["id"], PNG, "c")


async def test_the_manifests_scopes_allow_the_upload_and_without_files_write_it_is_refused(
    slack: SlackSimulator,
) -> None:
    granted = set(yaml.safe_load(MANIFEST.read_text())["oauth_config"]["scopes"]["bot"])
    slack.scopes = granted
    await _client(slack).files_upload_v2(file=PNG, filename="c.png", channel="C1", thread_ts=ROOT)
    slack.scopes = granted - {"files:write"}
    with pytest.raises(SlackApiError, match="missing_scope"):
        await _client(slack).files_upload_v2(file=PNG, filename="d.png", channel="C1")


# --- the bot --------------------------------------------------------------------------------


@pytest.fixture
async def bot(bot_for: BotFactory) -> AsyncIterator[RunningBot]:
    async with bot_for(slack_charts="on") as running:
        yield running


async def _answer_citing_a_trace(
    bot: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, scenario: Scenario
) -> tuple[SlackDriver, str]:
    trace_id = scenario.error_trace_ids[0]
    gemini.script(
        Reply.call("get_trace", trace_id=trace_id),
        Reply.text(f"payment-api fails in ChargeHandler; see trace {trace_id}."),
    )
    driver = SlackDriver(bot.url, "sandbox-signing-secret", team="TCHARTS", slack=slack)
    await driver.mention("why?", ts=ROOT)
    await settled(bot, 30)
    return driver, trace_id


async def test_the_waterfall_of_the_cited_trace_is_uploaded_into_the_thread_after_the_answer(
    bot: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, scenario: Scenario
) -> None:
    _, trace_id = await _answer_citing_a_trace(bot, slack, gemini, scenario)
    answer, shared = slack.thread("C1", ROOT)
    assert trace_id in answer.text
    assert [f["title"] for f in shared.files] == [f"trace {trace_id}"]
    (call,) = slack.calls_to("files.completeUploadExternal")
    assert (call.args["channel_id"], call.args["thread_ts"]) == ("C1", ROOT)
    (upload,) = slack.files_in("C1", ROOT)
    assert upload.data is not None and upload.data.startswith(b"\x89PNG")
    assert "failure starts in payment-api" in upload.alt_txt


async def test_a_refused_upload_leaves_the_answer_and_steps_say_why(
    bot: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator, scenario: Scenario
) -> None:
    slack.scopes = {"chat:write", "channels:history", "reactions:write"}  # no files:write
    _, trace_id = await _answer_citing_a_trace(bot, slack, gemini, scenario)
    (answer,) = slack.thread("C1", ROOT)
    assert trace_id in answer.text and "went wrong" not in answer.text
    assert slack.files_in("C1", ROOT) == []
    correlation_id = json.dumps(answer.blocks).split('"show_steps", "value": "')[-1][:12]
    saved = await bot.services.memory.steps(correlation_id)
    assert saved is not None
    (note,) = [e for e in saved[1] if e["type"] == "chart_not_posted"]
    assert note["reason"].startswith("missing_scope: the app lacks files:write")


async def test_with_slack_charts_off_nothing_is_uploaded(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator, scenario: Scenario
) -> None:
    async with bot_for(slack_charts="off") as bot:
        await _answer_citing_a_trace(bot, slack, gemini, scenario)
    (answer,) = slack.thread("C1", ROOT)
    assert scenario.error_trace_ids[0] in answer.text
    assert slack.calls_to("files.getUploadURLExternal") == []


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "died-before-recording"])
async def test_a_resumed_turn_does_not_upload_a_chart_again(
    bot: RunningBot,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    scenario: Scenario,
    recorded: bool,
) -> None:
    await _answer_citing_a_trace(bot, slack, gemini, scenario)
    services = bot.services
    turn_id = turn_id_of(f"TCHARTS:C1:{ROOT}", ROOT)
    if not recorded:  # the run died after Slack shared the file, before it could say so
        await services.turns.redis.hdel(services.turns._key(turn_id), "delivered:chart:0:trace")
    turn = await services.turns.get(turn_id)
    assert turn is not None and turn.result is not None
    result = InvestigationResult.model_validate(turn.result)

    async def unfenced() -> None:
        return None

    searched = len(slack.calls_to("conversations.replies"))
    await services.conversations._charts(turn, result, unfenced)
    assert len(slack.calls_to("files.getUploadURLExternal")) == 1
    # recorded: the step is known done, nothing is asked; else the thread is searched
    assert (len(slack.calls_to("conversations.replies")) > searched) is not recorded
    assert len(slack.files_in("C1", ROOT)) == 1
