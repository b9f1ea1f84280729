"""The Slack simulator refuses what Slack refuses: Block Kit that Slack's validation (read
with slack_sdk's own models) rejects is `invalid_blocks`, a channel the workspace does not
have is `channel_not_found`, a token that is not the installation's is `invalid_auth`.
A real AsyncWebClient against the simulator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from sandbox.slack import SlackSimulator


@pytest.fixture
async def client(slack: SlackSimulator) -> AsyncIterator[AsyncWebClient]:
    web = AsyncWebClient(token="xoxb-sandbox", base_url=f"{slack.url}/api/")
    yield web
    if web.session is not None:
        await web.session.close()


def _section(text: str, block_id: str | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "section", "text": {"type": "mrkdwn", "text": text}}
    return block | ({"block_id": block_id} if block_id else {})


def _button(i: int) -> dict[str, Any]:
    return {"type": "button", "text": {"type": "plain_text", "text": "Go"}, "action_id": f"a{i}"}


async def _refusal(client: AsyncWebClient, **args: Any) -> tuple[str, list[str]]:
    with pytest.raises(SlackApiError) as refused:
        await client.chat_postMessage(text="fallback", **args)
    return refused.value.response["error"], refused.value.response.get("errors", [])


async def test_well_formed_blocks_are_posted(client: AsyncWebClient) -> None:
    blocks = [_section("hello", "a"), {"type": "actions", "elements": [_button(0)]}]
    assert (await client.chat_postMessage(channel="C1", text="x", blocks=blocks))["ok"]


@pytest.mark.parametrize(
    ("blocks", "why"),
    [
        ([{"type": "bogus_block"}], "unsupported type: bogus_block"),
        ([_section("")], "must be more than 0 characters"),
        ([{"type": "context", "elements": [{"type": "mrkdwn", "text": " "}]}], "more than 0"),
        ([{"type": "actions", "elements": [_button(i) for i in range(26)]}], "25 elements"),
        ([_section("one", "same"), _section("two", "same")], "duplicate block_id: same"),
        ([{"type": "actions", "elements": [_button(1), _button(1)]}], "duplicate action_id"),
    ],
    ids=["unknown-type", "empty-text", "blank-context", "26-actions", "block-id", "action-id"],
)
async def test_blocks_slack_refuses_are_invalid_blocks(
    client: AsyncWebClient, blocks: list[dict[str, Any]], why: str
) -> None:
    error, errors = await _refusal(client, channel="C1", blocks=blocks)
    assert error == "invalid_blocks"
    assert any(why in problem for problem in errors), errors


async def test_a_channel_the_workspace_does_not_have_is_channel_not_found(
    client: AsyncWebClient,
) -> None:
    assert (await _refusal(client, channel="C_NOWHERE"))[0] == "channel_not_found"


async def test_a_channel_a_person_wrote_in_is_the_workspaces(
    client: AsyncWebClient, slack: SlackSimulator
) -> None:
    slack.post_as("C_INCIDENT", "checkout is down", user="U1")
    assert (await client.chat_postMessage(channel="C_INCIDENT", text="on it"))["ok"]


async def test_a_token_that_is_not_the_installations_is_invalid_auth(
    slack: SlackSimulator,
) -> None:
    wrong = AsyncWebClient(token="xoxb-revoked", base_url=f"{slack.url}/api/")
    with pytest.raises(SlackApiError) as refused:
        await wrong.chat_postMessage(channel="C1", text="hello")
    if wrong.session is not None:
        await wrong.session.close()
    assert refused.value.response["error"] == "invalid_auth"
