"""Where an answer's CPU goes: an inline `serve` answers 60 mentions (model 0 ms) under
cProfile; self time is grouped by package, and Redis commands are counted.

scripts/with-redis .venv/bin/python -m bench.profile

The bot and the simulators share the process, so the figures are for the whole loop.
"""

from __future__ import annotations

import asyncio
import cProfile
import os
import pstats
import time
import uuid
from collections import Counter
from typing import Any

from bench.harness import bench_settings
from bot.process.redis_client import FailoverConnection as Connection  # what every client uses
from bot.process.server import running_bot
from sandbox import GeminiRequest, GeminiSimulator, Reply, TempoSimulator
from sandbox.fleet import SIGNING_SECRET, answer_by_question
from sandbox.scenarios import bad_deploy
from sandbox.slack import SlackDriver, SlackSimulator

ANSWERS = 60
commands: Counter[str] = Counter()
_pack = Connection.pack_command


def _counted(self: Connection, *args: Any) -> Any:
    commands[str(args[0])] += 1
    return _pack(self, *args)


def _package(file: str, function: str) -> str:
    if "site-packages/" in file:
        return file.split("site-packages/")[1].split("/")[0]
    if "/lib/python3" in file:
        return "stdlib " + file.split("/lib/python3")[1].split("/")[1].removesuffix(".py")
    if file.startswith("~") or file == "<string>":
        return function  # built-ins: socket send, isinstance, ...
    return "tracegate " + "/".join(file.split("/")[-2:])


def _instant(request: GeminiRequest) -> Reply:
    return answer_by_question(request, delay_s=0.0)


async def main() -> None:
    redis_url = os.environ["REDIS_URL"]
    Connection.pack_command = _counted  # type: ignore[method-assign, assignment]
    async with (
        SlackSimulator(bot_token="xoxb-bench") as slack,
        TempoSimulator(traces=bad_deploy().traces) as tempo,
        GeminiSimulator() as gemini,
    ):
        gemini.script(*[_instant] * (ANSWERS + 20))
        settings = bench_settings(
            slack,
            gemini,
            tempo,
            redis_url,
            redis_prefix=f"profile-{uuid.uuid4().hex[:6]}",
            progress_interval=0,
        )
        async with running_bot(settings, host="127.0.0.1") as bot:
            driver = SlackDriver(bot.url, SIGNING_SECRET, team="TPROFILE", slack=slack)

            async def wave(base: int, mentions: int) -> None:
                await asyncio.gather(
                    *(
                        driver.mention(f"load thread {i} turn 0", ts=f"{base}.{i:06d}")
                        for i in range(mentions)
                    )
                )
                await bot.services.jobs.join(120)

            await wave(1_800_000_001, 10)  # warm-up: connections, imports
            commands.clear()
            profile = cProfile.Profile()
            cpu = time.process_time()
            profile.enable()
            await wave(1_800_000_002, ANSWERS)
            profile.disable()
            cpu_ms = (time.process_time() - cpu) * 1000 / ANSWERS
    stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    by_package: Counter[str] = Counter()
    for (file, _, function), (_, _, self_s, _, _) in stats.items():
        by_package[_package(file, function)] += self_s
    total = sum(by_package.values())
    top = ", ".join(f"{name} {count / ANSWERS:.0f}" for name, count in commands.most_common(5))
    print(f"CPU per answer (profiled): {cpu_ms:.0f} ms")
    print(f"Redis commands per answer: {sum(commands.values()) / ANSWERS:.0f} ({top})")
    for package, seconds in by_package.most_common(8):
        share = seconds / total
        print(f"  {package:45s} {seconds * 1000 / ANSWERS:5.1f} ms/answer  {share:5.1%}")


if __name__ == "__main__":
    asyncio.run(main())
