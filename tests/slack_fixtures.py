"""Fixtures for the Slack bot: the real server over HTTP against every simulator."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from bot.process.server import RunningBot, running_bot
from bot.process.settings import Settings
from sandbox import GeminiSimulator, TempoSimulator
from sandbox.kubernetes import KubernetesSimulator
from sandbox.slack import SlackDriver, SlackSimulator
from tests.gates_fixtures import APPROVER, SECOND_APPROVER, write_kubeconfig

SECRET = "sandbox-signing-secret"
GRAFANA = "https://grafana.example"


@pytest.fixture
async def slack() -> AsyncIterator[SlackSimulator]:
    async with SlackSimulator() as sim:
        yield sim


BotFactory = Callable[..., AbstractAsyncContextManager[RunningBot]]


@pytest.fixture
def bot_for(
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    kube: KubernetesSimulator,
    redis_url: str,
    tmp_path: Path,
) -> BotFactory:
    """Start the real bot; keyword arguments override settings."""

    def start(**overrides: Any) -> AbstractAsyncContextManager[RunningBot]:
        values: dict[str, Any] = {
            "slack_bot_token": "xoxb-sandbox",
            "slack_signing_secret": SECRET,
            "slack_api_url": f"{slack.url}/api/",
            "google_api_key": "sandbox-key",
            "gemini_base_url": gemini.url,
            "llm_max_retries": 0,
            "tempo_url": tempo.url,
            "tempo_timeout": 1.0,
            "redis_url": redis_url,
            "redis_prefix": f"test-{uuid.uuid4().hex[:8]}",
            "port": 0,
            "progress_interval": 0,
            # The placeholder-and-edits path; tests of the streamed timeline set "on".
            "slack_streaming": "off",
            # Text only: the tests of charts under the answer (test_chart_uploads.py) set "on".
            "slack_charts": "off",
            "kubeconfig": str(write_kubeconfig(tmp_path / "kubeconfig", kube.url)),
            "actions_enabled": True,
            "action_approvers": f"{APPROVER},{SECOND_APPROVER}",
            "default_rubric": "",
            "grafana_url": GRAFANA,
        }
        values.update(overrides)
        return running_bot(Settings(_env_file=None, **values), host="127.0.0.1")

    return start


@pytest.fixture
async def bot(bot_for: BotFactory) -> AsyncIterator[RunningBot]:
    async with bot_for() as running:
        yield running


async def settled(bot: RunningBot, timeout_s: float = 15) -> None:
    """Wait until the bot has finished every turn and click it was given."""
    assert await bot.services.jobs.join(timeout_s), "answers still running"


@pytest.fixture
def driver(bot: RunningBot, slack: SlackSimulator) -> SlackDriver:
    # A team id of its own: thread keys (and so checkpoints) never collide between tests.
    return SlackDriver(bot.url, SECRET, team=f"T{uuid.uuid4().hex[:8].upper()}", slack=slack)
