"""Who may ask the bot, and how often (issue #35, points 1 and 2): through the real bot over
HTTP, the Slack simulator's users.info, and a real Redis.

Each test has a channel of its own: the simulator's message stamps repeat between tests.
"""

import asyncio
import uuid

import pytest
import redis.asyncio as aioredis

from bot.process.server import RunningBot
from bot.turn.access import AskingLimits
from sandbox import GeminiSimulator, Reply
from sandbox.kubernetes import KubernetesSimulator
from sandbox.slack import SlackDriver, SlackMessage, SlackPerson, SlackSimulator
from tests.gates_fixtures import APPROVER, REQUESTER, SAFE, SECOND_APPROVER, audit_entries
from tests.proposals import ROLLBACK, ROLLBACK_PROPOSED
from tests.slack_fixtures import SECRET, BotFactory, settled

PARTNER = "U_PARTNER"  # a Slack Connect user: another company's workspace
GUEST = "U_GUEST"
MEMBER = "U_MEMBER"
ANSWER = "Nothing looks wrong so far."


def _channel() -> str:
    return f"C{uuid.uuid4().hex[:8].upper()}"


def _ts(n: int) -> str:
    return f"{1_760_000_000 + n}.424242"  # never a stamp the simulator makes (.000100)


def _said(slack: SlackSimulator, channel: str, root: str) -> str:
    """Everything the bot posted in the thread, as text."""
    return "\n".join(str(m.blocks) + m.text for m in slack.thread(channel, root))


async def _ask(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, user: str, n: int = 0
) -> str:
    """`user` mentions the bot at the top of a new thread of a channel of the test's own;
    what the bot said there once everything settled."""
    channel, root = _channel(), _ts(n)
    status, _ = await driver.mention(
        "checkout is failing, why?", user=user, channel=channel, ts=root
    )
    assert status == 200
    await settled(bot)
    return _said(slack, channel, root)


async def test_a_member_of_the_workspace_is_answered(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(Reply.text(ANSWER))
    said = await _ask(bot, driver, slack, MEMBER)
    assert ANSWER in said
    assert [c.args["user"] for c in slack.calls_to("users.info")] == [MEMBER]


async def test_a_slack_connect_user_is_told_why_and_no_model_is_called(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.people[PARTNER] = SlackPerson(team_id="TPARTNER")
    gemini.script(Reply.text(ANSWER))
    said = await _ask(bot, driver, slack, PARTNER)
    assert "Slack Connect" in said and "ALLOW_EXTERNAL_USERS=true" in said
    assert ANSWER not in said
    assert gemini.requests == []
    assert slack.calls_to("users.info") == []  # the event's user_team said so


async def test_a_slack_connect_user_whose_event_names_no_user_team_is_found_by_users_info(
    bot: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    """users.info's team_id decides when the event carries no user_team."""
    slack.people[PARTNER] = SlackPerson(team_id="TPARTNER")
    team = f"T{uuid.uuid4().hex[:8].upper()}"
    driver = SlackDriver(bot.url, SECRET, team=team, slack=slack)
    channel, root = _channel(), _ts(0)
    event = {
        "type": "app_mention",
        "user": PARTNER,
        "text": "<@UBOT> why?",
        "ts": root,
        "channel": channel,
        "event_ts": root,
    }
    slack.post_as(channel, event["text"], ts=root, user=PARTNER)  # as Slack stores it
    gemini.script(Reply.text(ANSWER))
    assert (await driver.event(event))[0] == 200
    await settled(bot)
    assert "ALLOW_EXTERNAL_USERS=true" in _said(slack, channel, root)
    assert [c.args["user"] for c in slack.calls_to("users.info")] == [PARTNER]
    assert gemini.requests == []


@pytest.mark.parametrize(
    "guest",
    [SlackPerson(is_restricted=True), SlackPerson(is_ultra_restricted=True)],
    ids=["multi-channel", "single-channel"],
)
async def test_a_guest_is_told_why_and_no_model_is_called(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    guest: SlackPerson,
) -> None:
    slack.people[GUEST] = guest
    gemini.script(Reply.text(ANSWER))
    said = await _ask(bot, driver, slack, GUEST)
    assert "Guests" in said and "ALLOW_GUEST_USERS=true" in said
    assert gemini.requests == []


async def test_a_refused_question_s_eyes_reaction_is_replaced_by_a_warning(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator
) -> None:
    """Not started is not still working: the message that asked does not keep 👀."""
    slack.people[GUEST] = SlackPerson(is_restricted=True)
    channel, root = _channel(), _ts(0)
    await driver.mention("checkout is failing, why?", user=GUEST, channel=channel, ts=root)
    await settled(bot)
    assert slack.reactions_on(channel, root) == ["warning"]


async def test_when_users_info_fails_the_asker_is_refused_and_slack_is_not_asked_again_at_once(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.users_info_error = "fatal_error"
    gemini.script(Reply.text(ANSWER), Reply.text(ANSWER))
    said = await _ask(bot, driver, slack, MEMBER)
    assert "users.info failed" in said and ANSWER not in said
    slack.users_info_error = None
    # Within the backoff after the failure: still refused, and users.info is not called.
    said = await _ask(bot, driver, slack, MEMBER, 1)
    assert "users.info failed" in said and ANSWER not in said
    assert len(slack.calls_to("users.info")) == 1
    assert gemini.requests == []


async def test_a_member_of_another_workspace_of_the_same_enterprise_org_is_answered(
    bot: RunningBot, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    team = f"T{uuid.uuid4().hex[:8].upper()}"
    driver = SlackDriver(bot.url, SECRET, team=team, slack=slack, enterprise="E_ACME")
    slack.people["U_ORG"] = SlackPerson(team_id="T_ACME_EU", enterprise_id="E_ACME")
    slack.people[PARTNER] = SlackPerson(team_id="TPARTNER", enterprise_id="E_OTHER")
    gemini.script(Reply.text(ANSWER), Reply.text("a second answer that must not happen"))
    assert ANSWER in await _ask(bot, driver, slack, "U_ORG")
    assert "ALLOW_EXTERNAL_USERS" in await _ask(bot, driver, slack, PARTNER, 1)
    assert len(gemini.requests) == 1


async def test_the_allow_settings_let_outsiders_and_guests_ask(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.people[PARTNER] = SlackPerson(team_id="TPARTNER")
    slack.people[GUEST] = SlackPerson(is_ultra_restricted=True)
    gemini.script(Reply.text(ANSWER), Reply.text(ANSWER))
    async with bot_for(allow_external_users=True, allow_guest_users=True) as bot:
        driver = SlackDriver(bot.url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}", slack=slack)
        assert ANSWER in await _ask(bot, driver, slack, PARTNER)
        assert ANSWER in await _ask(bot, driver, slack, GUEST, 1)
    assert len(gemini.requests) == 2


async def test_one_setting_lifts_only_its_own_refusal(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    slack.people[PARTNER] = SlackPerson(team_id="TPARTNER")
    slack.people[GUEST] = SlackPerson(is_restricted=True)
    gemini.script(Reply.text(ANSWER), Reply.text(ANSWER))
    async with bot_for(allow_guest_users=True) as bot:
        driver = SlackDriver(bot.url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}", slack=slack)
        assert ANSWER in await _ask(bot, driver, slack, GUEST)
        assert "ALLOW_EXTERNAL_USERS" in await _ask(bot, driver, slack, PARTNER, 1)
    async with bot_for(allow_external_users=True) as bot:
        driver = SlackDriver(bot.url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}", slack=slack)
        assert ANSWER in await _ask(bot, driver, slack, PARTNER, 2)
        assert "ALLOW_GUEST_USERS" in await _ask(bot, driver, slack, GUEST, 3)
    assert len(gemini.requests) == 2


async def test_a_fourth_question_past_a_limit_of_three_is_refused_while_another_user_is_answered(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(*[Reply.text(ANSWER)] * 5)
    async with bot_for(investigations_per_user_per_hour=3) as bot:
        driver = SlackDriver(bot.url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}", slack=slack)
        for n in range(3):
            assert ANSWER in await _ask(bot, driver, slack, REQUESTER, n)
        refused = await _ask(bot, driver, slack, REQUESTER, 3)
        assert len(gemini.requests) == 3
        assert ANSWER in await _ask(bot, driver, slack, MEMBER, 4)
    assert "INVESTIGATIONS_PER_USER_PER_HOUR=3" in refused and ANSWER not in refused
    assert "The next question is taken from " in refused and ":00 UTC" in refused
    assert len(gemini.requests) == 4


async def test_the_per_user_limit_is_shared_by_processes_and_never_overspent(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    """Six questions at once, half to each of two processes on one Redis: three start."""
    gemini.script(*[Reply.text(ANSWER)] * 6)
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    team = f"T{uuid.uuid4().hex[:8].upper()}"
    limit = {"investigations_per_user_per_hour": 3, "redis_prefix": prefix}
    async with bot_for(**limit) as one, bot_for(**limit) as two:
        drivers = [SlackDriver(b.url, SECRET, team=team, slack=slack) for b in (one, two)]
        where = [(_channel(), _ts(n)) for n in range(6)]
        await asyncio.gather(
            *(
                drivers[n % 2].mention("why?", user=REQUESTER, channel=channel, ts=root)
                for n, (channel, root) in enumerate(where)
            )
        )
        await settled(one)
        await settled(two)
    said = [_said(slack, channel, root) for channel, root in where]
    assert sum(ANSWER in s for s in said) == 3
    assert sum("INVESTIGATIONS_PER_USER_PER_HOUR=3" in s for s in said) == 3
    assert len(gemini.requests) == 3


async def test_a_full_channel_refuses_everyone_in_it_and_only_there(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(*[Reply.text(ANSWER)] * 4)
    channel = _channel()
    async with bot_for(investigations_per_channel_per_hour=2) as bot:
        driver = SlackDriver(bot.url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}", slack=slack)
        for n, user in enumerate(("U_A", "U_B", "U_C")):
            await driver.mention("why?", user=user, channel=channel, ts=_ts(n))
            await settled(bot)
        elsewhere = await _ask(bot, driver, slack, "U_C", 3)
    assert ANSWER in _said(slack, channel, _ts(1))
    refused = _said(slack, channel, _ts(2))
    assert "INVESTIGATIONS_PER_CHANNEL_PER_HOUR=2" in refused and ANSWER not in refused
    assert ANSWER in elsewhere
    assert len(gemini.requests) == 3


async def test_an_investigation_resumed_after_a_crash_is_not_counted_again(redis_url: str) -> None:
    """The worker counts a turn each time it runs it; a run after a crash is the same one."""
    redis = aioredis.from_url(redis_url)
    limits = AskingLimits(redis, per_user=2, per_channel=100, prefix=f"test-{uuid.uuid4().hex[:8]}")
    try:
        assert await limits.refusal("turn-1", "T1", "C1", REQUESTER) is None
        assert await limits.refusal("turn-1", "T1", "C1", REQUESTER) is None  # resumed
        assert await limits.refusal("turn-2", "T1", "C1", REQUESTER) is None
        refused = await limits.refusal("turn-3", "T1", "C1", REQUESTER)
        assert refused is not None and "INVESTIGATIONS_PER_USER_PER_HOUR=2" in refused
    finally:
        await redis.aclose()


# --- approvals follow the same rule ---------------------------------------------------------
async def _card(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> tuple[str, SlackMessage]:
    """A pending rollback's approval card, in a channel of the test's own."""
    channel = _channel()
    gemini.script(ROLLBACK, SAFE, ROLLBACK_PROPOSED)
    await driver.mention("fix checkout", ts=_ts(0), channel=channel, user=REQUESTER)
    await settled(bot)
    _answer, card = slack.thread(channel, _ts(0))
    return channel, card


def _request_id(card: SlackMessage) -> str:
    actions = next(b for b in card.blocks if b["type"] == "actions")
    return str(next(e["value"] for e in actions["elements"] if e["action_id"] == "approve_action"))


@pytest.mark.parametrize("action_id", ["approve_action", "reject_action"])
async def test_a_guest_approver_s_click_is_refused_like_an_unauthorised_approver_s(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
    action_id: str,
) -> None:
    channel, card = await _card(bot, driver, slack, gemini)
    request_id = _request_id(card)
    slack.people[APPROVER] = SlackPerson(is_restricted=True)  # in ACTION_APPROVERS, a guest
    await driver.click(action_id, request_id, user=APPROVER, channel=channel, message_ts=card.ts)
    await settled(bot)

    assert kube.writes == []
    (told,) = [e for e in slack.ephemeral if e["user"] == APPROVER]
    assert "ALLOW_GUEST_USERS=true" in told["text"]
    actions = bot.services.cards.actions
    assert actions is not None
    request = await actions.store.get(request_id)
    assert request.status == "pending_approval"
    audit = await audit_entries(actions.store, request_id)
    assert (audit[-1]["event"], audit[-1]["actor"]) == ("approval_denied", APPROVER)


async def test_a_slack_connect_approver_s_click_is_refused_and_a_member_s_executes(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
) -> None:
    channel, card = await _card(bot, driver, slack, gemini)
    request_id = _request_id(card)
    slack.people[SECOND_APPROVER] = SlackPerson(team_id="TPARTNER")
    await driver.click(
        "approve_action", request_id, user=SECOND_APPROVER, channel=channel, message_ts=card.ts
    )
    await settled(bot)
    assert kube.writes == []
    assert "ALLOW_EXTERNAL_USERS=true" in slack.ephemeral[-1]["text"]
    # The click's user.team_id said so: users.info was not asked about them.
    assert SECOND_APPROVER not in [c.args["user"] for c in slack.calls_to("users.info")]

    await driver.click(
        "approve_action", request_id, user=APPROVER, channel=channel, message_ts=card.ts
    )
    await settled(bot)
    assert len(kube.writes) == 1
