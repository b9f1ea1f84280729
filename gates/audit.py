"""The audit stream as a hash chain, and its check.

Every entry carries `seq` (its place in the chain), `prev` (the hash of the entry before it)
and `hash`: SHA-256 over a canonical encoding of its other fields, in the order stored
(`prev` and `seq` among them). Appending is one Lua step (`APPEND_LUA`, part of every script
that writes the stream): read the chain's head, hash, XADD, record the new head, and trim.
Two writers therefore never fork the chain.

The head (`P:audit:head`: id, hash, seq of the newest entry) shows entries removed from the
new end; the checkpoint (`P:audit:checkpoint`: the same of the last entry trimmed, written in
the step that trims it) is where the chain starts once its old end is gone.
Redis's Lua has no SHA-256, so it is written out here (FIPS 180-4), checked against hashlib.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import redis.asyncio as aioredis

AUDIT_MAXLEN = 100_000
GENESIS = "0" * 64  # the `prev` of the chain's first entry
VERSION = b"tracegate-audit/1"

log = logging.getLogger(__name__)

# sha256(s) and audit_append(stream, head, checkpoint, maxlen, fields). Each item of the
# encoding is a netstring: "<bytes>:<item>,". Returns {id, seq, prev, hash}.
APPEND_LUA = (
    """
-- Redis's Lua has the `bit` library; the demo's embedded store (fakeredis) does not: there,
-- the same operations on unsigned numbers, four bits at a time.
local bit = bit or (function()
  local W = 4294967296
  local function u(x) return x % W end
  local AND, OR, XOR = {}, {}, {}
  for a = 0, 15 do
    for b = 0, 15 do
      local rand, rorr, rxor, p, x, y = 0, 0, 0, 1, a, b
      for _ = 1, 4 do
        local i, j = x % 2, y % 2
        if i == 1 and j == 1 then rand = rand + p end
        if i == 1 or j == 1 then rorr = rorr + p end
        if i ~= j then rxor = rxor + p end
        x, y, p = (x - i) / 2, (y - j) / 2, p * 2
      end
      AND[a * 16 + b], OR[a * 16 + b], XOR[a * 16 + b] = rand, rorr, rxor
    end
  end
  local function op(t, a, b)
    a, b = u(a), u(b)
    local r, p = 0, 1
    for _ = 1, 8 do
      local i, j = a % 16, b % 16
      r = r + t[i * 16 + j] * p
      a, b, p = (a - i) / 16, (b - j) / 16, p * 16
    end
    return r
  end
  local function fold(t)
    return function(a, ...)
      a = u(a)
      for k = 1, select('#', ...) do a = op(t, a, (select(k, ...))) end
      return a
    end
  end
  local function rshift(x, n) return math.floor(u(x) / 2 ^ n) end
  local function lshift(x, n) return (u(x) % 2 ^ (32 - n)) * 2 ^ n end
  return {
    band = fold(AND), bor = fold(OR), bxor = fold(XOR), tobit = u,
    bnot = function(x) return W - 1 - u(x) end, rshift = rshift, lshift = lshift,
    ror = function(x, n) return rshift(x, n) + lshift(x, 32 - n) end,
    tohex = function(x) return string.format('%08x', u(x)) end,
  }
end)()
local band, bor, bxor, bnot = bit.band, bit.bor, bit.bxor, bit.bnot
local rshift, lshift, ror, tobit = bit.rshift, bit.lshift, bit.ror, bit.tobit
local K = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}

local function sha256(msg)
  local len = #msg
  msg = msg .. '\\128' .. string.rep('\\0', (55 - len) % 64)
  -- the length in bits, 8 bytes big-endian (exact: a double holds it)
  for i = 7, 0, -1 do msg = msg .. string.char(math.floor(len * 8 / 2 ^ (8 * i)) % 256) end
  local H = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
             0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}
  local w = {}
  for chunk = 1, #msg, 64 do
    for i = 0, 15 do
      local b1, b2, b3, b4 = string.byte(msg, chunk + i * 4, chunk + i * 4 + 3)
      w[i] = bor(lshift(b1, 24), lshift(b2, 16), lshift(b3, 8), b4)
    end
    for i = 16, 63 do
      local s0 = bxor(ror(w[i - 15], 7), ror(w[i - 15], 18), rshift(w[i - 15], 3))
      local s1 = bxor(ror(w[i - 2], 17), ror(w[i - 2], 19), rshift(w[i - 2], 10))
      w[i] = tobit(w[i - 16] + s0 + w[i - 7] + s1)
    end
    local a, b, c, d, e, f, g, h = H[1], H[2], H[3], H[4], H[5], H[6], H[7], H[8]
    for i = 0, 63 do
      local S1 = bxor(ror(e, 6), ror(e, 11), ror(e, 25))
      local ch = bxor(band(e, f), band(bnot(e), g))
      local t1 = tobit(h + S1 + ch + K[i + 1] + w[i])
      local S0 = bxor(ror(a, 2), ror(a, 13), ror(a, 22))
      local maj = bxor(band(a, b), band(a, c), band(b, c))
      local t2 = tobit(S0 + maj)
      h, g, f, e, d, c, b, a = g, f, e, tobit(d + t1), c, b, a, tobit(t1 + t2)
    end
    H[1], H[2], H[3], H[4] = tobit(H[1] + a), tobit(H[2] + b), tobit(H[3] + c), tobit(H[4] + d)
    H[5], H[6], H[7], H[8] = tobit(H[5] + e), tobit(H[6] + f), tobit(H[7] + g), tobit(H[8] + h)
  end
  local out = {}
  for i = 1, 8 do out[i] = bit.tohex(H[i], 8) end
  return table.concat(out)
end

local function field_of(flat, name)
  for i = 1, #flat, 2 do
    if flat[i] == name then return flat[i + 1] end
  end
  return nil
end

local function audit_append(stream, head, checkpoint, maxlen, fields)
  local seq, prev = 0, '"""
    + GENESIS
    + """'
  local top = redis.call('HMGET', head, 'seq', 'hash')
  if top[1] then
    seq, prev = tonumber(top[1]), top[2]
  else  -- no head recorded (the first chained entry, or its record lost): the newest entry
    local newest = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
    if newest and field_of(newest[2], 'hash') then
      seq, prev = tonumber(field_of(newest[2], 'seq')) or 0, field_of(newest[2], 'hash')
    end
  end
  seq = seq + 1
  for _, item in ipairs({'seq', tostring(seq), 'prev', prev}) do fields[#fields + 1] = item end
  local encoded = {'"""
    + f"{len(VERSION)}:{VERSION.decode()},"
    + """'}
  for i = 1, #fields do encoded[#encoded + 1] = #fields[i] .. ':' .. fields[i] .. ',' end
  local hash = sha256(table.concat(encoded))
  fields[#fields + 1] = 'hash'
  fields[#fields + 1] = hash
  local id = redis.call('XADD', stream, '*', unpack(fields))
  redis.call('HSET', head, 'id', id, 'seq', seq, 'hash', hash)
  local excess = redis.call('XLEN', stream) - tonumber(maxlen)
  if excess > 0 then  -- trim the old end, and keep where the chain now starts
    local old = redis.call('XRANGE', stream, '-', '+', 'COUNT', excess + 1)
    local last = old[excess]
    redis.call('XTRIM', stream, 'MINID', old[excess + 1][1])
    redis.call('HSET', checkpoint, 'id', last[1], 'seq', field_of(last[2], 'seq') or '0',
               'hash', field_of(last[2], 'hash') or '')
  end
  return {id, tostring(seq), prev, hash}
end
"""
)


@dataclass(frozen=True)
class AuditKeys:
    stream: str
    head: str
    checkpoint: str

    @classmethod
    def of(cls, prefix: str) -> AuditKeys:
        stream = f"{prefix}:audit"
        return cls(stream, f"{stream}:head", f"{stream}:checkpoint")


def flat_fields(fields: Mapping[str, str]) -> str:
    """The fields as the scripts take them: a JSON list name, value, name, value…"""
    return json.dumps([item for pair in fields.items() for item in pair], ensure_ascii=False)


def as_text(value: Any) -> str:
    """A Redis reply as text, whether or not the client decodes responses."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def entry_hash(fields: Sequence[tuple[Any, Any]]) -> str:
    """SHA-256 over the canonical encoding of an entry's fields but `hash`, in stored order."""
    digest = hashlib.sha256(b"%d:%s," % (len(VERSION), VERSION))
    for name, value in fields:
        if _bytes(name) == b"hash":
            continue
        for item in (_bytes(name), _bytes(value)):
            digest.update(b"%d:%s," % (len(item), item))
    return digest.hexdigest()


def log_entry(entry_id: str, fields: Mapping[str, str], chained: Sequence[Any]) -> None:
    """The entry as a structured log line (`event=audit`): the second copy, for the log
    pipeline. Exactly the stored fields and the entry's id — nothing else."""
    _, seq, prev, digest = (as_text(part) for part in chained)
    entry = {"id": entry_id, **fields, "seq": seq, "prev": prev, "hash": digest}
    log.info(
        "audit %s",
        " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in entry.items()),
        extra={"event": "audit", "audit": entry},
    )


# One entry alone: KEYS stream, head, checkpoint; ARGV maxlen, fields.
APPEND_ONE_LUA = (
    APPEND_LUA + "return audit_append(KEYS[1], KEYS[2], KEYS[3], ARGV[1], cjson.decode(ARGV[2]))"
)


# --- verification ------------------------------------------------------------------------

Kind = Literal["changed", "inserted", "missing"]


@dataclass(frozen=True)
class Link:
    """Where a chain stands: an entry's id, seq and hash (the head, or the checkpoint)."""

    id: str
    seq: int
    hash: str


@dataclass(frozen=True)
class Problem:
    entry_id: str
    kind: Kind
    detail: str


@dataclass
class AuditReport:
    entries: int = 0
    chained: int = 0
    unchained: int = 0  # written before the chain: reported, not a failure
    checkpoint: Link | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        found = [f"{p.kind}: entry {p.entry_id}: {p.detail}" for p in self.problems]
        since = (
            f"; starts after trimmed entry {self.checkpoint.id} (seq {self.checkpoint.seq})"
            if self.checkpoint and self.checkpoint.seq
            else ""
        )
        summary = (
            f"{self.entries} entries: {self.chained} chained, {self.unchained} unchained "
            f"(written before the chain){since}"
        )
        verdict = "intact" if self.intact else f"NOT intact: {len(self.problems)} problem(s)"
        return [*found, f"{summary} — {verdict}"]


@dataclass(frozen=True)
class Entry:
    id: str
    fields: tuple[tuple[bytes, bytes], ...]

    def get(self, name: str) -> str | None:
        wanted = name.encode()
        return next((v.decode() for k, v in self.fields if k == wanted), None)


def _link(raw: Mapping[Any, Any]) -> Link | None:
    found = {as_text(k): as_text(v) for k, v in raw.items()}
    if not found.get("id"):
        return None
    return Link(found["id"], int(found.get("seq") or 0), found.get("hash", ""))


def verify_chain(
    entries: Sequence[Entry], head: Link | None, checkpoint: Link | None
) -> AuditReport:
    """What is wrong with the chain, entry by entry (oldest first)."""
    report = AuditReport(entries=len(entries), checkpoint=checkpoint)

    def problem(entry_id: str, kind: Kind, detail: str) -> None:
        report.problems.append(Problem(entry_id, kind, detail))

    # The entries the head's chain runs through, back from the head (to the first gap).
    by_hash: dict[str, Entry] = {}
    for entry in entries:
        by_hash.setdefault(entry.get("hash") or "", entry)
    on_path: set[str] = set()
    at = head.hash if head else None
    while at and at in by_hash and at not in on_path:
        on_path.add(at)
        at = by_hash[at].get("prev")
    links_on_path = {by_hash[h].get("prev") for h in on_path}

    trimmed = checkpoint if checkpoint and checkpoint.seq else None  # the old end is gone
    started = trimmed is not None
    prev, seq = (trimmed.hash, trimmed.seq + 1) if trimmed else (GENESIS, 1)
    last: Entry | None = None
    for entry in entries:
        stored = entry.get("hash")
        if stored is None:
            if started:
                problem(entry.id, "inserted", "it has no hash, yet it comes after the chain began")
            else:
                report.unchained += 1
            continue
        started = True
        report.chained += 1
        number = int(seq_text) if (seq_text := entry.get("seq") or "").isdigit() else None
        if number is None:
            problem(entry.id, "changed", "its seq is not a number")
            continue
        if head and number > head.seq:
            problem(
                entry.id,
                "inserted",
                f"seq {number} is past the chain's head (entry {head.id}, seq {head.seq}): "
                "it was not appended through the chain",
            )
            continue
        if number < seq:
            problem(
                entry.id,
                "inserted",
                f"it claims seq {number}, which the chain had passed (seq {seq} was due): "
                "a copy or a forged entry",
            )
            continue
        if on_path and stored not in on_path and entry.get("prev") in links_on_path:
            problem(
                entry.id,
                "inserted",
                "it forks off the chain: another entry, on the way to the head, is chained "
                "to the same predecessor",
            )
            continue
        if entry_hash(entry.fields) != stored:
            problem(entry.id, "changed", "its fields do not match its hash")
        elif number > seq:
            after = f"after entry {last.id}" if last else "at the old end"
            span = f"seq {seq}" if number == seq + 1 else f"seq {seq}–{number - 1}"
            problem(
                entry.id,
                "missing",
                f"{number - seq} entr{'y' if number == seq + 1 else 'ies'} ({span}) removed "
                f"before it, {after}",
            )
        elif entry.get("prev") != prev:
            if last is not None:
                problem(
                    last.id,
                    "changed",
                    f"its hash is not the one entry {entry.id} was chained to: it was "
                    "rewritten (its hash recomputed)",
                )
            else:
                where = f"trimmed entry {trimmed.id}" if trimmed else "the chain's start"
                problem(entry.id, "changed", f"it is not chained to {where}")
        prev, seq, last = stored, number + 1, entry

    if head is None:
        if last is not None:
            problem(
                last.id,
                "missing",
                "the record of the chain's head is gone: the newest entries cannot be "
                "checked (removed ones would not show)",
            )
    elif seq - 1 < head.seq:
        gone = head.seq - (seq - 1)
        after = f"after entry {last.id}" if last else "(none is left)"
        problem(
            head.id,
            "missing",
            f"the newest {gone} entr{'y' if gone == 1 else 'ies'} up to the head "
            f"(seq {head.seq}) removed, {after}",
        )
    elif last is not None and last.get("hash") != head.hash:
        problem(
            last.id,
            "changed",
            f"the newest entry is not the chain's recorded head (entry {head.id}): "
            "the chain was rewritten",
        )
    return report


async def read_and_verify(redis: aioredis.Redis, prefix: str) -> AuditReport:
    """Verify the stream as one snapshot: head, checkpoint and entries read in one
    transaction, so appends and trims meanwhile cannot look like tampering."""
    keys = AuditKeys.of(prefix)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hgetall(keys.head)
        pipe.hgetall(keys.checkpoint)
        pipe.xrange(keys.stream)
        head, checkpoint, raw = await pipe.execute()
    entries = [
        Entry(as_text(entry_id), tuple((_bytes(k), _bytes(v)) for k, v in (fields or {}).items()))
        for entry_id, fields in raw or []
    ]
    return verify_chain(entries, _link(head), _link(checkpoint))
