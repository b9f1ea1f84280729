"""Commands packed by hiredis (graph/checkpoint.py) are the bytes redis-py itself sends."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from bot.process.redis_client import FailoverConnection

COMMANDS: list[tuple[Any, ...]] = [
    ("SET", "key", "value"),
    ("CONFIG GET", "maxmemory"),  # a command of two words
    (b"SCRIPT LOAD", "return 1"),
    ("EVALSHA", "ab12", 2, "k1", "k2", 3600, 1700000000.0001, -51, 1e-07, float("inf")),
    ("HSET", "h", "text", "pourquoi ça plante ? 🔥", "raw", b"\x00\xff"),
    ("SET", "k", memoryview(b"view"), bytearray(b"array")),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: str(c[0]))
def test_hiredis_packs_the_same_bytes_as_redis_py(command: tuple[Any, ...]) -> None:
    ours = b"".join(FailoverConnection().pack_command(*command))
    theirs = b"".join(bytes(part) for part in Connection().pack_command(*command))

    assert ours == theirs


@pytest.mark.parametrize("value", [True, None, object()])
def test_what_redis_py_refuses_to_send_is_refused_as_redis_py_does(value: object) -> None:
    with pytest.raises(DataError):
        Connection().pack_command("SET", "k", value)
    with pytest.raises(DataError):
        FailoverConnection().pack_command("SET", "k", value)


@pytest.mark.parametrize(
    "options",
    [{"encoding": "latin-1"}, {"encoding": "ascii", "encoding_errors": "replace"}],
    ids=["latin-1", "ascii-replace"],
)
def test_a_client_with_its_own_encoding_is_packed_through_its_encoder(
    options: dict[str, str],
) -> None:
    command = ("SET", "k", "café")
    ours = b"".join(FailoverConnection(**options).pack_command(*command))  # type: ignore[arg-type]
    theirs = b"".join(bytes(part) for part in Connection(**options).pack_command(*command))  # type: ignore[arg-type]

    assert ours == theirs
