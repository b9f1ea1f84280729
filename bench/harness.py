"""Set-up the benchmarks share: the bot's settings pointed at the simulators, the bare Bolt
baseline of the ack benchmarks, and writing a section of BENCHMARKS.md."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from pathlib import Path
from typing import Any

from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.process.settings import Settings
from sandbox import GeminiSimulator, TempoSimulator
from sandbox.fleet import SIGNING_SECRET
from sandbox.slack import SlackDriver, SlackSimulator


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
        "slack_charts": "off",  # drawing is measured apart (bench/charts.py)
    }
    return Settings(_env_file=None, **{**values, **extra})


async def bare_bolt(slack: SlackSimulator) -> web.AppRunner:
    """A Bolt AsyncApp doing nothing but ack, served the way `serve` serves (aiohttp): the
    baseline of every ack benchmark."""
    app = AsyncApp(
        client=AsyncWebClient(token="xoxb-bench", base_url=f"{slack.url}/api/"),
        signing_secret=SIGNING_SECRET,
    )

    @app.event("app_mention")
    async def mentioned() -> None:
        return None

    runner = web.AppRunner(app.web_app(path="/slack/events"), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner


async def mention_acks(url: str, slack: SlackSimulator, mentions: int) -> list[float]:
    """`mentions` new mentions at once to `url`; each one's ack (ms). The messages are
    stored in the Slack simulator, so the bot's follow-up calls find them."""
    driver = SlackDriver(url, SIGNING_SECRET, team=f"TB{uuid.uuid4().hex[:6]}", slack=slack)
    base = 1_700_000_000 + int(uuid.uuid4().int % 10**6)

    async def ack(i: int) -> float:
        started = time.perf_counter()
        status, _ = await driver.mention("why?", ts=f"{base}.{i:06d}", event_id=f"Ev{base}x{i}")
        assert status == 200, status
        return (time.perf_counter() - started) * 1000

    return list(await asyncio.gather(*(ack(i) for i in range(mentions))))


def write_section(out: Path, begin: str, end: str, section: str) -> None:
    """Replace the section between `begin` and `end` of `out` (or add it at the end)."""
    text = out.read_text() if out.exists() else ""
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    text = (
        pattern.sub(lambda _: section, text)
        if pattern.search(text)
        else text.rstrip() + "\n\n" + section + "\n"
    )
    out.write_text(text)
