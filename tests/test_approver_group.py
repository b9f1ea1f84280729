"""ACTION_APPROVER_GROUP membership fails closed: a stale list decides only for a short grace
while Slack cannot list the group, and a failed listing is retried after a backoff.

A real AsyncWebClient against the Slack simulator; short TTL, grace and backoff stand in for
the defaults (300 s, 60 s, 5 s) so the test waits tenths of a second."""

import asyncio
from collections.abc import AsyncIterator

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound.cards import ApproverGroup
from bot.turn.access import Cached
from sandbox.slack import SlackSimulator

TTL_S, GRACE_S, BACKOFF_S = 0.2, 0.4, 0.3
LISTING = "usergroups.users.list"


@pytest.fixture
async def approvers(slack: SlackSimulator) -> AsyncIterator[ApproverGroup]:
    slack.usergroups["S_ONCALL"] = ["U_LEAD"]
    client = AsyncWebClient(token="xoxb-sandbox", base_url=f"{slack.url}/api/")
    yield ApproverGroup(client, "S_ONCALL", Cached(TTL_S, GRACE_S, BACKOFF_S))
    if client.session is not None:
        await client.session.close()


async def test_a_stale_list_decides_only_for_the_grace_then_nobody_is_a_member(
    approvers: ApproverGroup, slack: SlackSimulator
) -> None:
    assert await approvers.contains("U_LEAD")
    slack.rate_limit(LISTING, times=100, retry_after=0)
    await asyncio.sleep(TTL_S + 0.05)
    assert await approvers.contains("U_LEAD")  # within the grace: the last list holds
    await asyncio.sleep(GRACE_S)
    assert not await approvers.contains("U_LEAD")  # past it: closed


async def test_someone_removed_from_the_group_is_no_approver_once_slack_answers_again(
    approvers: ApproverGroup, slack: SlackSimulator
) -> None:
    assert await approvers.contains("U_LEAD")
    slack.usergroups["S_ONCALL"] = []
    await asyncio.sleep(TTL_S + 0.05)
    assert not await approvers.contains("U_LEAD")


async def test_a_failed_listing_is_retried_after_a_backoff_not_on_every_click(
    approvers: ApproverGroup, slack: SlackSimulator
) -> None:
    slack.rate_limit(LISTING, times=1, retry_after=0)
    for _ in range(5):
        assert not await approvers.contains("U_LEAD")  # never listed: closed
    assert len(slack.calls_to(LISTING)) == 1
    await asyncio.sleep(BACKOFF_S + 0.05)
    assert await approvers.contains("U_LEAD")
    assert len(slack.calls_to(LISTING)) == 2


async def test_slack_s_retry_after_is_waited_out_before_listing_again(
    approvers: ApproverGroup, slack: SlackSimulator
) -> None:
    slack.rate_limit(LISTING, times=1, retry_after=1)  # longer than the backoff
    assert not await approvers.contains("U_LEAD")
    await asyncio.sleep(BACKOFF_S + 0.05)
    assert not await approvers.contains("U_LEAD")
    assert len(slack.calls_to(LISTING)) == 1
