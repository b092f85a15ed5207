"""A seeded generator of realistic oplog entries, for benchmarks and ``shardstream bench``.

The mix, per entry: ~55 % inserts of ~300-byte documents, ~25 % ``$v:2`` updates,
~10 % deletes, ~5 % two-to-four-op transactions, ~5 % periodic no-ops, spread over a
few collections of one database.  The same seed always gives the same oplog.
"""

from __future__ import annotations

import datetime
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bson
from bson.binary import Binary
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

COLLECTIONS = ("orders", "customers", "events")
_WALL = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
_NULL_OPTIME = {"ts": Timestamp(0, 0), "t": Int64(-1)}


def generate_oplog(
    count: int, *, seed: int = 0, start: int = 1_700_000_000
) -> Iterator[dict[str, Any]]:
    """Yield ``count`` oplog entries of one shard, in ``ts`` order."""
    rng = random.Random(seed)
    uuids = {
        name: Binary(uuid.UUID(int=rng.getrandbits(128), version=4).bytes, 4)
        for name in COLLECTIONS
    }
    live: list[tuple[str, ObjectId]] = []
    seconds, increment = start, 0
    for _ in range(count):
        increment += 1
        if increment > 50:
            seconds, increment = seconds + 1, 1
        ts = Timestamp(seconds, increment)
        roll = rng.random()
        if roll < 0.05:
            yield _tail({"op": "n", "ns": "", "o": {"msg": "periodic noop"}}, ts)
        elif roll < 0.10:
            ops = [_insert_op(rng, uuids, live) for _ in range(rng.randint(2, 4))]
            entry = {
                "lsid": {"id": Binary(uuid.UUID(int=rng.getrandbits(128), version=4).bytes, 4)},
                "txnNumber": Int64(rng.randint(1, 1000)),
                "op": "c",
                "ns": "admin.$cmd",
                "o": {"applyOps": ops},
            }
            yield _tail(entry, ts, prevOpTime=_NULL_OPTIME)
        elif roll < 0.20 and live:
            coll, key = live.pop(rng.randrange(len(live)))
            yield _tail({"op": "d", "ns": f"shop.{coll}", "ui": uuids[coll], "o": {"_id": key}}, ts)
        elif roll < 0.45 and live:
            coll, key = live[rng.randrange(len(live))]
            diff = {"u": {"status": rng.choice(["paid", "sent", "done"]), "qty": rng.randint(1, 9)}}
            if rng.random() < 0.3:
                diff["sitems"] = {"a": True, "u0": {"sku": f"S{rng.randint(0, 999)}"}}
            yield _tail(
                {
                    "op": "u",
                    "ns": f"shop.{coll}",
                    "ui": uuids[coll],
                    "o": {"$v": 2, "diff": diff},
                    "o2": {"_id": key},
                },
                ts,
            )
        else:
            yield _tail(_insert_op(rng, uuids, live), ts)


def _insert_op(
    rng: random.Random, uuids: dict[str, Binary], live: list[tuple[str, ObjectId]]
) -> dict[str, Any]:
    coll = rng.choice(COLLECTIONS)
    key = ObjectId(rng.getrandbits(96).to_bytes(12, "big"))
    live.append((coll, key))
    document = {
        "_id": key,
        "customer": f"customer-{rng.randint(0, 99999):05d}",
        "status": "new",
        "qty": rng.randint(1, 9),
        "price": round(rng.uniform(1, 500), 2),
        "created": _WALL,
        "tags": [rng.choice(["a", "b", "c", "d"]) for _ in range(3)],
        "address": {
            "street": f"{rng.randint(1, 999)} Main St",
            "city": "Springfield",
            "zip": f"{rng.randint(10000, 99999)}",
        },
        "items": [{"sku": f"S{rng.randint(0, 999)}", "n": rng.randint(1, 5)} for _ in range(2)],
        "note": "x" * rng.randint(20, 60),
    }
    return {"op": "i", "ns": f"shop.{coll}", "ui": uuids[coll], "o": document, "o2": {"_id": key}}


def _tail(entry: dict[str, Any], ts: Timestamp, **extra: Any) -> dict[str, Any]:
    return {**entry, **extra, "ts": ts, "t": Int64(1), "v": Int64(2), "wall": _WALL}


def oplog_bytes(count: int, *, seed: int = 0) -> bytes:
    """The generated oplog as concatenated BSON (mongodump's oplog.bson layout)."""
    return b"".join(bson.encode(entry) for entry in generate_oplog(count, seed=seed))


def corpus_files(directory: Path, per_shard: int, shards: int = 4) -> str:
    """Write the corpus as one oplog.bson file per shard (``shard<N>.bson``, seed N) into
    ``directory``; return the ``NAME=PATH,...`` list naming them (the Spark source's
    ``oplog`` option)."""
    directory.mkdir(parents=True, exist_ok=True)
    parts = []
    for shard in range(shards):
        path = directory / f"shard{shard}.bson"
        path.write_bytes(oplog_bytes(per_shard, seed=shard))
        parts.append(f"shard{shard}={path}")
    return ",".join(parts)


def large_document_files(directory: Path, shards: int, per_shard: int, size: int) -> str:
    """One oplog.bson file per shard (``s<N>.bson``) of ``per_shard`` inserts of documents
    with ``size`` bytes of text, laid out as servers before 6.0 write them (no ``o2``), after
    a no-op at the files' common start (a stream resumed after any event finds its history
    on every shard); return the ``NAME=PATH,...`` list naming them."""
    directory.mkdir(parents=True, exist_ok=True)
    ui = Binary(uuid.UUID(int=7, version=4).bytes, 4)
    parts = []
    for shard in range(shards):
        path = directory / f"s{shard}.bson"
        with path.open("wb") as out:
            out.write(
                bson.encode(_tail({"op": "n", "ns": "", "o": {"msg": "start"}}, Timestamp(1, 1)))
            )
            for n in range(per_shard):
                document = {"_id": ObjectId(), "n": n, "blob": "y" * size}
                entry = {"op": "i", "ns": "shop.big", "ui": ui, "o": document}
                out.write(bson.encode(_tail(entry, Timestamp(1_700_000_000 + n, shard + 1))))
        parts.append(f"s{shard}={path}")
    return ",".join(parts)
