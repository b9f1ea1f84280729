"""Approval cards: posted under the answer, updated in place, expired when stale."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks import card_blocks, section, steps_blocks
from bot.mrkdwn import escape
from bot.threads import ThreadMemory, in_channel, thread_key
from gates.model import ActionRequest
from gates.pipeline import ActionPipeline
from gates.store import RequestNotFound, TransitionConflict

log = logging.getLogger(__name__)


@dataclass
class ApproverGroup:
    """Members of ACTION_APPROVER_GROUP, cached (usergroups.users.list is rate-limited)."""

    client: AsyncWebClient
    group: str | None
    ttl_s: float
    _members: frozenset[str] = field(default=frozenset())
    _fetched_at: float = field(default=float("-inf"))

    async def contains(self, user: str) -> bool:
        if not self.group:
            return False
        if time.monotonic() - self._fetched_at > self.ttl_s:
            try:
                response = await self.client.usergroups_users_list(usergroup=self.group)
                self._members = frozenset(response.get("users") or [])
                self._fetched_at = time.monotonic()
            except SlackApiError as exc:
                log.warning("cannot list ACTION_APPROVER_GROUP %s: %s", self.group, exc)
        return user in self._members


@dataclass(frozen=True)
class Click:
    """Where a button was clicked, as Slack's signed payload says: the message's thread."""

    team: str
    channel: str
    thread_ts: str


class Cards:
    def __init__(
        self,
        client: AsyncWebClient,
        actions: ActionPipeline | None,
        memory: ThreadMemory,
        approvers: ApproverGroup,
        grafana_url: str | None,
        datasource: str,
    ) -> None:
        self.client = client
        self.actions = actions
        self.memory = memory
        self.approvers = approvers
        self.grafana_url = grafana_url
        self.datasource = datasource

    @property
    def dry_run(self) -> bool:
        return self.actions is None or not self.actions.policy.actions_enabled

    def _blocks(self, request: ActionRequest) -> list[dict[str, object]]:
        return card_blocks(request, self.grafana_url, self.datasource, self.dry_run)

    async def requests(self, request_ids: list[str]) -> list[ActionRequest]:
        """The turn's proposals as stored now (none when actions are not configured)."""
        if self.actions is None:
            return []
        return [await self.actions.store.get(request_id) for request_id in request_ids]

    async def post(self, channel: str, thread_ts: str, request_ids: list[str]) -> None:
        """One card per proposal of the turn: buttons if pending, a reason if refused."""
        for request in await self.requests(request_ids):
            posted = await self.client.chat_postMessage(
                channel=channel,
                thread_ts=thread_ts,
                text=escape(
                    f"Proposed action: {request.describe()} ({request.status.replace('_', ' ')})"
                ),
                blocks=self._blocks(request),
            )
            if request.status == "pending_approval":
                await self.memory.remember_card(
                    request.id, channel, str(posted["ts"]), request.expires_at
                )

    async def _show(self, request: ActionRequest, channel: str, ts: str) -> None:
        await self.client.chat_update(
            channel=channel,
            ts=ts,
            text=escape(f"{request.describe()}: {request.status.replace('_', ' ')}"),
            blocks=self._blocks(request),
        )

    async def _tell(self, channel: str, user: str, text: str) -> None:
        await self.client.chat_postEphemeral(channel=channel, user=user, text=escape(text))

    async def approve(self, request_id: str, user: str, channel: str, message_ts: str) -> None:
        if self.actions is None:
            await self._tell(channel, user, "Actions are not configured on this bot (KUBECONFIG).")
            return
        in_group = await self.approvers.contains(user)

        async def executing(request: ActionRequest) -> None:
            await self._show(request, channel, message_ts)

        result = await self.actions.approve(
            request_id, user, in_approver_group=in_group, on_approved=executing
        )
        if result.verdict in ("denied", "already_handled", "not_found"):
            await self._tell(channel, user, f"Not approved: {result.message}.")
            return
        if result.request is not None:
            await self._show(result.request, channel, message_ts)
            await self.memory.forget_card_expiry(request_id)

    async def reject(self, request_id: str, user: str, channel: str, message_ts: str) -> None:
        if self.actions is None:
            return
        in_group = await self.approvers.contains(user)
        result = await self.actions.reject(
            request_id, user, "rejected in Slack", in_approver_group=in_group
        )
        if result.verdict != "rejected" or result.request is None:
            await self._tell(channel, user, f"Not rejected: {result.message}.")
            return
        await self._show(result.request, channel, message_ts)
        await self.memory.forget_card_expiry(request_id)

    async def expire_due(self) -> int:
        """Mark cards whose approval window passed as expired; returns how many."""
        if self.actions is None:
            return 0
        expired = 0
        for request_id in await self.memory.cards_due(time.time()):
            await self.memory.forget_card_expiry(request_id)
            try:
                request = await self.actions.store.transition(
                    request_id,
                    "expired",
                    "tracegate",
                    "approval window passed",
                    expect="pending_approval",
                )
            except (TransitionConflict, RequestNotFound):
                continue  # handled meanwhile, or gone
            where = await self.memory.card(request_id)
            if where is not None:
                await self._show(request, *where)
                expired += 1
        return expired

    async def show_steps(self, correlation_id: str, user: str, clicked: Click) -> None:
        """The run's steps, to whoever clicks Steps under that answer, and nowhere else."""
        saved = await self.memory.steps(correlation_id)
        if saved is None:
            blocks = [section("The steps of this answer are no longer kept.")]
        elif not in_channel(saved[0], clicked.team, clicked.channel):
            blocks = [section("That answer is in another channel: ask in that channel.")]
        elif saved[0] != thread_key(clicked.team, clicked.channel, clicked.thread_ts):
            blocks = [section("Those steps belong to another answer: click Steps under it.")]
        else:
            blocks = steps_blocks(saved[1])
        await self.client.chat_postEphemeral(
            channel=clicked.channel, user=user, text="How this answer was reached", blocks=blocks
        )
