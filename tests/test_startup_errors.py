"""A wrong setting at start-up: one clear message naming it, exit 2, never a traceback
(`tracegate` run as a real subprocess)."""

from pathlib import Path

from tests.redis_fixtures import wait_for
from tests.test_cli import _tracegate

SERVE_READY = {
    "SLACK_BOT_TOKEN": "xoxb-sandbox",
    "SLACK_SIGNING_SECRET": "secret",
    "GOOGLE_API_KEY": "sandbox-key",
    "TEMPO_URL": "http://127.0.0.1:9",
}


async def _fails_with(env: dict[str, str], *args: str) -> str:
    """stderr of a run that must exit 2 without a traceback."""
    code, out, err = await _tracegate(*(args or ("serve",)), env=env, fresh=True)
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
    assert (
        "REDIS_URL: not a URL like redis://host:6379/0" in err and "(got 'localhost:6379')" in err
    )


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


async def test_a_redis_without_json_and_search_is_one_line_naming_both(plain_redis: str) -> None:
    await wait_for(plain_redis)
    err = await _fails_with({**SERVE_READY, "REDIS_URL": plain_redis})
    assert err == (
        f"tracegate: REDIS_URL: the Redis at {plain_redis} lacks RedisJSON and RediSearch; the "
        "checkpointer needs both: use Redis 8 (built in) or Redis Stack\n"
    )
