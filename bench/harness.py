"""Set-up the benchmarks share: the bot's settings pointed at the simulators."""

from __future__ import annotations

import uuid
from typing import Any

from bot.process.settings import Settings
from sandbox import GeminiSimulator, TempoSimulator
from sandbox.fleet import SIGNING_SECRET
from sandbox.slack import SlackSimulator


def bench_settings(
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    redis_url: str,
    **extra: Any,
) -> Settings:
    """An in-process bot on the simulators and `redis_url`, keys under a prefix of its own,
    no model retries, no default rubric; `extra` overrides settings."""
    values: dict[str, Any] = {
        "slack_bot_token": "xoxb-bench",
        "slack_signing_secret": SIGNING_SECRET,
        "slack_api_url": f"{slack.url}/api/",
        "google_api_key": "bench",
        "gemini_base_url": gemini.url,
        "llm_max_retries": 0,
        "tempo_url": tempo.url,
        "redis_url": redis_url,
        "redis_prefix": f"bench-{uuid.uuid4().hex[:8]}",
        "port": 0,
        "default_rubric": "",
    }
    return Settings(_env_file=None, **{**values, **extra})
