"""The audit stream is a hash chain: what a tamperer with access to the stream can do to it —
delete an entry (XDEL), add one (XADD, always with a later id), rewrite the stream with
altered content (DEL, then XADD with the old ids) — is reported by `verify`, naming the entry;
trimming keeps a checkpoint, and concurrent writers keep one chain."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.process.logs import configure_logging
from gates.audit import GENESIS, AuditKeys, AuditReport, entry_hash, read_and_verify
from gates.model import ActionRequest
from gates.store import ActionStore
from sandbox.fleet import free_port
from sandbox.prefork import run_forked

Raw = list[tuple[str, dict[str, str]]]


@pytest.fixture
def prefix() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A plain client, as a tamperer with Redis access has."""
    client = aioredis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
def store(redis_client: aioredis.Redis, prefix: str) -> ActionStore:
    return ActionStore(redis_client, prefix)


async def _write(store: ActionStore, n: int) -> None:
    for i in range(n):
        await store.audit_event("breaker_reset", f"U{i}", f"reset number {i}", "shop/x")


async def _entries(raw: aioredis.Redis, prefix: str) -> Raw:
    return list(await raw.xrange(AuditKeys.of(prefix).stream))


async def _verify(store: ActionStore) -> AuditReport:
    return await read_and_verify(store.redis, store.prefix)


def _found(report: AuditReport) -> list[tuple[str, str]]:
    return [(p.kind, p.entry_id) for p in report.problems]


async def _rewrite(raw: aioredis.Redis, prefix: str, entries: Raw) -> None:
    """What a tamperer does to change an entry in place: the stream rebuilt, same ids."""
    stream = AuditKeys.of(prefix).stream
    await raw.delete(stream)
    for entry_id, fields in entries:
        await raw.xadd(stream, fields, id=entry_id)  # type: ignore[arg-type]


def _rehashed(fields: dict[str, str]) -> dict[str, str]:
    return {**fields, "hash": entry_hash(list(fields.items()))}


async def test_an_intact_chain_verifies_each_entry_chained_to_the_one_before(
    store: ActionStore, raw: aioredis.Redis, prefix: str
) -> None:
    request = ActionRequest(
        action="scale", namespace="shop", deployment="x", thread_key="t", requester="U1"
    )
    await store.create(request)
    await store.transition(request.id, "refused", "gates", "kill switch")
    await store.audit_event("rubric_set", "U2", "cause stated ✅ 🚀 " + "ü" * 480, "C1")
    entries = await _entries(raw, prefix)
    assert [f["seq"] for _, f in entries] == ["1", "2", "3"]
    assert [f["prev"] for _, f in entries] == [
        GENESIS,
        entries[0][1]["hash"],
        entries[1][1]["hash"],
    ]
    # The hash Redis's Lua computed is hashlib's SHA-256 of the same encoding (multi-byte
    # characters, several 64-byte blocks).
    assert all(entry_hash(list(f.items())) == f["hash"] for _, f in entries)
    report = await _verify(store)
    assert (report.intact, report.chained, report.unchained) == (True, 3, 0)


async def test_a_removed_middle_entry_is_missing_before_the_entry_that_follows(
    store: ActionStore, raw: aioredis.Redis, prefix: str
) -> None:
    await _write(store, 5)
    entries = await _entries(raw, prefix)
    await raw.xdel(AuditKeys.of(prefix).stream, entries[2][0])
    report = await _verify(store)
    assert _found(report) == [("missing", entries[3][0])]
    assert (
        f"1 entry (seq 3) removed before it, after entry {entries[1][0]}"
        in report.problems[0].detail
    )


async def test_removed_newest_and_oldest_entries_are_missing(
    store: ActionStore, raw: aioredis.Redis, prefix: str
) -> None:
    await _write(store, 5)
    entries = await _entries(raw, prefix)
    stream = AuditKeys.of(prefix).stream
    await raw.xdel(stream, entries[0][0], entries[4][0])
    report = await _verify(store)
    assert _found(report) == [("missing", entries[1][0]), ("missing", entries[4][0])]
    assert "at the old end" in report.problems[0].detail
    assert "the newest 1 entry up to the head (seq 5) removed" in report.problems[1].detail


async def test_an_entry_added_without_a_hash_is_inserted(
    store: ActionStore, raw: aioredis.Redis, prefix: str
) -> None:
    await _write(store, 2)
    forged = await raw.xadd(
        AuditKeys.of(prefix).stream, {"event": "approved", "actor": "U_LEAD", "note": "ok"}
    )
    await _write(store, 1)
    report = await _verify(store)
    assert _found(report) == [("inserted", forged)]


async def test_a_forged_entry_chained_onto_the_head_is_inserted_before_and_after_more_appends(
    store: ActionStore, raw: aioredis.Redis, prefix: str
) -> None:
    """The tamperer knows the encoding: seq, prev and hash are right, only the head record
    (written in the same step as every real append) does not know the entry."""
    await _write(store, 2)
    ((_, newest),) = (await _entries(raw, prefix))[-1:]
    fields = {"event": "approved", "actor": "U_LEAD", "note": "", "at": "1.0"}
    fields |= {"seq": "3", "prev": newest["hash"]}
    forged = await raw.xadd(AuditKeys.of(prefix).stream, _rehashed(fields))  # type: ignore[arg-type]
    assert _found(await _verify(store)) == [("inserted", forged)]
    await _write(store, 2)  # chained onto the real head: the forged entry forks off
    report = await _verify(store)
    assert _found(report) == [("inserted", forged)]
    assert "forks off the chain" in report.problems[0].detail


async def test_an_edit_by_removing_and_adding_a_forged_copy_is_a_missing_and_an_inserted_entry(
    store: ActionStore, raw: aioredis.Redis, prefix: str
) -> None:
    await _write(store, 4)
    entries = await _entries(raw, prefix)
    stream = AuditKeys.of(prefix).stream
    edited_id, edited = entries[1]
    await raw.xdel(stream, edited_id)
    forged = await raw.xadd(stream, _rehashed({**edited, "actor": "U_SOMEONE_ELSE"}))  # type: ignore[arg-type]
    report = await _verify(store)
    assert _found(report) == [("missing", entries[2][0]), ("inserted", forged)]


@pytest.mark.parametrize("rehash", ["none", "the entry", "the rest of the chain"])
async def test_an_entry_changed_by_rewriting_the_stream_is_changed(
    store: ActionStore, raw: aioredis.Redis, prefix: str, rehash: str
) -> None:
    await _write(store, 4)
    entries = await _entries(raw, prefix)
    altered = [(i, dict(f)) for i, f in entries]
    altered[1][1]["note"] = "reset by someone else"
    if rehash != "none":
        altered[1] = (altered[1][0], _rehashed(altered[1][1]))
    if rehash == "the rest of the chain":
        for n in (2, 3):
            fields = {**altered[n][1], "prev": altered[n - 1][1]["hash"]}
            altered[n] = (altered[n][0], _rehashed(fields))
    await _rewrite(raw, prefix, altered)
    report = await _verify(store)
    changed = {
        "none": entries[1][0],
        "the entry": entries[1][0],
        "the rest of the chain": entries[3][0],
    }
    assert _found(report) == [("changed", changed[rehash])]


async def test_after_trimming_the_chain_verifies_from_its_checkpoint(
    redis_client: aioredis.Redis, raw: aioredis.Redis, prefix: str
) -> None:
    store = ActionStore(redis_client, prefix, audit_maxlen=3)
    await _write(store, 4)
    before = await _entries(raw, prefix)
    await _write(store, 3)
    kept = await _entries(raw, prefix)
    assert [f["seq"] for _, f in kept] == ["5", "6", "7"]
    checkpoint = await raw.hgetall(AuditKeys.of(prefix).checkpoint)
    assert checkpoint == {"id": before[-1][0], "seq": "4", "hash": before[-1][1]["hash"]}
    report = await _verify(store)
    assert report.intact, report.lines()
    assert report.checkpoint is not None and report.checkpoint.seq == 4
    # Removing the old end past the checkpoint is still seen.
    await raw.xdel(AuditKeys.of(prefix).stream, kept[0][0])
    assert _found(await _verify(store)) == [("missing", kept[1][0])]


async def test_entries_written_before_the_chain_are_unchained_and_do_not_fail(
    store: ActionStore, raw: aioredis.Redis, prefix: str
) -> None:
    stream = AuditKeys.of(prefix).stream
    for n in range(2):
        await raw.xadd(stream, {"event": "created", "actor": f"U{n}", "note": "old"})
    await _write(store, 2)
    report = await _verify(store)
    assert (report.intact, report.chained, report.unchained) == (True, 2, 2)
    assert "2 unchained (written before the chain)" in report.lines()[-1]


async def test_concurrent_writers_on_their_own_connections_keep_one_chain(
    redis_url: str, raw: aioredis.Redis, prefix: str
) -> None:
    clients = [aioredis.from_url(redis_url) for _ in range(4)]
    try:
        stores = [ActionStore(client, prefix) for client in clients]
        await asyncio.gather(*(_write(s, 25) for s in stores))
    finally:
        for client in clients:
            await client.aclose()
    entries = await _entries(raw, prefix)
    assert [int(f["seq"]) for _, f in entries] == list(range(1, 101))
    assert all(f["prev"] == entries[n - 1][1]["hash"] for n, (_, f) in enumerate(entries) if n)
    assert (await read_and_verify(raw, prefix)).intact


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


async def test_every_entry_is_also_a_json_log_line_with_exactly_its_fields(
    store: ActionStore,
    raw: aioredis.Redis,
    prefix: str,
    capsys: pytest.CaptureFixture[str],
    restored_logging: None,
) -> None:
    configure_logging("INFO", "json")
    request = ActionRequest(
        action="scale", namespace="shop", deployment="x", thread_key="t", requester="U1"
    )
    await store.create(request)
    await store.transition(request.id, "refused", "gates", "kill switch")
    await store.audit_event("rubric_cleared", "U2", "", "C1")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    audits = [line for line in lines if line.get("event") == "audit"]
    entries = await _entries(raw, prefix)
    assert [line["audit"] for line in audits] == [{"id": i, **f} for i, f in entries]
    standard = {"time", "level", "logger", "message", "event", "audit"}
    assert {key for line in audits for key in line} == standard


def _cli_env(redis_url: str, prefix: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "REDIS_URL": redis_url, "REDIS_PREFIX": prefix}


async def test_audit_verify_as_a_process_exits_0_intact_1_tampered_2_unreadable(
    store: ActionStore, raw: aioredis.Redis, prefix: str, redis_url: str
) -> None:
    cwd = Path(tempfile.gettempdir())
    await _write(store, 3)
    code, out, err = await run_forked(["audit", "verify"], _cli_env(redis_url, prefix), cwd)
    assert (code, err) == (0, ""), out
    assert "3 entries: 3 chained, 0 unchained (written before the chain) — intact" in out

    entries = await _entries(raw, prefix)
    await raw.xdel(AuditKeys.of(prefix).stream, entries[1][0])
    code, out, _ = await run_forked(["audit", "verify"], _cli_env(redis_url, prefix), cwd)
    assert code == 1
    assert f"missing: entry {entries[2][0]}: 1 entry (seq 2) removed" in out

    nobody = f"redis://127.0.0.1:{free_port()}/0"
    env = {**_cli_env(nobody, prefix), "REDIS_FAILOVER_TIMEOUT": "0.5"}
    code, out, err = await run_forked(["audit", "verify"], env, cwd)
    assert (code, out) == (2, "")
    assert "cannot read" in err and "REDIS_URL" in err


async def test_the_demos_embedded_store_chains_the_same_hashes_without_luas_bit_library() -> None:
    """fakeredis's Lua lacks `bit`: the script's own bit operations give hashlib's SHA-256."""
    from fakeredis.aioredis import FakeRedis

    embedded = FakeRedis(decode_responses=True)
    store = ActionStore(embedded, "demo")
    await store.audit_event("rubric_set", "U2", "cause stated ✅ 🚀 " + "ü" * 480, "C1")
    await _write(store, 2)
    entries = await _entries(embedded, "demo")
    assert all(entry_hash(list(f.items())) == f["hash"] for _, f in entries)
    assert (await read_and_verify(embedded, "demo")).intact
