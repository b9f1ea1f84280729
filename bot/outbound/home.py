"""The App Home tab: for the person looking, what waits for them and what the bot did.

Published (`views.publish`) when someone opens the tab (`app_home_opened`). Everything on it
belongs to a thread, and a thread is shown only to members of its channel (read with
`users.conversations`, the person's own channels): the privacy rule of Steps and `/rubric
status`, where what is shown is what the channel already saw. Approvals are listed only to
those who may approve them, with a link to the card: acting happens on the card, where the
click is bound to the request and counted once.

The one thing acted on here is the runtime stop of all actions (`STOP_ACTIONS` /
`START_ACTIONS`): approvers see the button, Slack asks them to confirm, and every process's
kill-switch gate refuses from its next decision on (gates/rules/kill_switch.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound.blocks import button, confirm, context, section
from bot.outbound.cards import ApproverGroup
from bot.outbound.feedback import Feedback
from bot.outbound.mrkdwn import escape
from bot.outbound.posts import pages
from gates.breaker import GLOBAL
from gates.model import ActionRequest
from gates.pipeline import ActionPipeline
from graph.action_claims import true_state

log = logging.getLogger(__name__)

MAX_PAGES = 10  # of users.conversations: 2,000 channels
MAX_LISTED = 10  # items per section
MAX_REQUESTS = 200  # requests read for one view
MAX_AUDIT = 500  # newest audit entries read for recent actions
TERMINAL = ("succeeded", "failed", "aborted", "rejected", "refused", "expired")
STOP_ACTIONS = "stop_actions"
START_ACTIONS = "start_actions"


def _channel(thread_key: str) -> str:
    return thread_key.split(":")[1] if thread_key.count(":") >= 2 else ""


@dataclass(eq=False)
class Home:
    client: AsyncWebClient
    actions: ActionPipeline | None
    approvers: ApproverGroup
    feedback: Feedback

    async def opened(self, user: str, note: str = "") -> None:
        """Publish the tab for `user`; `note` (what their click did) is shown at the top."""
        channels: set[str] = set()  # the person's own
        try:
            first = await self.client.users_conversations(
                user=user, types="public_channel,private_channel", exclude_archived=True, limit=200
            )
            async for page in pages(first, MAX_PAGES):
                channels |= {c["id"] for c in page.get("channels") or []}
        except SlackApiError as exc:  # not readable: show nothing of any thread
            log.warning("cannot read %s's channels: %s", user, exc.response.get("error"))
            channels = set()
        blocks = await self.blocks(user, channels)
        if note:
            blocks.insert(1, context(escape(note)))
        await self.client.views_publish(user_id=user, view={"type": "home", "blocks": blocks})

    async def _requests(self) -> list[ActionRequest]:
        """Open requests and those in the audit stream, newest first."""
        if self.actions is None:
            return []
        store = self.actions.store
        due, audit = await store.due(float("inf")), await store.recent_audit(MAX_AUDIT)
        ids = list(dict.fromkeys([*due, *(e["request_id"] for e in audit if e.get("request_id"))]))
        found = await store.get_many(ids[:MAX_REQUESTS])
        return sorted(found, key=lambda r: -r.created_at)

    async def blocks(self, user: str, channels: set[str]) -> list[dict[str, Any]]:
        requests = [r for r in await self._requests() if _channel(r.thread_key) in channels]
        in_group = await self.approvers.contains(user)
        blocks: list[dict[str, Any]] = [
            {"type": "header", "text": {"type": "plain_text", "text": "tracegate"}},
            context("What waits for you and what the bot did, in channels you are in."),
        ]
        blocks += await self._switch(user, in_group)
        blocks += await self._approvals(user, in_group, requests)
        blocks += await self._breakers(user, in_group, requests)
        blocks += self._recent(requests)
        blocks += await self._wrong_answers(channels)
        return blocks[:100]

    async def _switch(self, user: str, in_group: bool) -> list[dict[str, Any]]:
        """Whether actions run, and (approvers only) the button that stops or starts them."""
        if self.actions is None:
            return []
        stopped = await self.actions.switch.stopped()
        ceiling = self.actions.policy.actions_enabled
        if stopped is not None:
            state = f":octagonal_sign: *Actions are stopped*: {escape(stopped.describe())}."
        elif ceiling:
            state = ":large_green_circle: *Actions run* once an approver approves them."
        else:
            state = "*Actions are dry runs only*: ACTIONS_ENABLED is off (Slack cannot lift it)."
        block = section(state)
        if self.actions.is_approver(user, in_group):
            if stopped is None:
                switch = button("Stop all actions", STOP_ACTIONS, "stop", "danger")
                switch["confirm"] = confirm(
                    "Stop all actions?",
                    "Every process refuses new proposals and approved actions from now on, "
                    "until an approver starts them again.",
                    "Stop actions",
                )
            else:
                switch = button("Start actions", START_ACTIONS, "start", "primary")
                switch["confirm"] = confirm(
                    "Start actions again?",
                    "Approved actions run again"
                    + ("." if ceiling else " as dry runs (ACTIONS_ENABLED is off)."),
                    "Start actions",
                )
            block["accessory"] = switch
        return [block]

    async def switched(self, user: str, in_group: bool, value: str, refusal: str | None) -> str:
        """The Stop / Start button was clicked (and confirmed): what to tell the user.
        `refusal`: why this person may not act at all (a guest, a Slack Connect user)."""
        if self.actions is None:
            return "Actions are not configured on this bot (KUBECONFIG)."
        if refusal is not None:
            event = "actions_stop_denied" if value == "stop" else "actions_start_denied"
            await self.actions.store.audit_event(event, user, refusal, GLOBAL)
            return refusal
        if value == "stop":
            _, message = await self.actions.stop_actions(user, in_group, "stopped from App Home")
        else:
            _, message = await self.actions.start_actions(user, in_group)
        return message

    async def _link(self, channel: str, ts: str) -> str | None:
        try:
            found = await self.client.chat_getPermalink(channel=channel, message_ts=ts)
        except SlackApiError:
            return None
        return str(found["permalink"])

    async def _approvals(
        self, user: str, in_group: bool, requests: list[ActionRequest]
    ) -> list[dict[str, Any]]:
        waiting = [
            r
            for r in requests
            if r.status == "pending_approval"
            and self.actions is not None
            and self.actions.may_approve(r, user, in_group) is None
        ][:MAX_LISTED]
        lines = []
        for r in waiting:
            link = await self._link(r.card.channel, r.card.ts) if r.card else None
            lines.append(
                f"• `{escape(r.id)}` {escape(r.describe())} — in <#{_channel(r.thread_key)}>, "
                f"asked by <@{escape(r.requester)}>; approve or reject on "
                + (f"<{link}|its card>" if link else "its card")
            )
        return [section("*Waiting for your approval*\n" + ("\n".join(lines) or "_Nothing._"))]

    async def _breakers(
        self, user: str, in_group: bool, requests: list[ActionRequest]
    ) -> list[dict[str, Any]]:
        if self.actions is None:
            return []
        scopes = list(dict.fromkeys([GLOBAL, *(r.target for r in requests)]))[:MAX_LISTED]
        open_ = [s for s in [await self.actions.breaker.state(scope) for scope in scopes] if s.open]
        if not open_:
            return [section("*Circuit breakers*\n_All closed._")]
        may_reset = self.actions.is_approver(user, in_group)
        lines = [
            f"• {'the cluster' if s.scope == GLOBAL else escape(s.scope)}: open "
            f"({escape(s.reason)})"
            for s in open_
        ]
        hint = "Reset from a card it refused." if may_reset else "An approver can reset it."
        return [section("*Circuit breakers*\n" + "\n".join(lines)), context(hint)]

    def _recent(self, requests: list[ActionRequest]) -> list[dict[str, Any]]:
        done = [r for r in requests if r.status in TERMINAL][:MAX_LISTED]
        lines = [
            f"• {escape(r.describe())} — {escape(true_state(r))} (<#{_channel(r.thread_key)}>)"
            for r in done
        ]
        return [section("*Recent actions*\n" + ("\n".join(lines) or "_None._"))]

    async def _wrong_answers(self, channels: set[str]) -> list[dict[str, Any]]:
        answers = [
            thread for thread, _ in await self.feedback.negative() if _channel(thread) in channels
        ][:MAX_LISTED]
        lines = []
        for thread in answers:
            _, channel, ts = thread.split(":", 2)
            link = await self._link(channel, ts)
            lines.append(
                f"• <{link}|a thread> in <#{channel}>" if link else f"• a thread in <#{channel}>"
            )
        return [section("*Answers marked wrong*\n" + ("\n".join(lines) or "_None._"))]
