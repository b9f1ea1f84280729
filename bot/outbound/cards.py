"""Approval cards: posted under the answer, bound to their message, updated in place."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound.blocks import card_blocks, section, steps_blocks
from bot.outbound.mrkdwn import escape
from bot.outbound.posts import post_once
from bot.process.jobs import Jobs
from bot.turn.access import Access, Asker, Cached
from bot.turn.executions import Executions
from bot.turn.threads import ThreadMemory, in_channel, thread_key
from gates.breaker import GLOBAL
from gates.model import ActionRequest, CardLocation
from gates.pipeline import SYSTEM, ActionPipeline
from gates.reconciler import Reconciler, ThreadBusy
from gates.store import RequestNotFound, TransitionConflict

log = logging.getLogger(__name__)


@dataclass
class ApproverGroup:
    """Members of ACTION_APPROVER_GROUP, cached (usergroups.users.list is rate-limited) and
    failing closed as `Cached` does: someone removed from the group does not stay an
    approver while the API is down."""

    client: AsyncWebClient
    group: str | None
    members: Cached[frozenset[str]]  # its TTL: APPROVER_GROUP_CACHE

    async def contains(self, user: str) -> bool:
        group = self.group
        if not group:
            return False

        async def listed() -> frozenset[str]:
            response = await self.client.usergroups_users_list(usergroup=group)
            return frozenset(response.get("users") or [])

        def failed(exc: BaseException, delay: float) -> None:
            log.warning(
                "cannot list ACTION_APPROVER_GROUP %s (%s); next try in %.0fs; until a list "
                "succeeds, the last one decides for %.0fs past its TTL, then nobody is a member",
                group,
                exc,
                delay,
                self.members.grace_s,
            )

        return user in (await self.members.get(listed, failed) or frozenset())


@dataclass(frozen=True)
class Click:
    """Where a button was clicked, as Slack's signed payload says: the message's thread."""

    team: str
    channel: str
    thread_ts: str


@dataclass(eq=False)
class Cards:
    client: AsyncWebClient
    actions: ActionPipeline | None
    memory: ThreadMemory
    jobs: Jobs
    approvers: ApproverGroup
    access: Access  # who may click at all (a guest or a Slack Connect user may not, by default)
    grafana_url: str | None
    datasource: str
    executions: Executions  # where an approved action is executed (the workers' queue)
    # Whether a turn's run holds a thread (its lease), for the reconciler to tell a proposal
    # still being decided from one whose run died.
    thread_busy: ThreadBusy | None = None

    def __post_init__(self) -> None:
        self.executions.run = self.execute
        self.reconciler = (
            Reconciler(self.actions, self.thread_busy) if self.actions is not None else None
        )
        self._following: set[str] = set()  # requests whose rollout this process follows

    def _blocks(self, request: ActionRequest, note: str = "") -> list[dict[str, object]]:
        dry_run = self.actions is None or not self.actions.policy.actions_enabled
        return card_blocks(request, self.grafana_url, self.datasource, dry_run, note)

    async def requests(self, request_ids: list[str]) -> list[ActionRequest]:
        """The turn's proposals as stored now (none when actions are not configured)."""
        if self.actions is None:
            return []
        return [await self.actions.store.get(request_id) for request_id in request_ids]

    async def decided(self, request_ids: list[str]) -> list[str]:
        """The proposals whose gates and judge decided. One still `proposed` when its turn
        delivers was left by a run that died deciding it (the turn's own run has finished
        its tools, and no other run holds the thread): it is refused as interrupted, and
        neither shown nor given a card — the resumed run proposed again if it still meant to."""
        if self.reconciler is None:
            return request_ids
        kept = []
        for request in await self.requests(request_ids):
            if request.status == "proposed":
                with contextlib.suppress(TransitionConflict):  # moved meanwhile: shown as it is
                    await self.reconciler.refuse_undecided(request)
                    continue
            kept.append(request.id)
        return kept

    async def proposed_since(self, thread: str, since: float) -> list[str]:
        """The thread's proposals made since a time (a turn's own, across a resume)."""
        if self.actions is None:
            return []
        found = await self.actions.store.for_thread(thread)
        return [r.id for r in sorted(found, key=lambda r: r.created_at) if r.created_at >= since]

    async def post(
        self, channel: str, thread_ts: str, request_ids: list[str], *, since: float
    ) -> None:
        """One card per proposal of the turn: buttons if pending, a reason if refused. Its
        location is stored with the request: only clicks on that message count. `since`:
        a Slack timestamp before the turn's messages (bounds the search for a card whose
        post was applied but not answered)."""
        if self.actions is None:
            return
        for request in await self.requests(request_ids):
            if request.card is not None:  # posted before a retry of this step
                await self._show(request)
                continue
            posted = await post_once(
                self.client,
                channel=channel,
                thread_ts=thread_ts,
                tag=f"card:{request.id}",
                since=since,
                look_first=True,  # this step may be a retry after a post whose answer was lost
                text=escape(
                    f"Proposed action: {request.describe()} ({request.status.replace('_', ' ')})"
                ),
                blocks=self._blocks(request),
            )
            where = CardLocation(channel=channel, ts=posted)
            await self.actions.store.update(
                request.id, "card_posted", SYSTEM, f"{where.channel} {where.ts}", card=where
            )

    async def _show(self, request: ActionRequest, note: str = "") -> None:
        """Update the card; then, if the request moved on meanwhile (another process showed
        a newer version, which this update may just have overwritten), show the newer one."""
        for _ in range(3):
            if request.card is None:
                return  # never posted: nothing to update
            await self.client.chat_update(
                channel=request.card.channel,
                ts=request.card.ts,
                text=escape(f"{request.describe()}: {request.status.replace('_', ' ')}"),
                blocks=self._blocks(request, note),
            )
            if self.actions is None:
                return
            try:
                latest = await self.actions.store.get(request.id)
            except RequestNotFound:
                return
            if latest.version <= request.version:
                return
            request = latest

    async def _tell(self, channel: str, user: str, text: str) -> None:
        await self.client.chat_postEphemeral(channel=channel, user=user, text=escape(text))

    async def _clicked(
        self, actions: ActionPipeline, request_id: str, asker: Asker, channel: str, message_ts: str
    ) -> ActionRequest | None:
        """The request behind a click, if the click came from its card and from someone who
        may act on it; else refused (ephemerally), audited, and no message is touched."""
        user = asker.user
        try:
            request = await actions.store.get(request_id)
        except RequestNotFound:
            await self._tell(channel, user, f"No action request {request_id}; nothing was done.")
            return None
        if request.card == CardLocation(channel=channel, ts=message_ts):
            return None if await self._refused(actions, request, asker, channel) else request
        shown = f"{request.card.channel}/{request.card.ts}" if request.card else "no card"
        await actions.store.audit(
            request, "click_refused", user, f"clicked on {channel}/{message_ts}; its card: {shown}"
        )
        await self._tell(
            channel, user, "This button is not on this request's approval card; nothing was done."
        )
        return None

    async def _refused(
        self, actions: ActionPipeline, request: ActionRequest, asker: Asker, channel: str
    ) -> bool:
        """A guest's or an outsider's click is refused like an unauthorised approver's
        (audited as a denial, told ephemerally), before any approver list is consulted."""
        refusal = await self.access.refusal(asker)
        if refusal is None:
            return False
        await actions.store.audit(request, "approval_denied", asker.user, refusal)
        await self._tell(channel, asker.user, refusal)
        return True

    async def approve(self, request_id: str, asker: Asker, channel: str, message_ts: str) -> None:
        user = asker.user
        if self.actions is None:
            await self._tell(channel, user, "Actions are not configured on this bot (KUBECONFIG).")
            return
        if await self._clicked(self.actions, request_id, asker, channel, message_ts) is None:
            return
        in_group = await self.approvers.contains(user)
        result = await self.actions.authorise(request_id, user, in_approver_group=in_group)
        if result.verdict in ("denied", "already_handled", "not_found"):
            await self._tell(channel, user, f"Not approved: {result.message}.")
            return
        if result.request is not None:
            await self._show(result.request)  # approved, or expired
        if result.verdict != "approved":
            return
        try:
            await self.executions.submit(request_id, user)
        except Exception as exc:  # Redis went away between the approval and the queueing
            log.exception("cannot queue the execution of %s", request_id)
            await self._tell(
                channel,
                user,
                f"Approved, but the execution could not be queued ({type(exc).__name__}); "
                "nothing was changed, and the request is aborted once ACTION_LEASE passes. "
                "Ask again to propose it anew.",
            )

    async def execute(self, request_id: str, approver: str) -> None:
        """Execute an approved request (in a worker), show how it ended on its card, and
        follow its rollout."""
        if self.actions is None:
            raise RuntimeError(f"cannot execute {request_id}: actions are not configured here")
        result = await self.actions.execute(request_id, approver)
        if result.request is not None:
            await self._show(result.request)
            await self._follow_rollout(self.actions, result.request)

    async def _follow_rollout(self, actions: ActionPipeline, request: ActionRequest) -> None:
        """After a real success, the card says whether the rollout became healthy — shown
        by whichever process follows it (one at a time, see `ActionPipeline.follow_rollout`)."""
        if request.status != "succeeded" or request.dry_run or request.id in self._following:
            return
        self._following.add(request.id)
        try:
            followed = await actions.follow_rollout(request)
        finally:
            self._following.discard(request.id)
        if followed is not None:
            await self._show(followed)

    async def reject(self, request_id: str, asker: Asker, channel: str, message_ts: str) -> None:
        user = asker.user
        if self.actions is None:
            return
        if await self._clicked(self.actions, request_id, asker, channel, message_ts) is None:
            return
        in_group = await self.approvers.contains(user)
        result = await self.actions.reject(
            request_id, user, "rejected in Slack", in_approver_group=in_group
        )
        if result.verdict != "rejected" or result.request is None:
            await self._tell(channel, user, f"Not rejected: {result.message}.")
            return
        await self._show(result.request)

    async def reset_breaker(
        self, request_id: str, asker: Asker, channel: str, message_ts: str
    ) -> None:
        """The Reset button on a card refused by an open circuit breaker (approvers only)."""
        user = asker.user
        if self.actions is None:
            return
        request = await self._clicked(self.actions, request_id, asker, channel, message_ts)
        if request is None:
            return
        refusal = request.refusal
        if refusal is None or refusal.open_breaker is None:
            await self._tell(channel, user, "This card was not refused by an open breaker.")
            return
        in_group = await self.approvers.contains(user)
        scope = None if refusal.open_breaker == GLOBAL else refusal.open_breaker
        reset, message = await self.actions.reset_breaker(scope, user, in_group)
        if not reset:
            await self._tell(channel, user, f"Not reset: {message}.")
            return
        await self._show(request, f":arrows_counterclockwise: {message} by <@{user}>; ask again.")

    async def reconcile(self) -> int:
        """Settle what dead processes left, expire stale proposals (card or no card), and
        show the truth on their cards; count and follow the executions a dead process did
        not. Returns how many requests were settled."""
        if self.reconciler is None:
            return 0
        settled = await self.reconciler.run_once()
        for request in settled:
            try:
                await self._show(request)
            except SlackApiError as exc:  # the next request's card still gets its update
                log.warning("cannot update the card of %s: %s", request.id, exc)
        # Followed in the background: the next reconcile must not wait for a rollout.
        for request in await self.reconciler.to_follow():
            if request.id not in self._following:
                self.jobs.submit(
                    self._follow_rollout(self.reconciler.pipeline, request),
                    f"follow {request.id}",
                )
        return len(settled)

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
