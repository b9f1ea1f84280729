"""The Slack client's retries (`slack_client` in bot/process/services.py): a dropped
connection or a 5xx
is retried for every method but chat.postMessage, whose blind retry could post twice. Built
on slack_sdk's public retry-handler interface only; a real AsyncWebClient against the
simulator, which applies the call and then drops the connection."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.process.services import slack_client
from bot.process.settings import Settings
from sandbox.slack import SlackSimulator


@pytest.fixture
async def client(slack: SlackSimulator) -> AsyncIterator[AsyncWebClient]:
    settings = Settings(
        _env_file=None, slack_bot_token="xoxb-sandbox", slack_api_url=f"{slack.url}/api/"
    )
    async with aiohttp.ClientSession() as session:
        yield slack_client(settings, session)


async def test_an_update_whose_answer_was_lost_is_sent_again(
    client: AsyncWebClient, slack: SlackSimulator
) -> None:
    posted = await client.chat_postMessage(channel="C1", text="working")
    slack.drop_after_applying("chat.update")

    assert (await client.chat_update(channel="C1", ts=posted["ts"], text="answer"))["ok"]
    assert len(slack.calls_to("chat.update")) == 2


async def test_a_post_whose_answer_was_lost_is_not_sent_again(
    client: AsyncWebClient, slack: SlackSimulator
) -> None:
    slack.drop_after_applying("chat.postMessage")

    with pytest.raises(aiohttp.ClientError):
        await client.chat_postMessage(channel="C1", text="answer")
    assert len(slack.calls_to("chat.postMessage")) == 1
