"""Seeded mutations of oplog files, entries, tokens and Extended JSON lines.

Two kinds for oplog files: byte-level (the damage a disk, a copy or a hand edit does:
flipped, zeroed and cut bytes, broken length prefixes) and field-level (well-formed BSON
of the wrong shape: fields missing, of another type, odd namespaces and ops, ``ts`` out
of order, nesting and sizes at the server's limits). Each mutation says what it did.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from typing import Any

import bson
from bson.binary import Binary
from bson.code import Code
from bson.dbref import DBRef
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS

Shards = list[tuple[str, list[bytes]]]
Mutation = Callable[[random.Random, Shards], str]

_ODD_VALUES: list[Any] = [
    None, 0, -1, 2**31, Int64(-(2**63)), 1.5, float("nan"), "", "x", "\u00e9\U0001f600",
    True, [], [1, "a"], {}, {"a": 1}, Timestamp(0, 0), Timestamp(2**32 - 1, 2**32 - 1),
    ObjectId("0" * 24), Binary(b"", 0), Binary(b"\x00" * 16, 4), Binary(b"", 3),
    Regex("^a", "i"), Code("f()"), Code("f()", {"x": 1}), MinKey(), MaxKey(),
    Decimal128("NaN"), Decimal128("-1E+6144"), DBRef("c", 1),
]  # fmt: skip
_NAMESPACES = [
    "", "shop", "shop.", ".x", "shop.items", "config.system.sessions", "shop.system.views",
    "admin.$cmd", "local.oplog.rs", "config.transactions", "shop.$cmd", "a" * 300 + ".b",
    "shop.system.buckets.t", "admin.system.users", "shop.x\u00e9",
]  # fmt: skip
_OPS = ["i", "u", "d", "c", "n", "x", "", "ii", "I", "xi", "km"]
_TOP_FIELDS = ["op", "ns", "o", "o2", "ts", "ui", "wall", "t", "v", "lsid", "txnNumber",
               "prevOpTime", "fromMigrate", "b"]  # fmt: skip


def decode(doc: bytes) -> dict[str, Any]:
    return bson.decode(doc, codec_options=OPLOG_CODEC_OPTIONS)


def _pick(rng: random.Random, shards: Shards) -> tuple[list[bytes], int]:
    entries = rng.choice([e for _, e in shards if e] or [shards[0][1]])
    return entries, rng.randrange(len(entries)) if entries else 0


# -- byte level ------------------------------------------------------------------------


def flip_byte(rng: random.Random, shards: Shards) -> str:
    entries, i = _pick(rng, shards)
    doc = bytearray(entries[i])
    at = rng.randrange(len(doc))
    doc[at] = rng.choice([0x00, 0xFF, 0x80, 0xC3, 0x7F, doc[at] ^ (1 << rng.randrange(8))])
    entries[i] = bytes(doc)
    return f"byte {at} of entry {i} set to {doc[at]:#x}"


def cut_entry(rng: random.Random, shards: Shards) -> str:
    entries, i = _pick(rng, shards)
    keep = rng.randrange(len(entries[i]))
    entries[i] = entries[i][:keep]
    return f"entry {i} cut to {keep} bytes"


def cut_inside(rng: random.Random, shards: Shards) -> str:
    """Remove or add bytes inside an entry, keeping its outer length prefix consistent."""
    entries, i = _pick(rng, shards)
    doc = bytearray(entries[i])
    at = rng.randrange(4, max(5, len(doc) - 1))
    if rng.random() < 0.5:
        del doc[at : at + rng.randint(1, 4)]
        what = "removed"
    else:
        doc[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        what = "inserted"
    struct.pack_into("<i", doc, 0, len(doc))
    entries[i] = bytes(doc)
    return f"bytes {what} at {at} of entry {i}"


def bad_length(rng: random.Random, shards: Shards) -> str:
    """Change a 4-byte little-endian number inside an entry (often a length prefix)."""
    entries, i = _pick(rng, shards)
    doc = bytearray(entries[i])
    at = rng.randrange(0, len(doc) - 4)
    value = rng.choice([0, 1, 4, 5, -1, 2**31 - 1, 0x73017301, len(doc), len(doc) + 1])
    if rng.random() < 0.5:
        value = struct.unpack_from("<i", doc, at)[0] + rng.choice([-1, 1])
    struct.pack_into("<i", doc, at, max(-(2**31), min(2**31 - 1, value)))
    entries[i] = bytes(doc)
    return f"int32 at {at} of entry {i} set to {value}"


def garbage_tail(rng: random.Random, shards: Shards) -> str:
    entries = rng.choice(shards)[1]
    entries.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 12))))
    return "garbage appended to a file"


# -- entry order -----------------------------------------------------------------------


def reorder(rng: random.Random, shards: Shards) -> str:
    entries, i = _pick(rng, shards)
    if len(entries) < 2:
        return "no reorder"
    j = rng.randrange(len(entries))
    choice = rng.random()
    if choice < 0.4:
        entries[i], entries[j] = entries[j], entries[i]
        return f"entries {i} and {j} swapped"
    if choice < 0.8:
        entries.insert(i, entries[i])
        return f"entry {i} twice"
    del entries[i]
    return f"entry {i} dropped"


# -- field level -----------------------------------------------------------------------


def _mutate_fields(rng: random.Random, shards: Shards, change: Callable[..., str]) -> str:
    entries, i = _pick(rng, shards)
    try:
        entry = decode(entries[i])
    except Exception:
        return "undecodable entry left alone"
    what = change(rng, entry, entries, i)
    entries[i] = bson.encode(entry)
    return f"entry {i}: {what}"


def drop_field(rng: random.Random, shards: Shards) -> str:
    def change(rng: random.Random, entry: dict[str, Any], *_: Any) -> str:
        target = _inner_op(rng, entry)
        name = rng.choice(list(target) or ["op"])
        target.pop(name, None)
        return f"{name} removed"

    return _mutate_fields(rng, shards, change)


def odd_value(rng: random.Random, shards: Shards) -> str:
    def change(rng: random.Random, entry: dict[str, Any], *_: Any) -> str:
        target = _inner_op(rng, entry)
        name = rng.choice(_TOP_FIELDS + list(target))
        target[name] = rng.choice(_ODD_VALUES)
        return f"{name} = {target[name]!r:.60}"

    return _mutate_fields(rng, shards, change)


def odd_namespace_or_op(rng: random.Random, shards: Shards) -> str:
    def change(rng: random.Random, entry: dict[str, Any], *_: Any) -> str:
        target = _inner_op(rng, entry)
        if rng.random() < 0.5:
            target["ns"] = rng.choice(_NAMESPACES)
            return f"ns = {target['ns']!r:.60}"
        target["op"] = rng.choice(_OPS)
        return f"op = {target['op']!r}"

    return _mutate_fields(rng, shards, change)


def odd_apply_ops(rng: random.Random, shards: Shards) -> str:
    def change(rng: random.Random, entry: dict[str, Any], *_: Any) -> str:
        o = entry.get("o")
        if not isinstance(o, dict) or "applyOps" not in o:
            entry["o"] = {"applyOps": rng.choice([1, "x", {}, [], [{}], [{"op": "i"}]])}
            entry["ns"] = "admin.$cmd"
            entry["op"] = "c"
            return f"o = {entry['o']!r}"
        ops = o["applyOps"]
        choice = rng.random()
        if choice < 0.3:
            first = ops[0] if isinstance(ops, list) and ops else {}  # an earlier mutation's
            o["applyOps"] = rng.choice([None, 5, "ops", {"0": first}])
        elif choice < 0.6 and isinstance(ops, list) and ops:
            op = ops[rng.randrange(len(ops))]
            if isinstance(op, dict):
                op.pop(rng.choice(["ns", "o", "op", "ui", "o2"]), None)
        elif isinstance(ops, list):
            ops.append(rng.choice([{}, 1, {"op": "c", "ns": "admin.$cmd", "o": {"applyOps": []}}]))
        return "applyOps changed"

    return _mutate_fields(rng, shards, change)


def ts_backwards(rng: random.Random, shards: Shards) -> str:
    def change(rng: random.Random, entry: dict[str, Any], entries: list[bytes], i: int) -> str:
        ts = entry.get("ts")
        if isinstance(ts, Timestamp) and ts.time > 0:
            entry["ts"] = rng.choice([Timestamp(ts.time - 1, ts.inc), Timestamp(0, 1)])
            if i > 0 and rng.random() < 0.5:
                try:
                    previous = decode(entries[i - 1]).get("ts")
                except Exception:
                    previous = None  # an entry damaged by an earlier mutation
                if isinstance(previous, Timestamp):
                    entry["ts"] = previous
        return f"ts = {entry.get('ts')!r}"

    return _mutate_fields(rng, shards, change)


def deep_or_large(rng: random.Random, shards: Shards) -> str:
    def change(rng: random.Random, entry: dict[str, Any], *_: Any) -> str:
        target = _inner_op(rng, entry)
        o = target.get("o")
        if not isinstance(o, dict):
            return "no document"
        choice = rng.random()
        if choice < 0.7:
            depth = rng.choice([98, 99, 100, 101, 150, 180, 199, 200, 201, 300, 600])
            value: Any = 1
            for _ in range(depth):
                value = {"d": value} if rng.random() < 0.8 else [value]
            o["deep"] = value
            return f"o nested {depth} deep"
        size = rng.choice([16 * 1024 * 1024 - 200, 16 * 1024 * 1024 + 9 * 1024, 17 * 1024 * 1024])
        o["big"] = "x" * size
        return f"o holds a {size}-byte string"

    return _mutate_fields(rng, shards, change)


def odd_id(rng: random.Random, shards: Shards) -> str:
    def change(rng: random.Random, entry: dict[str, Any], *_: Any) -> str:
        target = _inner_op(rng, entry)
        value = rng.choice(_ODD_VALUES)
        for name in ("o", "o2"):
            part = target.get(name)
            if isinstance(part, dict) and "_id" in part:
                part["_id"] = value
        return f"_id = {value!r:.60}"

    return _mutate_fields(rng, shards, change)


def _inner_op(rng: random.Random, entry: dict[str, Any]) -> dict[str, Any]:
    """The entry itself, or (half the time, when it has them) one of its applyOps."""
    o = entry.get("o")
    if isinstance(o, dict) and isinstance(o.get("applyOps"), list) and rng.random() < 0.5:
        ops = [op for op in o["applyOps"] if isinstance(op, dict)]
        if ops:
            return rng.choice(ops)  # type: ignore[no-any-return]
    return entry


BYTE_MUTATIONS: list[Mutation] = [flip_byte, cut_entry, cut_inside, bad_length, garbage_tail]
FIELD_MUTATIONS: list[Mutation] = [
    drop_field, odd_value, odd_namespace_or_op, odd_apply_ops, ts_backwards, odd_id, reorder,
]  # fmt: skip
# Rare: each costs a 16 MiB+ document.
HEAVY_MUTATIONS: list[Mutation] = [deep_or_large]


def mutate(rng: random.Random, shards: Shards) -> str:
    """Apply one to three mutations to ``shards`` in place; say what they were."""
    done = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        roll = rng.random()
        if roll < 0.45:
            mutation = rng.choice(BYTE_MUTATIONS)
        elif roll < 0.97:
            mutation = rng.choice(FIELD_MUTATIONS)
        else:
            mutation = rng.choice(HEAVY_MUTATIONS)
        if not all(len(doc) >= 8 for _, entries in shards for doc in entries):
            mutation = garbage_tail  # an entry cut very short leaves little to mutate
        done.append(f"{mutation.__name__}: {mutation(rng, shards)}")
    return "; ".join(done)


# -- tokens and Extended JSON lines ----------------------------------------------------

_HEX = "0123456789ABCDEFabcdef"
_TYPE_BITS = '{"$binary": {"base64": "gA==", "subType": "00"}}'


def mutate_token_hex(rng: random.Random, data: str) -> str:
    """A damaged ``_data`` hex string."""
    text = list(data)
    choice = rng.random()
    if choice < 0.3 and text:
        at = rng.randrange(len(text))
        text[at] = rng.choice(_HEX + "xZ ")
    elif choice < 0.5:
        text = text[: rng.randrange(len(text) + 1)]
    elif choice < 0.7:
        at = rng.randrange(len(text) + 1)
        text[at:at] = rng.choice(_HEX) * rng.choice([1, 2])
    elif choice < 0.85 and len(text) > 4:
        at = rng.randrange(0, len(text) - 2, 2)
        text[at : at + 2] = rng.choice(["00", "FF", "0A", "14", "3C", "82", "F0", "2B"])
    else:
        return rng.choice(["", " ", "0", "82", "8200", "zz", "00" * 40, data.lower()])
    return "".join(text)


def token_document_variant(rng: random.Random, data: str) -> str:
    """A token document, well-formed or not, in Extended JSON."""
    return rng.choice(
        [
            f'{{"_data": "{data}"}}',
            f'{{"_data": "{data}", "_typeBits": {_TYPE_BITS}}}',
            f'{{"_data": "{data}", "_typeBits": "x"}}',
            '{"_data": 1}',
            '{"_data": {"$numberDecimal": "1e99999999"}}',
            '{"_data": {"$oid": "zz"}}',
            '{"_data": {"$date": 1e400}}',
            '{"_data": {"$binary": {"base64": "AAAA", "subType": "00"}}}',
            "{}",
            "[]",
            '{"_data": "' + data + '"',
            "[" * 3000 + "]" * 3000,
            '{"a": ' * 3000 + "1" + "}" * 3000,
            f'{{"_data": "{data}", "extra": 1}}',
        ]
    )


def mutate_json_line(rng: random.Random, line: bytes) -> bytes:
    """A damaged Extended JSON line."""
    text = bytearray(line)
    choice = rng.random()
    if choice < 0.3 and text:
        at = rng.randrange(len(text))
        text[at] = rng.choice(b'{}[]":,0\\x\xff\xc3 ')
    elif choice < 0.5:
        text = text[: rng.randrange(len(text) + 1)]
    elif choice < 0.65 and text:
        at = rng.randrange(len(text))
        del text[at]
    elif choice < 0.75:
        return b'{"x": ' * 3000 + b"1" + b"}" * 3000
    elif choice < 0.85:
        return rng.choice([b"\xff\xfe", b"null", b"[]", b"1", b'"s"', b"{}", b'{"op": "i"}'])
    else:
        for key in (b'"$numberLong": "', b'"$timestamp": {"t": ', b'"$date": '):
            at = text.find(key)
            if at >= 0:
                end = at + len(key)
                text[end:end] = rng.choice([b"-", b"99999999999999999999", b"1e400", b"x"])
                break
    return bytes(text)
