"""The valid inputs the fuzzer mutates: a few shards' oplogs of every entry shape.

Three sources, each small so that one input replays in milliseconds:
the benchmark generator (mongod's own field layout, the fast path's hot case), a seeded
simulated cluster (migrations, multi-shard transactions, DDL) and hand-made entries of the
shapes neither makes (commands, chained transactions, no-ops with ``o2``, odd ``_id``s).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import bson
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.bench.corpus import generate_oplog
from shardstream.sim import SimulatedCluster, SimulationConfig
from tests import factories as fx

Shards = list[tuple[str, list[bytes]]]


def bench_shards(entries: int = 24) -> Shards:
    """Two shards of the benchmark's entries (inserts, updates, deletes, transactions)."""
    return [
        (f"s{seed}", [bson.encode(entry) for entry in generate_oplog(entries, seed=seed)])
        for seed in (1, 2)
    ]


def simulated_shards(operations: int = 40, seed: int = 7) -> Shards:
    """A simulated 2-shard cluster's oplogs: migrations, transactions, DDL."""
    result = SimulatedCluster(SimulationConfig(shards=2, operations=operations, seed=seed)).run()
    return [
        (name, [bson.encode(entry) for entry in entries])
        for name, entries in sorted(result.oplogs.items())
    ]


def handmade_shards() -> Shards:
    """Entries of the shapes the generators do not write, over two shards."""
    ts = [Timestamp(1_700_000_100, i) for i in range(1, 40)]
    key_uuid = Binary(uuid.UUID(int=5, version=4).bytes, 4)
    first: list[dict[str, Any]] = [
        fx.noop(ts[0]),
        fx.command(ts[1], "shop", {"create": "items", "idIndex": {"v": 2, "key": {"_id": 1}}}),
        fx.insert(ts[2], {"_id": 1, "n": Int64(2), "d": Decimal128("1.5")}, ns="shop.items"),
        fx.insert(ts[3], {"_id": {"a": 1, "b": [1, 2]}, "s": "x"}, ns="shop.items"),
        fx.insert(ts[4], {"_id": key_uuid, "deep": {"x": {"y": {"z": 1}}}}, ns="shop.items"),
        fx.update(ts[5], 1, {"u": {"n": 3}, "i": {"new": "v"}}, ns="shop.items"),
        fx.update(ts[6], 1, {"d": {"s": False}, "sdeep": {"u": {"x": 2}}}, ns="shop.items"),
        fx.apply_ops(
            ts[7],
            [
                fx.inner(fx.insert(ts[7], {"_id": 10, "v": 1}, ns="shop.items")),
                fx.inner(fx.delete(ts[7], 1, ns="shop.items")),
            ],
        ),
        fx.apply_ops(
            ts[8],
            [fx.inner(fx.insert(ts[8], {"_id": 11}, ns="shop.items"))],
            partial=True,
            txn_number=2,
        ),
        fx.apply_ops(
            ts[9],
            [fx.inner(fx.insert(ts[9], {"_id": 12}, ns="shop.items"))],
            prev=ts[8],
            txn_number=2,
        ),
        fx.command(ts[10], "shop", {"collMod": "items", "validationLevel": "off"}),
        fx.command(ts[11], "shop", {"renameCollection": "shop.items", "to": "shop.items2"}),
        fx.delete(ts[12], 10, ns="shop.items2"),
        fx.noop(ts[13], {"migrateChunkToNewShard": "shop.items2", "fromShardId": "a"}),
        fx.command(ts[14], "shop", {"drop": "items2"}),
    ]
    second: list[dict[str, Any]] = [
        fx.noop(ts[0]),
        fx.insert(ts[1], {"_id": "x" * 40, "list": [{"a": 1}, None, 2.5]}, ns="shop.other"),
        fx.update(ts[3], "x" * 40, {"u": {"list": [1]}}, ns="shop.other"),
        fx.delete(ts[5], "x" * 40, ns="shop.other"),
        fx.noop(ts[20]),
    ]
    return [("h0", [bson.encode(e) for e in first]), ("h1", [bson.encode(e) for e in second])]


def all_seed_corpora() -> list[Shards]:
    """Every seed corpus, each a list of (shard name, encoded entries)."""
    return [bench_shards(), simulated_shards(), handmade_shards()]


def entry_count(shards: Sequence[tuple[str, list[bytes]]]) -> int:
    """How many entries the shards hold in all."""
    return sum(len(entries) for _, entries in shards)
