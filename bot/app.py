"""Building the Bolt app: the Slack client, the services behind the listeners."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis.asyncio as aioredis
from slack_bolt.async_app import AsyncApp
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.cards import ApproverGroup, Cards
from bot.conversation import Conversations, Presentation
from bot.jobs import Jobs
from bot.listeners import register_listeners
from bot.rubric_command import RubricCommand
from bot.runtime import Runtime
from bot.settings import Settings
from bot.thread_context import ContextLimits, ThreadReader
from bot.threads import ThreadMemory
from bot.turns import TurnStore
from bot.worker import InProcessQueue, TurnQueue, TurnRunner, turn_queue

log = logging.getLogger(__name__)


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


def slack_client(settings: Settings) -> AsyncWebClient:
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    client = AsyncWebClient(token=token, base_url=settings.slack_api_url)
    # 429s honour Retry-After; 500/503 are retried too.
    client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=3))
    client.retry_handlers.append(AsyncServerErrorRetryHandler(max_retry_count=2))
    return client


def build_services(
    settings: Settings, runtime: Runtime, redis: aioredis.Redis, *, in_process: bool = False
) -> Services:
    """`in_process`: turns run as tasks of this process, not through the Redis job queue
    (the demo's embedded store, which has no Redis server to queue on)."""
    client = slack_client(settings)
    ttl_s = int(settings.checkpoint_ttl_minutes * 60)
    memory = ThreadMemory(redis, ttl_s, settings.redis_prefix)
    turns = TurnStore(redis, ttl_s, settings.redis_prefix)
    queue: TurnQueue = InProcessQueue() if in_process else turn_queue(redis, settings.redis_prefix)
    timing = settings.worker_timing()
    jobs = Jobs(queued_turns=lambda: queue.count("incomplete"))
    approvers = ApproverGroup(
        client, settings.action_approver_group, float(settings.approver_group_cache)
    )
    cards = Cards(
        client,
        runtime.actions,
        memory,
        jobs,
        approvers,
        settings.grafana_url,
        settings.grafana_tempo_datasource,
    )
    presentation = Presentation(
        grafana_url=settings.grafana_url,
        datasource=settings.grafana_tempo_datasource,
        progress_interval_s=settings.progress_interval,
        rubric_max_iterations=runtime.investigator.limits.rubric_max_iterations,
    )
    conversations = Conversations(
        client,
        runtime.investigator,
        memory,
        turns,
        queue,
        timing,
        jobs,
        cards,
        presentation,
        settings.max_attempts,
        ThreadReader(
            client,
            redis,
            turns,
            ContextLimits(settings.thread_context_messages, settings.thread_context_chars),
            ttl_s,
            settings.redis_prefix,
        ),
    )
    runner = TurnRunner(turns, queue, conversations.run, conversations.prepare, timing)
    if isinstance(queue, InProcessQueue):
        queue.runner = runner
    rubric_command = RubricCommand(runtime.investigator, memory, settings.rubric)
    return Services(client, memory, jobs, cards, conversations, rubric_command, turns, runner)


def build_app(settings: Settings, services: Services) -> AsyncApp:
    secret = settings.slack_signing_secret
    socket_mode = settings.slack_app_token is not None
    app = AsyncApp(
        client=services.client,
        signing_secret=secret.get_secret_value() if secret else "",
        # Socket Mode is authenticated by the app token; there are no signatures to check.
        request_verification_enabled=not socket_mode,
        logger=log,
    )
    register_listeners(app, services)
    return app
