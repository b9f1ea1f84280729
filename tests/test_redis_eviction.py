"""A Redis that may evict keys is refused at start-up, unless REDIS_ALLOW_EVICTION accepts the
risk (real Redis Stack servers: one started with `--maxmemory-policy allkeys-lru`, and
`make test`'s, which never evicts)."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.process.redis_policy import RedisUnusable
from bot.process.runtime import open_runtime
from bot.process.settings import Settings
from sandbox import GeminiSimulator, TempoSimulator
from sandbox.prefork import forked
from tests.redis_fixtures import wait_for
from tests.test_startup_errors import SERVE_READY

POLICY_LOGGER = "bot.process.redis_policy"
PROBE = "tracegate-test:eviction-probe"


def _refusal(url: str, policy: str) -> str:
    return (
        f"tracegate: REDIS_URL: the Redis at {url} evicts keys under memory pressure "
        f"(maxmemory_policy is {policy}): leases, recorded turns and action requests could "
        "vanish. Set `maxmemory-policy noeviction` on that Redis, or REDIS_ALLOW_EVICTION=true "
        "to accept the risk\n"
    )


def _settings(url: str, gemini: GeminiSimulator, tempo: TempoSimulator, **more: object) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_url=url,
        google_api_key="sandbox-key",
        gemini_base_url=gemini.url,
        tempo_url=tempo.url,
        **more,
    )


async def _start(command: str, redis_url: str, folder: Path) -> tuple[int, str]:
    """`tracegate <command>` (forked from the fork server, exactly this environment, no .env):
    its exit status and stderr; a process still running after 30 s started, and is killed."""
    env = {"PATH": os.environ["PATH"], **SERVE_READY, "REDIS_URL": redis_url, "PORT": "0"}
    out, err = folder / "stdout", folder / "stderr"
    process = forked([command], env, folder, out, err)
    try:
        code = await asyncio.to_thread(process.wait, 30)
    except subprocess.TimeoutExpired:
        process.kill()
        await asyncio.to_thread(process.wait)
        pytest.fail(f"tracegate {command} started on that Redis: {err.read_text()}")
    return code, err.read_text()


@pytest.mark.parametrize("command", ["serve", "worker"])
async def test_a_process_on_a_redis_that_evicts_exits_2_naming_the_policy_and_the_override(
    evicting_redis_stack: str, command: str, tmp_path: Path
) -> None:
    await wait_for(evicting_redis_stack)
    code, err = await _start(command, evicting_redis_stack, tmp_path)
    assert code == 2, err
    assert err == _refusal(evicting_redis_stack, "allkeys-lru")


async def test_the_managed_default_volatile_lru_is_refused_too(
    empty_redis_stack: str, gemini: GeminiSimulator, tempo: TempoSimulator
) -> None:
    await wait_for(empty_redis_stack)
    admin = aioredis.from_url(empty_redis_stack)
    await admin.config_set("maxmemory-policy", "volatile-lru")  # the test's own doing
    await admin.aclose()
    with pytest.raises(RedisUnusable) as refused:
        async with open_runtime(_settings(empty_redis_stack, gemini, tempo)):
            pass
    assert f"{refused.value}\n" == _refusal(empty_redis_stack, "volatile-lru").removeprefix(
        "tracegate: "
    )


async def test_with_redis_allow_eviction_the_runtime_opens_and_warns(
    evicting_redis_stack: str,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await wait_for(evicting_redis_stack)
    settings = _settings(evicting_redis_stack, gemini, tempo, redis_allow_eviction=True)
    with caplog.at_level(logging.WARNING, logger=POLICY_LOGGER):
        async with open_runtime(settings) as runtime:
            await runtime.redis.set(PROBE, "1", ex=60)
            assert await runtime.redis.get(PROBE) == b"1"  # started, and takes writes
    (warning,) = [r for r in caplog.records if r.name == POLICY_LOGGER]
    assert warning.levelno == logging.WARNING
    assert "(maxmemory_policy is allkeys-lru)" in warning.getMessage()
    assert warning.getMessage().endswith("running anyway, as REDIS_ALLOW_EVICTION=true asks")


async def test_a_redis_that_never_evicts_opens_without_a_warning(
    redis_url: str,
    gemini: GeminiSimulator,
    tempo: TempoSimulator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    admin = aioredis.from_url(redis_url)
    assert (await admin.info("memory"))["maxmemory_policy"] == "noeviction"  # make test's Redis
    await admin.aclose()
    with caplog.at_level(logging.DEBUG, logger=POLICY_LOGGER):
        async with open_runtime(_settings(redis_url, gemini, tempo)) as runtime:
            await runtime.redis.set(PROBE, "1", ex=60)
            assert await runtime.redis.get(PROBE) == b"1"  # started, and takes writes
    assert [r for r in caplog.records if r.name == POLICY_LOGGER] == []
