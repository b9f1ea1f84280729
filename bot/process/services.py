"""The services behind the listeners, built from the settings and the runtime."""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.outbound.cards import ApproverGroup, Cards
from bot.outbound.feedback import Feedback
from bot.outbound.home import Home
from bot.outbound.posts import NotForPosts
from bot.outbound.rubric import RubricCommand, RubricEditors
from bot.outbound.stream import Streaming
from bot.process.jobs import Jobs
from bot.process.runtime import Runtime
from bot.process.settings import Settings
from bot.turn.access import Access, AskingLimits, Cached, People
from bot.turn.alert_desk import AlertDesk, AlertGroups
from bot.turn.context import ThreadReader
from bot.turn.conversation import Conversations, Presentation
from bot.turn.executions import Executions, action_queue
from bot.turn.store import TurnStore
from bot.turn.threads import ThreadMemory
from bot.turn.worker import InProcessQueue, TurnQueue, TurnRunner, turn_queue
from gates.store import ActionStore


@dataclass
class Services:
    client: AsyncWebClient
    memory: ThreadMemory
    jobs: Jobs
    cards: Cards
    conversations: Conversations
    rubric_command: RubricCommand
    turns: TurnStore
    runner: TurnRunner
    feedback: Feedback
    home: Home
    alerts: AlertDesk
    executions: Executions


def slack_client(settings: Settings, session: aiohttp.ClientSession) -> AsyncWebClient:
    token = settings.slack.bot_token.get_secret_value() if settings.slack.bot_token else None
    client = AsyncWebClient(token=token, base_url=settings.slack.api_url, session=session)
    # 429s honour Retry-After; dropped connections and 500/503 are retried, except for
    # chat.postMessage, where a blind retry can post twice (bot/outbound/posts.py decides).
    client.retry_handlers = [
        AsyncRateLimitErrorRetryHandler(max_retry_count=3),
        NotForPosts(AsyncConnectionErrorRetryHandler()),
        NotForPosts(AsyncServerErrorRetryHandler(max_retry_count=2)),
    ]
    return client


def build_services(settings: Settings, runtime: Runtime, *, in_process: bool = False) -> Services:
    """`in_process`: turns run as tasks of this process, not through the Redis job queue
    (the demo's embedded store, which has no Redis server to queue on)."""
    client = slack_client(settings, runtime.slack_http)
    redis = runtime.redis
    ttl_s = int(settings.redis.checkpoint_ttl_minutes * 60)
    memory = ThreadMemory(redis, ttl_s, settings.redis.prefix)
    turns = TurnStore(redis, ttl_s, settings.redis.prefix)
    queue: TurnQueue = InProcessQueue() if in_process else turn_queue(redis, settings.redis.prefix)
    queue_of_actions = None if in_process else action_queue(redis, settings.redis.prefix)

    async def turns_left() -> int:
        # Unfinished turns (ours: a turn stays until answered, whatever saq does with its
        # job meanwhile — a sweep's abort and retry take it out of saq's count for seconds)
        # and saq's jobs not finished (a finished turn's job still sets its reaction).
        # And approved actions queued or executing (one follows its rollout meanwhile).
        executing = await queue_of_actions.count("incomplete") if queue_of_actions else 0
        return await turns.unfinished_count() + await queue.count("incomplete") + executing

    jobs = Jobs(queued_turns=turns_left)
    approvers = ApproverGroup(
        client,
        settings.kubernetes.action_approver_group,
        Cached(float(settings.slack.approver_group_cache)),
    )
    access = Access(
        People(client), settings.slack.allow_external_users, settings.slack.allow_guest_users
    )
    executions = Executions(queue_of_actions, jobs)
    cards = Cards(
        client,
        runtime.actions,
        memory,
        jobs,
        approvers,
        access,
        settings.grafana.url,
        settings.tempo.datasource,
        executions,
        thread_busy=turns.leased,
    )
    presentation = Presentation(
        grafana_url=settings.grafana.url,
        datasource=settings.tempo.datasource,
        progress_interval_s=settings.slack.progress_interval,
        rubric_max_iterations=runtime.investigator.limits.rubric_max_iterations,
        charts=settings.slack.charts == "on",
    )
    conversations = Conversations(
        client,
        runtime.investigator,
        memory,
        turns,
        queue,
        settings.worker,
        jobs,
        cards,
        presentation,
        settings.turns.max_attempts,
        ThreadReader(
            client,
            redis,
            turns,
            settings.thread.messages,
            settings.thread.chars,
            ttl_s,
            settings.redis.prefix,
        ),
        access,
        AskingLimits(
            redis,
            settings.slack.investigations_per_user_per_hour,
            settings.slack.investigations_per_channel_per_hour,
            settings.redis.prefix,
        ),
        float(settings.capacity.wait_max_s),
        Streaming(settings.slack.streaming),
    )
    alerts = AlertDesk(
        AlertGroups(redis, settings.redis.prefix),
        client,
        settings.alerts,
        conversations.on_alert,
    )
    conversations.alerts = alerts
    runner = TurnRunner(turns, queue, conversations.run, conversations.prepare, settings.worker)
    if isinstance(queue, InProcessQueue):
        queue.runner = runner
    anyone, editor_ids = settings.rubric.editor_ids()
    editors = (
        RubricEditors(anyone, editor_ids)
        if anyone or editor_ids
        else RubricEditors(False, settings.actions.approvers, approvers)
    )
    # Rubric changes and feedback go to the actions' audit stream, through its one writer,
    # whether or not actions are configured.
    audit = runtime.actions.store if runtime.actions else ActionStore(redis, settings.redis.prefix)
    rubric_command = RubricCommand(
        runtime.investigator,
        memory,
        settings.rubric.checklist,
        editors,
        audit,
        settings.rubric.max_chars,
    )
    feedback = Feedback(client, redis, memory, audit, settings.redis.prefix, ttl_s)
    home = Home(client, runtime.actions, approvers, feedback)
    return Services(
        client,
        memory,
        jobs,
        cards,
        conversations,
        rubric_command,
        turns,
        runner,
        feedback,
        home,
        alerts,
        executions,
    )
