"""REDIS_URL and the REDIS_* connection settings: what is accepted, and each combination
that cannot work refused by the settings' names (bot/process/settings.py, `redis_spec`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.process.redis_client import RedisSpec
from bot.process.settings import VARIABLES, SettingsError, load_settings

SENTINELS = "redis+sentinel://s1:26379,s2:26380/mymaster/2"


@pytest.fixture(autouse=True)
def _no_settings_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _spec(**settings: object) -> RedisSpec:
    return load_settings(_env_file=None, **settings).redis_spec()


def test_a_sentinel_url_is_accepted_with_the_credentials_of_each_side() -> None:
    spec = _spec(
        redis_url="redis+sentinel://app:data-secret@s1:26379,s2:26380/mymaster/2",
        redis_sentinel_password="sentinel-secret",
        redis_failover_timeout=12,
    )
    assert (spec.username, spec.password) == ("app", "data-secret")
    assert spec.sentinel_password == "sentinel-secret"
    assert spec.failover_timeout_s == 12 and spec.socket_timeout_s == 5


def test_a_sentinel_url_without_a_service_name_is_refused_naming_redis_url() -> None:
    with pytest.raises(SettingsError, match=r"REDIS_URL: .*names no service"):
        load_settings(_env_file=None, redis_url="redis+sentinel://s1:26379,s2:26380")


def test_a_password_in_the_url_and_another_in_redis_password_is_refused() -> None:
    with pytest.raises(
        SettingsError, match="REDIS_PASSWORD: differs from the password in REDIS_URL"
    ):
        load_settings(_env_file=None, redis_url="redis://:one@r:6379/0", redis_password="two")


def test_sentinel_settings_with_a_plain_url_are_refused_by_name() -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(
            _env_file=None,
            redis_url="redis://r:6379/0",
            redis_sentinel_password="x",
            redis_sentinel_tls=True,
        )
    assert "REDIS_SENTINEL_PASSWORD: set, but REDIS_URL is not a redis+sentinel:// URL" in str(
        refused.value
    )
    assert "REDIS_SENTINEL_TLS: true, but REDIS_URL is not a redis+sentinel:// URL" in str(
        refused.value
    )


def test_a_ca_file_with_nothing_using_tls_is_refused(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    with pytest.raises(SettingsError, match="REDIS_TLS_CA_FILE: set, but nothing uses TLS"):
        load_settings(_env_file=None, redis_url=SENTINELS, redis_tls_ca_file=str(ca))
    assert _spec(redis_url=SENTINELS, redis_tls=True, redis_tls_ca_file=str(ca)).tls


def test_a_rediss_url_means_tls_to_the_data_nodes() -> None:
    assert _spec(redis_url="rediss://r:6380/0").tls
    assert not _spec(redis_url="redis://r:6379/0").tls


def test_a_malformed_url_is_refused_without_showing_its_password() -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(_env_file=None, redis_url="sentinel://:hunter2@s1:26379/mymaster")
    assert "REDIS_URL" in str(refused.value) and "hunter2" not in str(refused.value)
