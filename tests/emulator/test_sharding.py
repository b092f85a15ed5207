"""Emulator: ``enableSharding`` / ``shardCollection`` through mongos, the ``config.collections``
catalog they keep, and ``EmulatedCluster.shard_collection`` for fixtures."""

from __future__ import annotations

from typing import Any

import bson
import pytest
from pymongo.errors import OperationFailure

from shardstream.emulator import EmulatedCluster

from .conftest import ClientFactory


def _entries(cluster: EmulatedCluster, shard: int = 0) -> list[dict[str, Any]]:
    return [bson.decode(entry.raw) for entry in cluster.shards[shard].oplog.entries()]


def _catalog(client: Any) -> dict[str, tuple[dict[str, Any], bool]]:
    found = client.config.collections.find({"dropped": {"$ne": True}})
    return {entry["_id"]: (entry["key"], entry["unique"]) for entry in found}


def test_shard_collection_creates_indexes_records_and_logs_on_the_primary_shard(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    client = client_factory(cluster.uri)
    client.admin.command("enableSharding", "shop")
    reply = client.admin.command("shardCollection", "shop.orders", key={"region": 1, "_id": 1})
    assert reply["collectionsharded"] == "shop.orders"
    assert _catalog(client) == {"shop.orders": ({"region": 1, "_id": 1}, False)}
    assert [db["_id"] for db in client.config.databases.find()] == ["shop"]
    (listed,) = client.shop.list_collections()
    (entry,) = client.config.collections.find()
    assert entry["uuid"] == listed["info"]["uuid"]
    assert [spec["name"] for spec in client.shop.orders.list_indexes()] == [
        "_id_",
        "region_1__id_1",
    ]
    logged = [(e["op"], e["o"]) for e in _entries(cluster)]
    assert [op for op, _ in logged] == ["c", "c", "n"]
    assert logged[2][1] == {"msg": {"shardCollection": "shop.orders"}}
    assert not _entries(cluster, 1)  # every collection lives on the primary shard
    # Once more on the same key is "already so"; another key is refused.
    client.admin.command("shardCollection", "shop.orders", key={"region": 1, "_id": 1})
    with pytest.raises(OperationFailure) as other_key:
        client.admin.command("shardCollection", "shop.orders", key={"_id": "hashed"})
    assert other_key.value.code == 23


def test_shard_collection_refuses_what_mongos_refuses(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    client = client_factory(cluster.uri)
    client.shop.full.insert_one({"_id": 1, "k": 1})
    cases: list[tuple[dict[str, Any], int]] = [
        ({"shardCollection": "shop.full", "key": {"k": 1}}, 72),  # data, no index on k
        ({"shardCollection": "shop.x", "key": {"k": -1}}, 2),
        ({"shardCollection": "shop.x", "key": {"k": "hashed"}, "unique": True}, 72),
        ({"shardCollection": "nodot", "key": {"k": 1}}, 73),
    ]
    for command, code in cases:
        with pytest.raises(OperationFailure) as refused:
            client.admin.command(command)
        assert refused.value.code == code, command
    with pytest.raises(OperationFailure) as not_admin:
        client.shop.command("shardCollection", "shop.x", key={"k": 1})
    assert not_admin.value.code == 13
    client.shop.full.create_index("k")
    client.admin.command("shardCollection", "shop.full", key={"k": 1})
    assert _catalog(client) == {"shop.full": ({"k": 1}, False)}


def test_a_collection_with_a_collation_is_sharded_only_with_the_simple_one(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    client = client_factory(cluster.uri)
    client.shop.create_collection("names", collation={"locale": "fr"})
    with pytest.raises(OperationFailure) as refused:
        client.admin.command("shardCollection", "shop.names", key={"_id": 1})
    assert refused.value.code == 2
    simple = {"locale": "simple"}
    client.admin.command("shardCollection", "shop.names", key={"_id": 1}, collation=simple)
    assert _catalog(client) == {"shop.names": ({"_id": 1}, False)}


def test_drops_and_renames_through_mongos_keep_the_catalog_in_step(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    client = client_factory(cluster.uri)
    for name in ("a", "b", "c"):
        client.admin.command("shardCollection", f"shop.{name}", key={"_id": 1})
    client.admin.command("shardCollection", "other.d", key={"_id": "hashed"})
    client.shop.drop_collection("a")
    client.admin.command("renameCollection", "shop.b", to="shop.b2")
    assert set(_catalog(client)) == {"shop.b2", "shop.c", "other.d"}
    client.drop_database("other")
    assert set(_catalog(client)) == {"shop.b2", "shop.c"}


def test_a_fixture_declares_a_collection_sharded_without_logging(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    cluster.shards[0].load_collection("shop.users", [{"_id": 1, "uid": 7}])
    entry = cluster.shard_collection("shop.users", {"uid": "hashed"})
    cluster.shard_collection("shop.skus", {"sku": 1}, unique=True)
    client = client_factory(cluster.uri)
    assert _catalog(client) == {
        "shop.users": ({"uid": "hashed"}, False),
        "shop.skus": ({"sku": 1}, True),
    }
    assert entry["key"] == {"uid": "hashed"}
    assert not _entries(cluster)
    indexes = {spec["name"]: spec for spec in client.shop.skus.list_indexes()}
    assert indexes["sku_1"]["unique"] is True
    assert list(client.shop.users.find()) == [{"_id": 1, "uid": 7}]
