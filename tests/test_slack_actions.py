"""Approval cards in Slack: posted after the answer, clicked, updated in place, expired."""

import time
import uuid
from pathlib import Path

import pytest

from bot.process.server import RunningBot
from sandbox import GeminiSimulator, Reply
from sandbox.kubernetes import KubernetesSimulator
from sandbox.slack import SlackDriver, SlackMessage, SlackSimulator
from tests.gates_fixtures import (
    APPROVER,
    OUTSIDER,
    REQUESTER,
    SAFE,
    SECOND_APPROVER,
    audit_entries,
    kill_mid_approval,
    until,
)
from tests.proposals import ROLLBACK, ROLLBACK_PROPOSED, SCALE_UP, propose
from tests.slack_fixtures import SECRET, BotFactory, settled

ROOT = "1700000000.000100"


async def _rollback_card(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> SlackMessage:
    """The agent proposes a rollback; rule gates and judge allow it; the card is posted."""
    gemini.script(
        ROLLBACK,
        SAFE,  # the judge
        ROLLBACK_PROPOSED,
    )
    await driver.mention("fix checkout", ts=ROOT, user=REQUESTER)
    await settled(bot)
    _answer, posted = slack.thread("C1", ROOT)
    return posted


@pytest.fixture
async def card(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> SlackMessage:
    return await _rollback_card(bot, driver, slack, gemini)


def _buttons(message: SlackMessage) -> dict[str, dict[str, object]]:
    actions = next(b for b in message.blocks if b["type"] == "actions")
    return {e["action_id"]: e for e in actions["elements"]}


def _status_line(message: SlackMessage) -> str:
    """The card's lines under the gate decisions: status, rollout, notes."""
    gates = next(
        i for i, b in enumerate(message.blocks) if "*judge*" in str(b) or "*policy*" in str(b)
    )
    return "\n".join(
        b["elements"][0]["text"] for b in message.blocks[gates + 1 :] if b["type"] == "context"
    )


async def test_a_pending_proposal_is_a_card_with_approve_and_reject(card: SlackMessage) -> None:
    buttons = _buttons(card)
    assert set(buttons) == {"approve_action", "reject_action"}
    assert (
        buttons["approve_action"]["style"] == "primary" and "confirm" in buttons["approve_action"]
    )
    assert buttons["reject_action"]["style"] == "danger"
    text = str(card.blocks)
    assert "roll back shop/payment-api" in text
    assert "revision 3 (registry/payment-api:1.42.0) → 2 (registry/payment-api:1.41.3)" in text
    assert "*blast_radius*" in text and "*judge*" in text


async def test_approve_changes_the_deployment_once_and_updates_the_card(
    bot: RunningBot,
    card: SlackMessage,
    driver: SlackDriver,
    slack: SlackSimulator,
    kube: KubernetesSimulator,
) -> None:
    request_id = str(_buttons(card)["approve_action"]["value"])
    for user in (APPROVER, APPROVER, SECOND_APPROVER):  # a double click and a second approver
        await driver.click(
            "approve_action", request_id, user=user, channel="C1", message_ts=card.ts
        )
        await settled(bot)
    edits_after = card.edits
    await driver.click(
        "approve_action", request_id, user=APPROVER, channel="C1", message_ts=card.ts
    )
    await settled(bot)  # a replayed payload

    assert len(kube.writes) == 1
    assert "Succeeded (approved by <@U_APPROVER>): rolled back shop/payment-api to revision 2" in (
        _status_line(card)
    )
    assert _status_line(card).endswith(":large_green_circle: rolled out: 4/4 available")
    assert not any(b["type"] == "actions" for b in card.blocks)
    assert card.edits == edits_after
    refusals = [e["text"] for e in slack.ephemeral]
    assert refusals == ["Not approved: already succeeded."] * 3


async def test_a_card_update_from_an_older_copy_of_the_request_ends_showing_the_newest(
    bot: RunningBot, card: SlackMessage, driver: SlackDriver
) -> None:
    """Two processes update one card (the executor shows the success, another process's
    follower the rollout): an update built from the older copy may land last."""
    request_id = str(_buttons(card)["approve_action"]["value"])
    await driver.click(
        "approve_action", request_id, user=APPROVER, channel="C1", message_ts=card.ts
    )
    await settled(bot)
    cards = bot.services.cards
    assert cards.actions is not None
    followed = await cards.actions.store.get(request_id)
    older = followed.model_copy(update={"rollout": None, "version": followed.version - 1})

    await cards._show(older)  # the executor's late "Succeeded"

    assert _status_line(card).endswith(":large_green_circle: rolled out: 4/4 available")


async def test_an_unauthorised_click_gets_an_ephemeral_refusal_and_the_card_is_untouched(
    bot: RunningBot,
    card: SlackMessage,
    driver: SlackDriver,
    slack: SlackSimulator,
    kube: KubernetesSimulator,
) -> None:
    request_id = str(_buttons(card)["approve_action"]["value"])
    edits = card.edits
    await driver.click(
        "approve_action", request_id, user=OUTSIDER, channel="C1", message_ts=card.ts
    )
    await settled(bot)

    (refusal,) = slack.ephemeral
    assert refusal["user"] == OUTSIDER
    assert "you are not an approver" in refusal["text"]
    assert card.edits == edits and kube.writes == []


async def test_reject_updates_the_card(
    bot: RunningBot, card: SlackMessage, driver: SlackDriver, kube: KubernetesSimulator
) -> None:
    request_id = str(_buttons(card)["reject_action"]["value"])
    await driver.click("reject_action", request_id, user=APPROVER, channel="C1", message_ts=card.ts)
    await settled(bot)

    assert _status_line(card) == ":no_entry_sign: Rejected by <@U_APPROVER>"
    assert kube.writes == []


async def test_an_expired_card_shows_as_expired(
    bot: RunningBot, card: SlackMessage, kube: KubernetesSimulator
) -> None:
    actions = bot.services.cards.actions
    assert actions is not None
    request_id = str(_buttons(card)["approve_action"]["value"])
    await actions.store.update(request_id, "test", "test", "window passed", expires_at=time.time())

    assert await bot.services.cards.reconcile() == 1
    assert _status_line(card).startswith(":hourglass: Expired")
    assert kube.writes == []


async def test_a_refused_proposal_gets_a_reason_and_no_buttons(
    bot: RunningBot, driver: SlackDriver, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    gemini.script(
        propose("scale", "kube-system", "coredns", replicas=4, reason="more DNS capacity"),
        Reply.text("That was refused."),
    )
    await driver.mention("scale dns", ts=ROOT)
    await settled(bot)

    _, refused = slack.thread("C1", ROOT)
    assert not any(b["type"] == "actions" for b in refused.blocks)
    assert "Refused by policy: namespace kube-system is protected" in str(refused.blocks)


async def test_a_member_of_the_approver_group_may_approve_and_membership_is_cached(
    bot_for: BotFactory,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
) -> None:
    slack.usergroups["S_ONCALL"] = ["U_GROUPIE"]
    async with bot_for(action_approvers="", action_approver_group="S_ONCALL") as running:
        driver = SlackDriver(running.url, SECRET, team="TGROUP")
        gemini.script(SCALE_UP, SAFE, Reply.text("Proposed a scale-up."))
        await driver.mention("scale up", ts=ROOT)
        await settled(running)
        card = slack.thread("C1", ROOT)[-1]
        request_id = str(_buttons(card)["approve_action"]["value"])
        await driver.click(
            "approve_action", request_id, user=OUTSIDER, channel="C1", message_ts=card.ts
        )
        await driver.click(
            "approve_action", request_id, user="U_GROUPIE", channel="C1", message_ts=card.ts
        )
        await settled(running)

    assert kube.deployments[("shop", "payment-api")]["spec"]["replicas"] == 6
    assert len(slack.calls_to("usergroups.users.list")) == 1
    # Bolt's authorize: once, however many requests (the readiness probe's call is apart).
    assert len([c for c in slack.calls_to("auth.test") if "team_id" in c.args]) == 1


async def test_a_click_from_another_message_or_channel_is_refused_and_nothing_changes(
    bot: RunningBot,
    card: SlackMessage,
    driver: SlackDriver,
    slack: SlackSimulator,
    kube: KubernetesSimulator,
) -> None:
    answer = slack.thread("C1", ROOT)[0]
    request_id = str(_buttons(card)["approve_action"]["value"])
    edits = (answer.edits, card.edits)
    for channel, ts in (("C1", answer.ts), ("C2", card.ts)):
        await driver.click(
            "approve_action", request_id, user=APPROVER, channel=channel, message_ts=ts
        )
        await driver.click(
            "reject_action", request_id, user=APPROVER, channel=channel, message_ts=ts
        )
    await settled(bot)

    assert [e["text"] for e in slack.ephemeral] == [
        "This button is not on this request's approval card; nothing was done."
    ] * 4
    assert (answer.edits, card.edits) == edits and kube.writes == []
    actions = bot.services.cards.actions
    assert actions is not None
    assert (await actions.store.get(request_id)).status == "pending_approval"
    refused = [
        e["note"].split(";")[0]
        for e in await audit_entries(actions.store, request_id)
        if e["event"] == "click_refused" and e["actor"] == APPROVER
    ]
    assert refused == [f"clicked on C1/{answer.ts}"] * 2 + [f"clicked on C2/{card.ts}"] * 2


async def test_an_approver_resets_an_open_breaker_from_its_refusal_card(
    bot: RunningBot,
    driver: SlackDriver,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
) -> None:
    actions = bot.services.cards.actions
    assert actions is not None
    for i in range(3):
        await actions.breaker.record("shop/payment-api", False, f"act-{i}")
    gemini.script(SCALE_UP, Reply.text("That was refused."))
    await driver.mention("scale up", ts=ROOT, user=REQUESTER)
    await settled(bot)
    refused = slack.thread("C1", ROOT)[-1]
    reset = _buttons(refused)["reset_breaker"]
    for user in (OUTSIDER, APPROVER):
        await driver.click(
            "reset_breaker", str(reset["value"]), user=user, channel="C1", message_ts=refused.ts
        )
        await settled(bot)

    (denied,) = slack.ephemeral
    assert (denied["user"], denied["text"]) == (
        OUTSIDER,
        "Not reset: only an approver may reset the circuit breaker "
        "(ACTION_APPROVERS / ACTION_APPROVER_GROUP).",
    )
    assert not (await actions.breaker.state("shop/payment-api")).open
    assert not any(b["type"] == "actions" for b in refused.blocks)
    assert "breaker for shop/payment-api reset by <@U_APPROVER>; ask again" in str(refused.blocks)
    audited = [(e["event"], e["actor"]) for e in await audit_entries(actions.store)]
    assert ("breaker_reset_denied", OUTSIDER) in audited
    assert ("breaker_reset", APPROVER) in audited


async def test_a_killed_approval_is_settled_after_restart_and_its_card_tells_the_truth(
    bot_for: BotFactory,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    kube: KubernetesSimulator,
    redis_url: str,
    tmp_path: Path,
) -> None:
    # 3 s lease ≥ 6 × KUBE_TIMEOUT; this bot is the process that comes up after the crash.
    async with bot_for(kube_timeout=0.5, action_lease="3s", reconcile_interval="1s") as running:
        driver = SlackDriver(running.url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}")
        card = await _rollback_card(running, driver, slack, gemini)
        actions = running.services.cards.actions
        assert actions is not None
        kube.faults.after_write = "late"  # applied; the answer is held until the kill
        await kill_mid_approval(
            redis_url=redis_url,
            prefix=actions.store.prefix,
            kubeconfig=tmp_path / "kubeconfig",
            request_id=str(_buttons(card)["approve_action"]["value"]),
            lease_s=actions.store.lease_s,
            at=lambda: len(kube.writes) == 1,
        )
        await until(lambda: "rolled out" in _status_line(card), "the card to show the rollout")

    assert _status_line(card).split("\n") == [
        ":white_check_mark: Succeeded (approved by <@U_APPROVER>): roll back shop/payment-api "
        "to revision 2: the cluster shows the change (settled after interruption)",
        ":large_green_circle: rolled out: 4/4 available",
    ]
    assert not any(b["type"] == "actions" for b in card.blocks)


async def test_a_proposal_whose_judge_outlasts_the_action_lease_is_still_decided(
    bot_for: BotFactory, slack: SlackSimulator, gemini: GeminiSimulator
) -> None:
    """The reconciler refuses a proposal left undecided by a dead run, not one a live run is
    still deciding: the turn's run holds its thread, so a slow judge's verdict stands."""
    gemini.script(
        ROLLBACK,
        Reply(parts=SAFE.parts, delay_s=5.0),  # the judge: slower than lease + one period
        ROLLBACK_PROPOSED,
    )
    async with bot_for(kube_timeout=0.5, action_lease="3s", reconcile_interval="1s") as running:
        driver = SlackDriver(running.url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}")
        await driver.mention("fix checkout", ts=ROOT, user=REQUESTER)
        await settled(running, 30)

    answer, card = slack.thread("C1", ROOT)
    assert "needs your approval" in answer.text
    assert "approve_action" in _buttons(card)
