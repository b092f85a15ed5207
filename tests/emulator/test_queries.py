"""Emulator: find's sort, skip and projection, ``$expr``, aggregate's subset, and the BSON order.

The order the emulator sorts and compares by is checked against
``shardstream.match.order``, the client-side mirror of the server's
``compareElementValues``, so the two stand for the server together.
"""

from __future__ import annotations

import functools
from typing import Any, cast

import bson
import pytest
from bson.code import Code
from bson.codec_options import CodecOptions
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp
from hypothesis import given, settings
from hypothesis import strategies as st
from pymongo.collection import Collection
from pymongo.errors import OperationFailure

from shardstream.emulator import EmulatedCluster
from shardstream.emulator.bson_order import compare as emulator_compare
from shardstream.emulator.wire import CODEC_OPTIONS
from shardstream.match.order import compare as server_compare
from tests.strategies import DRIVER_SCALARS, TEXT

from .conftest import ClientFactory

VALUES: st.SearchStrategy[Any] = st.recursive(
    DRIVER_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "_id", "z"]), children, max_size=3),
        st.builds(Code, TEXT, st.dictionaries(st.sampled_from(["x", "y"]), children, max_size=2)),
    ),
    max_leaves=6,
)
RAW = CodecOptions(document_class=RawBSONDocument)
MIXED_IDS = [
    MaxKey(),
    "b",
    {"k": 1},
    ObjectId("64a000000000000000000001"),
    2.5,
    None,
    True,
    Int64(7),
    float("nan"),
    MinKey(),
    "a",
    Decimal128("-1.5"),
    b"\x01",
]


def _as_wire_decodes(value: Any) -> Any:
    return bson.decode(bson.encode({"v": value}), CODEC_OPTIONS)["v"]


def _sign(number: int) -> int:
    return (number > 0) - (number < 0)


@given(VALUES, VALUES)
@settings(max_examples=300)
def test_the_emulators_order_is_the_servers(left: Any, right: Any) -> None:
    decoded = _as_wire_decodes(left), _as_wire_decodes(right)
    assert emulator_compare(*decoded) == _sign(server_compare(left, right))


def test_find_sorts_skips_limits_and_projects_across_types(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    cluster.shards[0].load_collection("db.c", [{"_id": v, "n": i} for i, v in enumerate(MIXED_IDS)])
    coll = client_factory(cluster.uri).db.c
    expected = sorted(MIXED_IDS, key=functools.cmp_to_key(server_compare))
    found = list(coll.find({}, {"_id": 1}).sort("_id", 1))
    assert [bson.encode(doc) for doc in found] == [bson.encode({"_id": v}) for v in expected]
    page = list(coll.find({}, {"n": 1, "_id": 0}).sort("_id", -1).skip(2).limit(3))
    assert page == [{"n": MIXED_IDS.index(v)} for v in list(reversed(expected))[2:5]]
    assert list(coll.find({"_id": "a"}, {"_id": 0})) == [{"n": MIXED_IDS.index("a")}]
    with pytest.raises(OperationFailure) as mixed:
        coll.find_one({}, {"n": 1, "other": 0})
    assert mixed.value.code == 31254
    with pytest.raises(OperationFailure) as unmatched:  # refused before any document is read
        coll.find_one({"_id": "no such"}, {"n": 1, "other": 0})
    assert unmatched.value.code == 31254


def test_match_comparisons_stay_in_their_type_bracket_and_expr_crosses_them(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    cluster.shards[0].load_collection("db.c", [{"_id": v} for v in MIXED_IDS])
    coll = client_factory(cluster.uri).db.c
    bracketed = {bson.encode(d) for d in coll.find({"_id": {"$gte": 2}})}
    assert bracketed == {bson.encode({"_id": v}) for v in (2.5, Int64(7))}
    assert len(list(coll.find({"_id": {"$gt": MinKey()}}))) == len(MIXED_IDS) - 1
    crossing = {bson.encode(d) for d in coll.find({"$expr": {"$gte": ["$_id", {"$literal": 2}]}})}
    assert crossing == {bson.encode({"_id": v}) for v in MIXED_IDS if server_compare(v, 2) >= 0}


def test_equality_is_the_servers_across_types(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    values = [1, 1.0, Int64(1), True, "1", {"a": True}, {"a": 1}, float("nan")]
    cluster.shards[0].load_collection("db.c", [{"_id": n, "v": v} for n, v in enumerate(values)])
    coll = client_factory(cluster.uri).db.c

    def ids(query: dict[str, Any]) -> list[int]:
        return sorted(d["_id"] for d in coll.find(query))

    assert ids({"v": 1}) == [0, 1, 2]  # numbers by value, never the bool
    assert ids({"v": True}) == [3]
    assert ids({"v": {"$in": [True, "1"]}}) == [3, 4]
    assert ids({"v": {"$ne": 1}}) == [3, 4, 5, 6, 7]
    assert ids({"v": {"a": 1.0}}) == [6]
    assert ids({"v": float("nan")}) == [7]
    cluster.shards[0].load_collection(
        "db.d", [{"_id": 1, "v": Decimal128("1.0")}, {"_id": 2, "v": Decimal128("-0")}]
    )
    decimals = client_factory(cluster.uri).db.d
    assert [d["_id"] for d in decimals.find({"v": Decimal128("1.00")})] == [1]  # by value
    assert [d["_id"] for d in decimals.find({"v": 0})] == [2]


def test_expr_ranges_split_any_ids_exactly_once(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    db = client_factory(cluster.uri).db
    coll = cast("Collection[RawBSONDocument]", db.get_collection("ranges", codec_options=RAW))
    ids_strategy = st.lists(VALUES.filter(lambda v: not isinstance(v, list)), max_size=12)

    @given(ids_strategy, VALUES)
    @settings(max_examples=60)
    def check(ids: list[Any], boundary: Any) -> None:
        distinct = {bson.encode({"_id": v}): v for v in ids}
        cluster.shards[0].load_collection("db.ranges", [{"_id": v} for v in distinct.values()])
        end = {"$literal": boundary}
        below = coll.find({"$expr": {"$lt": ["$_id", end]}})
        above = coll.find({"$expr": {"$gte": ["$_id", end]}})
        found = sorted(bytes(doc.raw) for part in (below, above) for doc in part)
        assert found == sorted(distinct)

    check()


def test_aggregate_samples_projects_and_sorts(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    cluster.shards[0].load_collection("db.c", [{"_id": v, "x": 1} for v in MIXED_IDS])
    coll = client_factory(cluster.uri).db.c
    pipeline = [{"$sample": {"size": 5}}, {"$project": {"_id": 1}}, {"$sort": {"_id": 1}}]
    sample = list(coll.aggregate(pipeline))
    keys = [bson.encode(doc) for doc in sample]
    assert len(sample) == len(set(keys)) == 5  # a small collection is sampled without repeats
    assert set(keys) <= {bson.encode({"_id": v}) for v in MIXED_IDS}
    ordered = sorted(sample, key=lambda doc: functools.cmp_to_key(server_compare)(doc["_id"]))
    assert [bson.encode(doc) for doc in ordered] == keys
    strings = list(coll.aggregate([{"$match": {"_id": {"$in": ["a", "b"]}}}, {"$limit": 1}]))
    assert strings == [{"_id": "b", "x": 1}]


def test_aggregate_groups_counts_and_sizes_an_oplog_range(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    # What a live window's planner asks a shard: how many entries from a time on, their
    # BSON size, and the time of the entry past a share ($skip).
    shard = cluster.shards[0]
    entries = [{"ts": Timestamp(100, i), "op": "n", "ns": "", "o": {"i": i}} for i in range(1, 6)]
    for entry in entries:
        shard.append(entry)
    shard.set_majority(entries[-1]["ts"])
    oplog = client_factory(shard.uri).local["oplog.rs"]
    window = {"$match": {"ts": {"$gte": Timestamp(100, 2)}}}
    sizes = {"$sum": {"$bsonSize": "$$ROOT"}}
    counted = list(
        oplog.aggregate(
            [window, {"$limit": 3}, {"$group": {"_id": None, "n": {"$sum": 1}, "bytes": sizes}}]
        )
    )
    assert counted == [{"_id": None, "n": 3, "bytes": 3 * len(bson.encode(entries[1]))}]
    past = list(oplog.aggregate([window, {"$skip": 2}, {"$limit": 1}]))
    assert [entry["ts"] for entry in past] == [Timestamp(100, 4)]
    newest = list(oplog.aggregate([{"$group": {"_id": "$op", "last": {"$max": "$ts"}}}]))
    assert newest == [{"_id": "n", "last": Timestamp(100, 5)}]
    with pytest.raises(OperationFailure) as refused:
        oplog.aggregate([{"$group": {"_id": None, "x": {"$push": "$ts"}}}])
    assert refused.value.code == 15952


def test_aggregate_refuses_a_stage_it_does_not_run(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    coll = client_factory(cluster.uri).db.c
    with pytest.raises(OperationFailure) as refused:
        coll.aggregate([{"$lookup": {"from": "d", "as": "x"}}])
    assert refused.value.code == 40324
    assert "$lookup" in str(refused.value)
