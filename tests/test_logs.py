"""Logs: a turn's lines carry who they are about; LOG_FORMAT=json writes one object a line;
start-up says what runs in one line, without the libraries' noise."""

import asyncio
import json
import logging
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.process.logs import LogContextFilter, configure_logging
from bot.process.server import RunningBot
from graph.checkpoint import open_checkpointer
from graph.log_context import bind_log_context
from sandbox import GeminiSimulator, Reply, TempoSimulator
from sandbox.fleet import ROOT, answers_200, free_port
from sandbox.kubernetes import write_kubeconfig
from sandbox.slack import SlackDriver, SlackSimulator


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.addFilter(LogContextFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    logging.getLogger().addHandler(handler)
    yield handler
    logging.getLogger().removeHandler(handler)


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


async def test_a_turns_log_lines_carry_team_channel_thread_and_correlation_id(
    bot: RunningBot, driver: SlackDriver, gemini: GeminiSimulator, records: Records
) -> None:
    gemini.script(Reply.error(400, "bad request"))
    await driver.mention("why?", ts="1700000000.000100")
    assert await bot.services.jobs.join(15)

    (failed,) = [r for r in records.records if r.getMessage().startswith("investigation failed")]
    thread = f"{driver.team}:C1:1700000000.000100"
    about = {k: getattr(failed, k, None) for k in ("team", "channel", "thread")}
    assert about == {"team": driver.team, "channel": "C1", "thread": thread}
    assert len(getattr(failed, "correlation_id", "")) == 12


async def test_json_lines_are_one_object_each_with_the_bound_context(
    capsys: pytest.CaptureFixture[str], restored_logging: None
) -> None:
    configure_logging("INFO", "json")

    async def turn() -> None:
        bind_log_context(team="T1", channel="C1", thread="T1:C1:1.0", correlation_id="abc")
        logging.getLogger("bot.test").warning("something to say")

    await asyncio.create_task(turn())
    (line,) = capsys.readouterr().err.splitlines()
    record = json.loads(line)
    assert {k: record[k] for k in ("level", "logger", "message", "team", "correlation_id")} == {
        "level": "WARNING",
        "logger": "bot.test",
        "message": "something to say",
        "team": "T1",
        "correlation_id": "abc",
    }


async def test_start_up_is_one_summary_line_without_library_noise(
    redis_url: str,
    redis_client: aioredis.Redis,
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    tmp_path: Path,
) -> None:
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    async with open_checkpointer(redis_client, None, prefix=prefix):
        pass  # the indexes exist, as at every start but the first
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "REDIS_URL": redis_url,
        "SLACK_BOT_TOKEN": "xoxb-sandbox",
        "SLACK_SIGNING_SECRET": "sandbox-secret",
        "SLACK_API_URL": f"{slack.url}/api/",
        "GOOGLE_API_KEY": "sandbox-key",
        "GEMINI_BASE_URL": gemini.url,
        "TEMPO_URL": tempo.url,
        "KUBECONFIG": str(write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:1")),
        "PORT": str(port),
        "LOG_FORMAT": "json",
        # Keys of its own: tests run side by side on one Redis (pytest-xdist).
        "REDIS_PREFIX": prefix,
    }
    serve = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.process.cli",
        "serve",
        env=env,
        cwd=ROOT,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        # Until it is ready (or has exited): a start beside other tests can take longer than
        # the 10 s this once waited, and the summary line comes only once it is up.
        async with asyncio.timeout(90):  # only stops a hang
            while serve.returncode is None:
                if await answers_200(f"http://127.0.0.1:{port}/readyz"):
                    break
                await asyncio.sleep(0.1)
    finally:
        serve.terminate()
        _, err = await serve.communicate()
    lines = [json.loads(line) for line in err.decode().splitlines()]
    summary_at = next(i for i, line in enumerate(lines) if line["message"].startswith("tracegate"))
    # Nothing before the summary but what the bot itself has to say.
    assert [line["logger"] for line in lines[:summary_at]] == []
    (summary,) = [line for line in lines if line["message"].startswith("tracegate serving")]
    assert summary["level"] == "WARNING"  # Kubernetes is configured and nobody may approve
    for part in ("Kubernetes via KUBECONFIG", "actions off", "approvers: NONE", "rubric on"):
        assert part in summary["message"]
