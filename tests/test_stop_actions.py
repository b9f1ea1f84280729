"""Stop everything, now: an approver stops all actions from the App Home tab (Slack asks
them to confirm), every decision refuses at the kill-switch gate naming who and when, and
ACTIONS_ENABLED stays the ceiling Slack cannot lift. Through the real bot and simulators."""

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.process.server import RunningBot
from sandbox import GeminiSimulator
from sandbox.fleet import Fleet
from sandbox.kubernetes import KubernetesSimulator, write_kubeconfig
from sandbox.slack import SlackDriver, SlackMessage, SlackPerson, SlackSimulator
from tests.fleet_fixtures import approval_card, approve_value
from tests.gates_fixtures import APPROVER, REQUESTER, SAFE, audit_entries, until
from tests.proposals import ROLLBACK, ROLLBACK_PROPOSED
from tests.slack_fixtures import SECRET, BotFactory, settled

ROOT = "1700000000.000100"


async def _card(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> SlackMessage:
    gemini.script(ROLLBACK, SAFE, ROLLBACK_PROPOSED)
    await driver.mention("fix checkout", ts=ROOT, user=REQUESTER)
    await settled(bot)
    _answer, card = slack.thread("C1", ROOT)
    return card


async def _approve(
    bot: RunningBot, driver: SlackDriver, card: SlackMessage, user: str = APPROVER
) -> None:
    value = approve_value(card)
    await driver.click("approve_action", value, user=user, channel="C1", message_ts=card.ts)
    await settled(bot)


def _switch_button(slack: SlackSimulator, user: str) -> dict[str, Any] | None:
    for block in slack.homes[user]["blocks"]:
        accessory = block.get("accessory") or {}
        if accessory.get("action_id") in ("stop_actions", "start_actions"):
            return dict(accessory)
    return None


async def _home(bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, user: str) -> str:
    await driver.home_opened(user)
    await settled(bot)
    return "\n".join(str(b.get("text", {}).get("text", "")) for b in slack.homes[user]["blocks"])


async def _audit_events(bot: RunningBot) -> list[dict[str, str]]:
    actions = bot.services.cards.actions
    assert actions is not None
    return await audit_entries(actions.store)


async def test_an_approver_stops_all_actions_after_confirming_and_an_approval_is_refused(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
) -> None:
    card = await _card(bot, driver, slack, gemini)
    await _home(bot, driver, slack, APPROVER)
    stop = _switch_button(slack, APPROVER)
    assert stop is not None and stop["action_id"] == "stop_actions"
    assert stop["style"] == "danger" and stop["confirm"]["confirm"]["text"] == "Stop actions"

    await driver.home_click("stop_actions", user=APPROVER)
    await settled(bot)
    await _approve(bot, driver, card)

    assert kube.writes == []
    status = str(card.blocks)
    assert (
        ":no_entry: Aborted (approved by <@U_APPROVER>): not executed — kill_switch: all "
        "actions were stopped by U_APPROVER at "
    ) in status
    home = "\n".join(
        str(b.get("text", {}).get("text", "")) for b in slack.homes[APPROVER]["blocks"]
    )
    assert "*Actions are stopped*: all actions were stopped by U_APPROVER" in home
    (stopped,) = [e for e in await _audit_events(bot) if e["event"] == "actions_stopped"]
    assert stopped["actor"] == APPROVER


async def test_a_proposal_made_while_actions_are_stopped_is_refused_at_the_kill_switch(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    await _home(bot, driver, slack, APPROVER)
    await driver.home_click("stop_actions", user=APPROVER)
    await settled(bot)

    card = await _card(bot, driver, slack, gemini)

    assert not any(b["type"] == "actions" for b in card.blocks)  # no Approve button
    assert "kill_switch: all actions were stopped by U_APPROVER at " in str(card.blocks)


async def test_someone_who_may_not_approve_is_not_offered_the_stop_and_a_forged_click_is_refused(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
) -> None:
    await _home(bot, driver, slack, REQUESTER)
    assert _switch_button(slack, REQUESTER) is None

    await driver.home_click("stop_actions", user=REQUESTER, forged_value="stop")
    await settled(bot)

    assert "only an approver may stop actions" in str(slack.homes[REQUESTER]["blocks"])
    (denied,) = [e for e in await _audit_events(bot) if e["event"] == "actions_stop_denied"]
    assert denied["actor"] == REQUESTER
    card = await _card(bot, driver, slack, gemini)
    await _approve(bot, driver, card)
    assert len(kube.writes) == 1  # actions still run


async def test_a_guest_approver_cannot_stop_actions(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator
) -> None:
    slack.people[APPROVER] = SlackPerson(is_restricted=True)

    await driver.home_click("stop_actions", user=APPROVER, forged_value="stop")
    await settled(bot)

    actions = bot.services.cards.actions
    assert actions is not None
    assert await actions.switch.stopped() is None
    (denied,) = [e for e in await _audit_events(bot) if e["event"] == "actions_stop_denied"]
    assert denied["actor"] == APPROVER


async def test_started_again_an_approval_runs(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
) -> None:
    await _home(bot, driver, slack, APPROVER)
    await driver.home_click("stop_actions", user=APPROVER)
    await settled(bot)
    start = _switch_button(slack, APPROVER)
    assert start is not None and start["action_id"] == "start_actions" and "confirm" in start

    await driver.home_click("start_actions", user=APPROVER)
    await settled(bot)
    card = await _card(bot, driver, slack, gemini)
    await _approve(bot, driver, card)

    assert len(kube.writes) == 1
    events = [e["event"] for e in await _audit_events(bot)]
    assert events.index("actions_stopped") < events.index("actions_started")


async def test_starting_from_slack_does_not_lift_actions_enabled_off(
    bot_for: BotFactory,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
) -> None:
    async with bot_for(actions_enabled=False) as bot:
        driver = SlackDriver(bot.url, SECRET, team="TOFF", slack=slack)
        home = await _home(bot, driver, slack, APPROVER)
        assert "ACTIONS_ENABLED is off" in home
        await driver.home_click("stop_actions", user=APPROVER)
        await settled(bot)
        await driver.home_click("start_actions", user=APPROVER)
        await settled(bot)
        card = await _card(bot, driver, slack, gemini)
        await _approve(bot, driver, card)

    assert kube.writes == []  # a dry run only
    assert "dry run" in str(card.blocks).lower()


async def test_a_stop_in_one_process_refuses_an_approval_clicked_in_another(
    fleet_for: Callable[..., Fleet],
    kube: KubernetesSimulator,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    tmp_path: Path,
) -> None:
    """Two `tracegate serve` processes on one Redis: the approver stops actions through the
    first one's App Home, and the approval clicked at once (no wait) through the second is
    refused at its kill-switch gate: the stop takes effect from the next decision of every
    process, with no cache to expire."""
    fleet = fleet_for(
        KUBECONFIG=str(write_kubeconfig(tmp_path / "kubeconfig", kube.url)),
        ACTIONS_ENABLED="true",
        ACTION_APPROVERS=APPROVER,
    )
    first, second = fleet.serve(), fleet.serve()
    await first.ready()
    await second.ready()
    gemini.script(ROLLBACK, SAFE, ROLLBACK_PROPOSED)
    team = f"T{uuid.uuid4().hex[:8].upper()}"
    at_first = SlackDriver(first.url, SECRET, team=team, slack=slack)
    at_second = SlackDriver(second.url, SECRET, team=team, slack=slack)
    root = slack.new_ts()
    await at_first.mention("fix checkout", ts=root, user=REQUESTER)

    posted, request_id = await approval_card(slack, root, fleet)
    await at_first.home_opened(APPROVER)
    await until(lambda: "stop_actions" in str(slack.homes.get(APPROVER)), "the Home tab", 20)
    status, _ = await at_first.home_click("stop_actions", user=APPROVER)
    assert status == 200
    await until(lambda: "Actions are stopped" in str(slack.homes[APPROVER]), "the stop", 20)

    await at_second.click(
        "approve_action", request_id, user=APPROVER, channel="C1", message_ts=posted.ts
    )
    await until(lambda: ":no_entry: Aborted" in str(posted.blocks), "the approval's outcome", 20)

    assert "not executed — kill_switch: all actions were stopped by U_APPROVER at " in str(
        posted.blocks
    )
    assert kube.writes == []
