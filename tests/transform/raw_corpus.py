"""A seeded oplog that visits every branch of the fast path and of its fallback.

Unlike benchmarks/corpus.py (a realistic mix), this mixes in the shapes the fast
path must hand to the reference pipeline: other document keys, missing ``o2``,
fields in another order, session fields, migrations, sub-diffs, replacements,
``$v:1`` updates, system and filtered namespaces, no-ops with an ``o2`` and
transactions.  Every entry is valid: the stream never fails.
"""

from __future__ import annotations

import datetime
import random
import uuid
from collections.abc import Iterator
from typing import Any

from bson.binary import Binary
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

NAMESPACES = ("shop.orders", "shop.items", "other.orders", "shop.system.js", "shop.system.views")
_NULL_OPTIME = {"ts": Timestamp(0, 0), "t": Int64(-1)}


def _uuid(rng: random.Random) -> Binary:
    return Binary(uuid.UUID(int=rng.getrandbits(128), version=4).bytes, 4)


def generate_entries(count: int, seed: int) -> Iterator[dict[str, Any]]:
    """Yield ``count`` oplog entries of one shard in ``ts`` order."""
    rng = random.Random(seed)
    uuids = {ns: _uuid(rng) for ns in NAMESPACES}
    keys: list[tuple[str, Any]] = []
    for number in range(count):
        ts = Timestamp(1_700_000_000 + number // 7, number % 7 + 1)
        wall = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(
            milliseconds=number
        )
        ns = rng.choice(NAMESPACES)
        roll = rng.random()
        if roll < 0.05:
            o2 = {"msg": "periodic noop"} if rng.random() < 0.5 else None
            entry: dict[str, Any] = {"op": "n", "ns": "", "o": {"msg": "noop"}}
            if o2 is not None:
                entry["o2"] = {"shardCollection": "shop.orders"}
        elif roll < 0.10:
            ops = [_insert(rng, ns, uuids, keys) for _ in range(rng.randint(1, 3))]
            plain = [(key_ns, key) for key_ns, key in keys if "views" not in key_ns]
            if plain and rng.random() < 0.5:
                key_ns, key = rng.choice(plain)
                ops.append(
                    {"op": "u", "ns": key_ns, "ui": uuids[key_ns], "o": _update(rng), "o2": key}
                )
                key_ns, key = rng.choice(plain)
                ops.append({"op": "d", "ns": key_ns, "ui": uuids[key_ns], "o": key})
            entry = {
                "lsid": {"id": _uuid(rng)},
                "txnNumber": Int64(number),
                "op": "c",
                "ns": "admin.$cmd",
                "o": {"applyOps": ops},
                "prevOpTime": _NULL_OPTIME,
            }
        elif roll < 0.25 and keys:
            key_ns, key = rng.choice(keys)
            entry = {"op": "d", "ns": key_ns, "ui": uuids[key_ns], "o": key}
        elif roll < 0.55 and any("views" not in key_ns for key_ns, _ in keys):
            key_ns, key = rng.choice([(ns, key) for ns, key in keys if "views" not in ns])
            entry = {"op": "u", "ns": key_ns, "ui": uuids[key_ns], "o": _update(rng), "o2": key}
            if rng.random() < 0.05:
                entry["o"] = {"_id": key["_id"], "replaced": True}  # a replacement
        else:
            entry = _insert(rng, ns, uuids, keys)
            if rng.random() < 0.1:
                del entry["o2"]  # older oplogs: documentKey comes from o._id
        entry.update({"ts": ts, "t": Int64(1), "v": Int64(2), "wall": wall})
        _vary(rng, entry, number)
        yield entry


def _insert(
    rng: random.Random, ns: str, uuids: dict[str, Binary], keys: list[tuple[str, Any]]
) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.8:
        key: dict[str, Any] = {"_id": ObjectId(rng.getrandbits(96).to_bytes(12, "big"))}
    elif roll < 0.9:
        key = {"_id": f"key-{rng.randint(0, 10**6)}"}
    else:
        key = {"region": rng.choice(["eu", "us"]), "_id": ObjectId(bytes(rng.randbytes(12)))}
    if ns.endswith(".system.views"):  # a view definition: its _id is the view's namespace
        key = {"_id": f"shop.view{rng.randint(0, 99)}"}
        document = {**key, "viewOn": "orders", "pipeline": []}
    else:
        document = {**key, "n": rng.randint(0, 100), "tags": ["a", "b"], "sub": {"x": 1.5}}
    keys.append((ns, key))
    return {"op": "i", "ns": ns, "ui": uuids[ns], "o": document, "o2": key}


def _update(rng: random.Random) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.4:
        diff: dict[str, Any] = {"u": {"n": rng.randint(0, 9)}}
    elif roll < 0.55:
        diff = {"u": {"n": 1}, "i": {"new": "field", "n2": Int64(3)}}
    elif roll < 0.65:
        diff = {"i": {"only": True}}
    elif roll < 0.75:
        diff = {"d": {"n": False}, "u": {"m": 2}}
    elif roll < 0.85:
        diff = {"u": {"n": 2}, "ssub": {"u": {"x": 2.5}}}
    elif roll < 0.95:
        diff = {"stags": {"a": True, "u1": "c"}}
    else:
        return {"$v": Int64(2), "diff": {"u": {"n": 7}}}
    return {"$v": 2, "diff": diff}


def _vary(rng: random.Random, entry: dict[str, Any], number: int) -> None:
    """Rarely: session fields, a migration flag, or the fields in another order."""
    roll = rng.random()
    if roll < 0.05 and entry["op"] in "iud":
        entry.update({"lsid": {"id": Binary(bytes(16), 4)}, "txnNumber": Int64(number)})
        entry["stmtId"] = 0
        entry["prevOpTime"] = _NULL_OPTIME
    elif roll < 0.08:
        entry["fromMigrate"] = True
    elif roll < 0.12:
        items = list(entry.items())
        rng.shuffle(items)
        entry.clear()
        entry.update(items)
