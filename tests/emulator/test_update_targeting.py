"""Emulator: mongos before 7.1 refuses an upsert into a sharded collection unless its query
holds the whole shard key by equality; the batch's other operations go on as ordered or
unordered batches do; 8.0 takes the upsert."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from bson.regex import Regex
from pymongo.errors import BulkWriteError, WriteError
from pymongo.operations import ReplaceOne, UpdateOne

from shardstream.emulator import EmulatedCluster
from shardstream.emulator.update_targeting import (
    KEY_UPDATE_WITHOUT_KEY,
    SHARD_KEY_NOT_FOUND,
    exact_shard_key,
)

from .conftest import ClientFactory

KEY = {"region": 1, "_id": 1}


@pytest.fixture(params=[21, 25], ids=["7.0", "8.0"])
def sharded(request: pytest.FixtureRequest) -> Iterator[EmulatedCluster]:
    """``shop.orders`` sharded on ``{region: 1, _id: 1}``, on 7.0 and on 8.0."""
    with EmulatedCluster(shards=2, max_wire_version=request.param) as cluster:
        cluster.shard_collection("shop.orders", KEY)
        yield cluster


@pytest.fixture
def sharded_7_0() -> Iterator[EmulatedCluster]:
    """``shop.orders`` sharded on ``{region: 1, _id: 1}``, on 7.0."""
    with EmulatedCluster(shards=2, max_wire_version=21) as cluster:
        cluster.shard_collection("shop.orders", KEY)
        yield cluster


def _orders(cluster: EmulatedCluster, client_factory: ClientFactory) -> Any:
    """The collection, holding ``{_id: 1, region: eu, n: 0}``."""
    orders = client_factory(cluster.uri).shop.orders
    orders.insert_one({"_id": 1, "region": "eu", "n": 0})
    return orders


def test_an_upsert_without_the_whole_key_is_refused_before_7_1(
    sharded: EmulatedCluster, client_factory: ClientFactory
) -> None:
    orders = _orders(sharded, client_factory)
    if sharded.max_wire_version >= 22:
        orders.replace_one({"_id": 2}, {"_id": 2, "region": "us"}, upsert=True)
        assert orders.find_one({"_id": 2}) == {"_id": 2, "region": "us"}
        return
    with pytest.raises(WriteError) as refused:
        orders.replace_one({"_id": 2}, {"_id": 2, "region": "us"}, upsert=True)
    assert refused.value.code == SHARD_KEY_NOT_FOUND
    assert orders.find_one({"_id": 2}) is None
    # The whole key by equality (null and $eq count), or no upsert at all, is taken.
    orders.replace_one({"_id": 2, "region": "us"}, {"_id": 2, "region": "us"}, upsert=True)
    orders.update_one({"_id": 3, "region": None}, {"$set": {"n": 3}}, upsert=True)
    orders.update_one({"_id": {"$eq": 4}, "region": {"$eq": "ap"}}, {"$set": {"n": 4}}, upsert=True)
    orders.update_one({"_id": 1}, {"$set": {"n": 1}})
    assert [d["_id"] for d in orders.find({}, sort=[("_id", 1)])] == [1, 2, 3, 4]
    assert orders.find_one({"_id": 1}) == {"_id": 1, "region": "eu", "n": 1}


def test_a_refused_upsert_stops_an_ordered_batch_and_not_an_unordered_one(
    sharded_7_0: EmulatedCluster, client_factory: ClientFactory
) -> None:
    orders = _orders(sharded_7_0, client_factory)
    batch: list[Any] = [
        UpdateOne({"_id": 1}, {"$set": {"n": 10}}),
        ReplaceOne({"_id": 5}, {"_id": 5, "region": "eu"}, upsert=True),
        ReplaceOne({"_id": 6, "region": "eu"}, {"_id": 6, "region": "eu"}, upsert=True),
        UpdateOne({"_id": 7, "region": {"$in": ["eu"]}}, {"$set": {"n": 7}}, upsert=True),
    ]
    with pytest.raises(BulkWriteError) as unordered:
        orders.bulk_write(batch, ordered=False)
    details = unordered.value.details
    assert [(e["index"], e["code"]) for e in details["writeErrors"]] == [
        (1, SHARD_KEY_NOT_FOUND),
        (3, SHARD_KEY_NOT_FOUND),
    ]
    assert [(u["index"], u["_id"]) for u in details["upserted"]] == [(2, 6)]
    assert details["nModified"] == 1
    assert sorted(d["_id"] for d in orders.find()) == [1, 6]

    orders.delete_one({"_id": 6, "region": "eu"})
    with pytest.raises(BulkWriteError) as ordered:
        orders.bulk_write(batch, ordered=True)
    details = ordered.value.details
    assert [(e["index"], e["code"]) for e in details["writeErrors"]] == [(1, SHARD_KEY_NOT_FOUND)]
    assert details["nUpserted"] == 0
    assert sorted(d["_id"] for d in orders.find()) == [1]


@pytest.mark.parametrize(
    ("query", "exact"),
    [
        ({"region": "eu", "_id": 1}, True),
        ({"_id": 1, "region": None, "other": 2}, True),
        ({"region": {"$eq": "eu"}, "_id": {"$eq": 1}}, True),
        ({"_id": 1}, False),
        ({"region": {"$in": ["eu"]}, "_id": 1}, False),
        ({"region": {"$eq": "eu", "$ne": "us"}, "_id": 1}, False),
        ({"region": ["eu"], "_id": 1}, False),
        ({"region": Regex("^e"), "_id": 1}, False),
        ({"region": {"code": "eu"}, "_id": 1}, True),
    ],
)
def test_exact_shard_key_needs_an_equality_on_every_field(
    query: dict[str, Any], exact: bool
) -> None:
    assert exact_shard_key(query, KEY) is exact


def test_a_nested_key_field_is_matched_by_its_path_or_a_parent_equality() -> None:
    assert exact_shard_key({"a.b": 1}, {"a.b": 1})
    assert exact_shard_key({"a": {"b": {"c": 1}}}, {"a.b.c": 1})
    assert exact_shard_key({"a.b": {"c": 1}}, {"a.b.c": 1})
    assert not exact_shard_key({"a": {"c": 1}}, {"a.b": 1})
    assert not exact_shard_key({"a": {"b": [1]}}, {"a.b": 1})
    # A parent and the path, or a child of it, both matched: no exact value for mongos.
    assert not exact_shard_key({"a": {"b": 1}, "a.b": 1}, {"a.b": 1})
    assert not exact_shard_key({"a": {"b": 1}, "a.b.c": 1}, {"a": 1})


def test_a_key_change_needs_the_whole_key_in_the_query_before_7_1(
    sharded: EmulatedCluster, client_factory: ClientFactory
) -> None:
    orders = _orders(sharded, client_factory)
    orders.update_one({"_id": 1}, {"$set": {"n": 1}})  # the key stays: taken by _id
    moving = [{"$set": {"region": "us"}}]
    if sharded.max_wire_version >= 22:
        orders.update_one({"_id": 1}, moving)
    else:
        with pytest.raises(WriteError) as refused:
            orders.update_one({"_id": 1}, moving)
        assert refused.value.code == KEY_UPDATE_WITHOUT_KEY
        assert orders.find_one({"_id": 1}) == {"_id": 1, "region": "eu", "n": 1}
        orders.update_one({"_id": 1, "region": "eu"}, moving)
    assert orders.find_one({"_id": 1}) == {"_id": 1, "region": "us", "n": 1}


def test_a_key_change_is_judged_on_the_document_as_the_batch_left_it(
    sharded_7_0: EmulatedCluster, client_factory: ClientFactory
) -> None:
    orders = _orders(sharded_7_0, client_factory)
    batch: list[Any] = [
        UpdateOne({"_id": 1}, {"$set": {"region": "eu"}}),  # the same value: no change
        UpdateOne({"_id": 1, "region": "eu"}, {"$set": {"region": "us"}}),
        UpdateOne({"_id": 1}, {"$set": {"region": "us", "n": 2}}),  # "us" by now: no change
        UpdateOne({"_id": 1}, {"$set": {"region": "ap"}}),
    ]
    with pytest.raises(BulkWriteError) as refused:
        orders.bulk_write(batch)
    errors = refused.value.details["writeErrors"]
    assert [(e["index"], e["code"]) for e in errors] == [(3, KEY_UPDATE_WITHOUT_KEY)]
    assert orders.find_one({"_id": 1}) == {"_id": 1, "region": "us", "n": 2}


def test_a_key_value_changes_bit_for_bit_and_a_missing_one_is_null(
    sharded_7_0: EmulatedCluster, client_factory: ClientFactory
) -> None:
    orders = client_factory(sharded_7_0.uri).shop.orders
    orders.insert_many([{"_id": 1, "region": 1}, {"_id": 2}])
    orders.update_one({"_id": 2}, {"$set": {"region": None}})  # null was its value already
    with pytest.raises(WriteError) as refused:
        orders.update_one({"_id": 1}, {"$set": {"region": 1.0}})  # equal, yet another value
    assert refused.value.code == KEY_UPDATE_WITHOUT_KEY
