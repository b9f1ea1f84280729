"""The one place a tracegate process makes a Redis client: the bot's own keys, the job queue,
the checkpointer and the model limiter all use the client `connect_redis` returns.

A failover is a pause, not an outage: a command that meets a dropped connection, a timeout or
a `READONLY` reply (a primary demoted under it) reconnects — through Sentinel, to whichever
node is the primary now — and is retried with backoff until `REDIS_FAILOVER_TIMEOUT` has
passed since it first failed. `REDIS_SOCKET_TIMEOUT` bounds every connect and every read, so
a peer that stopped answering (a frozen VM, SIGSTOP) fails a command instead of blocking it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.connection import Connection, SSLConnection, parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import (
    Sentinel,
    SentinelManagedConnection,
    SentinelManagedSSLConnection,
)
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError, ReadOnlyError, RedisError, TimeoutError

SENTINEL_SCHEME = "redis+sentinel"
SCHEMES = ("redis", "rediss", "unix", SENTINEL_SCHEME)
T = TypeVar("T")


@dataclass(frozen=True)
class RedisSpec:
    """Where Redis is and how to ride out its failovers (from the REDIS_* settings)."""

    url: str
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    tls: bool = False  # the data nodes (rediss:// says so too)
    sentinel_tls: bool = False
    tls_ca_file: str | None = None
    failover_timeout_s: float = 30.0
    socket_timeout_s: float = 5.0


@dataclass(frozen=True)
class SentinelAddress:
    """`redis+sentinel://[user:password@]host1:26379,host2:26380/<service>[/<db>]`."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int
    username: str | None
    password: str | None


def redacted(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + netloc))


def parse_sentinel_url(url: str) -> SentinelAddress:
    """The sentinels, service and database of a Sentinel URL; ValueError says what is wrong.
    A user and password in the URL are the data nodes' (as the checkpointer library reads
    them); the sentinels' own are REDIS_SENTINEL_USERNAME / REDIS_SENTINEL_PASSWORD."""
    parts = urlsplit(url)
    credentials, _, hosts = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    sentinels = []
    for host in filter(None, hosts.split(",")):
        name, _, port = host.rpartition(":") if ":" in host else (host, "", "26379")
        if not name or not port.isdigit():
            raise ValueError(f"{host!r} is not a sentinel like host:26379")
        sentinels.append((name.strip("[]"), int(port)))
    if not sentinels:
        raise ValueError(
            "names no sentinel; use redis+sentinel://host1:26379,host2:26379/mymaster/0"
        )
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError(
            "names no service: add the Sentinel service name, redis+sentinel://hosts/mymaster/0"
        )
    if len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ValueError(f"{parts.path!r} is not /<service>/<db>, e.g. /mymaster/0")
    return SentinelAddress(
        tuple(sentinels),
        unquote(path[0]),
        int(path[1]) if len(path) == 2 else 0,
        unquote(username) or None,
        unquote(password) or None,
    )


class FailoverRetry(Retry):
    """redis-py's retry, bounded by time instead of a count: a failover takes as long as
    Sentinel's `down-after-milliseconds` plus the election (30 s and more with its
    defaults), whatever the number of attempts in between."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(
            ExponentialBackoff(cap=1.0, base=0.05), retries=-1, supported_errors=RETRIED
        )
        self.timeout_s = timeout_s

    async def call_with_retry(
        self,
        do: Callable[[], Awaitable[T]],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> T:
        self._backoff.reset()  # type: ignore[no-untyped-call]
        failures = 0
        deadline = 0.0
        while True:
            try:
                return await do()
            except self._supported_errors as error:
                if is_retryable and not is_retryable(error):
                    raise
                failures += 1
                await (fail(error, failures) if with_failure_count else fail(error))
                now = time.monotonic()
                deadline = deadline or now + self.timeout_s
                if now >= deadline:
                    raise
                await asyncio.sleep(min(self._backoff.compute(failures), deadline - now))


RETRIED: tuple[type[RedisError], ...] = (ConnectionError, TimeoutError)


class FailoverConnection(Connection):
    """A connection that reads `READONLY` (its node was demoted to a replica) as a lost
    connection: it disconnects, so the retry reconnects to the primary — through Sentinel,
    or the address a managed Redis moved to the new primary."""

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().read_response(*args, **kwargs)
        except ReadOnlyError as error:
            await self.disconnect()
            raise ConnectionError(f"READONLY: {error}; reconnecting to the primary") from error


class FailoverSSLConnection(FailoverConnection, SSLConnection):
    pass


class _AsksSentinel(SentinelManagedConnection):
    """redis-py's Sentinel connection asks Sentinel for the primary in `connect()`, but a
    command on a dropped connection reconnects through `connect_check_health()`, to the
    address it had: the dead primary's, for the whole failover, and then a replica's.
    Every reconnect asks Sentinel here."""

    async def connect_check_health(
        self, check_health: bool = True, retry_socket_connect: bool = True
    ) -> None:
        if self.is_connected:
            return
        if retry_socket_connect:  # not Sentinel's own `connect_to`, which passes False
            await self.connect()  # type: ignore[no-untyped-call]
            return
        await super().connect_check_health(check_health, retry_socket_connect)


class SentinelFailoverConnection(FailoverConnection, _AsksSentinel):
    pass


class SentinelFailoverSSLConnection(
    FailoverConnection, _AsksSentinel, SentinelManagedSSLConnection
):
    pass


MAX_CONNECTIONS = 200  # per process; commands beyond wait for one to be free
SENTINEL_MAX_CONNECTIONS = 1000


def _credentials(username: str | None, password: str | None) -> dict[str, Any]:
    """The options of the credentials that are set."""
    return {k: v for k, v in (("username", username), ("password", password)) if v}


def _tls_options(ca_file: str | None) -> dict[str, Any]:
    return {"ssl_ca_certs": ca_file} if ca_file else {}


def connect_redis(spec: RedisSpec) -> aioredis.Redis:
    """A client on `spec.url` — `redis://`, `rediss://`, `unix://` or `redis+sentinel://` —
    that retries through failovers (module docstring). It connects on its first command."""
    # The options of every connection to a data node (the sentinels' are their own).
    options: dict[str, Any] = {
        "retry": FailoverRetry(spec.failover_timeout_s),
        "retry_on_error": list(RETRIED),
        "socket_timeout": spec.socket_timeout_s,
        "socket_connect_timeout": spec.socket_timeout_s,
        "health_check_interval": 10,
        "socket_keepalive": True,
        **_credentials(spec.username, spec.password),
    }
    if urlsplit(spec.url).scheme == SENTINEL_SCHEME:
        return _sentinel_client(spec, options)
    url_options: dict[str, Any] = dict(parse_url(spec.url))
    options |= url_options  # the URL's user and password agree with the settings' (settings)
    plain = url_options.get("connection_class")  # None: redis://; unix:// keeps its own
    tls = spec.tls if plain is None else issubclass(plain, SSLConnection)  # rediss://
    if plain is None or tls:
        options["connection_class"] = FailoverSSLConnection if tls else FailoverConnection
    if tls:
        options |= _tls_options(spec.tls_ca_file)
    # A burst past the pool waits its turn for a connection (up to the socket timeout)
    # instead of failing: redis-py's default pool raises "Too many connections" at 100, and
    # 200 alert notifications at once are 200 commands in flight.
    pool = aioredis.BlockingConnectionPool(
        max_connections=MAX_CONNECTIONS, timeout=spec.socket_timeout_s, **options
    )
    return aioredis.Redis.from_pool(pool)


class _SentinelPrimary(aioredis.Redis):
    """The client of a Sentinel service's primary, which closes its sentinels' clients too
    (redis-py leaves them to whoever made the `Sentinel`)."""

    sentinels: Sentinel | None = None

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        if self.sentinels is not None:
            await self.sentinels.aclose()


def _sentinel_client(spec: RedisSpec, options: dict[str, Any]) -> aioredis.Redis:
    address = parse_sentinel_url(spec.url)
    options = _credentials(address.username, address.password) | options  # the settings' win
    sentinel_options: dict[str, Any] = {
        "socket_timeout": spec.socket_timeout_s,
        "socket_connect_timeout": spec.socket_timeout_s,
        **_credentials(spec.sentinel_username, spec.sentinel_password),
    }
    if spec.sentinel_tls:
        sentinel_options |= {"ssl": True, **_tls_options(spec.tls_ca_file)}
    if spec.tls:
        options |= _tls_options(spec.tls_ca_file)
    sentinel = Sentinel(list(address.sentinels), sentinel_kwargs=sentinel_options)  # type: ignore[no-untyped-call]
    client: _SentinelPrimary = sentinel.master_for(
        address.service,
        redis_class=_SentinelPrimary,
        connection_class=SentinelFailoverSSLConnection if spec.tls else SentinelFailoverConnection,
        db=address.db,
        max_connections=SENTINEL_MAX_CONNECTIONS,  # its pool cannot wait: room for bursts
        **options,
    )
    client.sentinels = sentinel
    return client
