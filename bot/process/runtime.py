"""Opening everything the bot needs from its settings, and closing it again."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
import redis.asyncio as aioredis
from langgraph.checkpoint.base import BaseCheckpointSaver

from bot.process.redis_client import connect_redis
from bot.process.redis_policy import check_eviction_policy, check_redis
from bot.process.settings import Settings
from gates.cluster import KubernetesCluster
from gates.pipeline import ActionPipeline, build_pipeline
from graph.capacity import ModelGuard
from graph.model import make_chat_model
from graph.runner import Investigator, open_investigator

# slack_sdk's own default: what one Web API call may take, retries apart.
SLACK_CALL_TIMEOUT_S = 30


@dataclass(frozen=True)
class Runtime:
    investigator: Investigator
    actions: ActionPipeline | None  # None: no KUBECONFIG and not in a cluster
    redis: aioredis.Redis
    # The Slack client's connections, kept open between calls: without a session of its
    # own, slack_sdk opens (and closes) a connection, and a TLS handshake, per call.
    slack_http: aiohttp.ClientSession


@asynccontextmanager
async def open_runtime(
    settings: Settings,
    redis: aioredis.Redis | None = None,
    saver: BaseCheckpointSaver[str] | None = None,
) -> AsyncIterator[Runtime]:
    """The investigator and the action pipeline, on `REDIS_URL` unless a client (and a
    checkpointer) are handed in — the demo's embedded mode does that."""
    # One client for the process: its own keys, the job queue, the limiter, the checkpoints.
    client = redis if redis is not None else connect_redis(settings.redis_spec())
    cluster: KubernetesCluster | None = None
    slack_http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=SLACK_CALL_TIMEOUT_S))
    try:
        if redis is None:
            await check_redis(client, settings.redis.url)
            await check_eviction_policy(
                client, settings.redis.url, allow=settings.redis.allow_eviction
            )
        # One guard for every model call of the process; its limit is shared through Redis.
        guard = ModelGuard(
            client,
            settings.redis.prefix,
            settings.capacity,
            int(settings.redis.checkpoint_ttl_minutes * 60),
        )
        actions = None
        if settings.kubernetes_configured:
            kubeconfig = (settings.kubernetes.kubeconfig or "").split(os.pathsep)[0] or None
            cluster = await KubernetesCluster.connect(kubeconfig, settings.kubernetes.kube_timeout)
            actions = build_pipeline(
                client,
                cluster,
                settings.actions,
                # The judge runs inside a proposal: it waits for capacity in place.
                make_chat_model(settings.judge_spec(), "JUDGE_MODEL", guard, inline=True),
                prefix=settings.redis.prefix,
                lease_s=settings.kubernetes.action_lease,
            )
        async with open_investigator(
            settings.model,
            settings.tempo_spec(),
            settings.limits,
            client,
            settings.redis.checkpoint_ttl_minutes,
            prefix=settings.redis.prefix,
            actions=actions,
            grader_model=settings.grader_spec(),
            default_rubric=settings.rubric.checklist,
            saver=saver,
            guard=guard,
            configured=settings.tool_settings(),
        ) as investigator:
            yield Runtime(investigator, actions, client, slack_http)
    finally:
        await slack_http.close()
        if cluster is not None:
            await cluster.close()
        if redis is None:
            await client.aclose()
