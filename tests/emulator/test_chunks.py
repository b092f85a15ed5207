"""Chunks on the emulated cluster: writes routed to the shard owning them, chunk migrations
logged as mongod logs them, cross-shard transactions committed in two phases, DDL on every
shard; and the merged change stream over it is what mongos would return."""

from __future__ import annotations

from typing import Any

import bson
from bson.timestamp import Timestamp

import shardstream
from shardstream.emulator import EmulatedCluster, EmulatedReplicaSet
from tests.merger.stream_helpers import collect

from .conftest import ClientFactory

START = Timestamp(1_000, 1)


def _entries(shard: EmulatedReplicaSet) -> list[dict[str, Any]]:
    return [bson.decode(entry.raw) for entry in shard.oplog.entries()]


def _initiate(cluster: EmulatedCluster) -> None:
    for shard in cluster.shards:  # a real oplog begins with the set's initiation
        shard.append({"ts": START, "op": "n", "ns": "", "o": {"msg": "initiating set"}})
        shard.set_majority(START)


def _ids(shard: EmulatedReplicaSet, ns: str) -> set[Any]:
    coll = shard.store.get(ns)
    return {doc["_id"] for doc in (coll.documents() if coll is not None else [])}


def test_a_hashed_collection_spreads_its_writes_over_every_shard(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    client = client_factory(cluster.uri)
    client.admin.command({"shardCollection": "db.orders", "key": {"_id": "hashed"}})
    orders = client.db.orders
    orders.insert_many([{"_id": n, "qty": n} for n in range(40)])
    held = [_ids(shard, "db.orders") for shard in cluster.shards]
    assert all(held)  # every shard took some
    assert set.union(*held) == set(range(40))
    assert not set.intersection(*held)
    assert orders.update_one({"_id": 7}, {"$set": {"qty": 70}}).modified_count == 1
    assert orders.update_many({"qty": {"$lt": 5}}, {"$inc": {"qty": 100}}).modified_count == 5
    assert orders.delete_many({"qty": {"$gte": 100}}).deleted_count == 5
    assert orders.delete_one({"_id": 9}).deleted_count == 1
    assert orders.count_documents({}) == 34
    assert orders.find_one({"_id": 7}) == {"_id": 7, "qty": 70}
    # An upsert by the key lands on the owner; one matching nowhere inserts once.
    orders.update_one({"_id": 100}, {"$set": {"qty": 1}}, upsert=True)
    assert sum(100 in _ids(shard, "db.orders") for shard in cluster.shards) == 1


def test_a_migration_moves_documents_as_mongod_logs_it_and_the_stream_hides_it(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    _initiate(cluster)
    client = client_factory(cluster.uri)
    primary, other = cluster.shards
    client.admin.command({"shardCollection": "db.items", "key": {"k": 1}})
    items = client.db.items
    items.insert_many([{"_id": n, "k": n} for n in range(10)])
    assert _ids(other, "db.items") == set()  # one chunk, on the primary shard
    client.admin.command({"split": "db.items", "middle": {"k": 5}})
    client.admin.command({"moveChunk": "db.items", "find": {"k": 7}, "to": other.name})
    assert _ids(primary, "db.items") == {0, 1, 2, 3, 4}
    assert _ids(other, "db.items") == {5, 6, 7, 8, 9}
    recipient = [e for e in _entries(other) if e.get("ns", "").startswith("db.")]
    assert [(e["op"], e.get("fromMigrate")) for e in recipient][:2] == [("c", True), ("c", True)]
    inserts = [e for e in recipient if e["op"] == "i"]
    assert len(inserts) == 5
    assert all(e["fromMigrate"] for e in inserts)
    donor = _entries(primary)
    notes = [e for e in donor if e["op"] == "n" and "migrateChunkToNewShard" in e.get("o2", {})]
    assert [n["o2"] for n in notes] == [
        {"migrateChunkToNewShard": "db.items", "fromShardId": primary.name, "toShardId": other.name}
    ]
    deletes = [e for e in donor if e["op"] == "d"]
    assert len(deletes) == 5
    assert all(e["fromMigrate"] for e in deletes)
    items.insert_one({"_id": 10, "k": 10})  # now the other shard's
    assert 10 in _ids(other, "db.items")
    assert inserts[-1]["ts"] < deletes[0]["ts"]  # cloned before the donor let go
    # A key change across the split moves the document to its new owner.
    items.update_one({"_id": 1}, {"$set": {"k": 8}})
    assert 1 in _ids(other, "db.items")
    assert 1 not in _ids(primary, "db.items")
    assert sorted(d["_id"] for d in items.find()) == list(range(11))
    client.admin.command("appendOplogNote", data={"msg": "done"})
    with shardstream.watch(
        cluster.uri, start_at_operation_time=START, max_await_time_ms=100
    ) as stream:
        events = collect(stream, 13)
    # The migration's copies and deletes never surface; the key change is a delete on the
    # old owner and an insert on the new one.
    assert [(e["operationType"], e["documentKey"]["_id"]) for e in events] == [
        *[("insert", n) for n in range(10)],
        ("insert", 10),
        ("delete", 1),
        ("insert", 1),
    ]


def test_a_transaction_over_two_shards_commits_in_two_phases_at_one_time(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    _initiate(cluster)
    client = client_factory(cluster.uri)
    client.admin.command({"shardCollection": "db.t", "key": {"k": 1}})
    primary, other = cluster.shards
    client.admin.command({"split": "db.t", "middle": {"k": 0}})
    client.admin.command({"moveChunk": "db.t", "find": {"k": 1}, "to": other.name})
    t = client.db.t
    with client.start_session() as session, session.start_transaction():
        t.insert_one({"_id": "a", "k": -1}, session=session)
        t.insert_one({"_id": "b", "k": 1}, session=session)
        t.insert_one({"_id": "c", "k": 2}, session=session)
    commits = []
    for shard in (primary, other):
        txn = [e for e in _entries(shard) if e.get("ns") == "admin.$cmd"]
        assert [sorted(e["o"]) for e in txn] == [
            ["applyOps", "prepare"],
            ["commitTimestamp", "commitTransaction"],
        ]
        prepare, commit = txn
        assert commit["ts"] == commit["o"]["commitTimestamp"]
        assert commit["prevOpTime"]["ts"] == prepare["ts"]
        commits.append(commit["ts"])
    assert commits[0] == commits[1]
    client.admin.command("appendOplogNote", data={"msg": "done"})
    with shardstream.watch(cluster.uri, start_at_operation_time=START, max_await_time_ms=100) as s:
        events = [e for e in collect(s, 3) if e["ns"]["coll"] == "t"]
    assert sorted(e["documentKey"]["_id"] for e in events) == ["a", "b", "c"]
    assert len({e["clusterTime"] for e in events}) == 1
    assert len({e["txnNumber"] for e in events}) == 1


def test_dropping_a_spread_collection_drops_it_everywhere_and_reports_it_once(
    cluster: EmulatedCluster, client_factory: ClientFactory
) -> None:
    _initiate(cluster)
    client = client_factory(cluster.uri)
    client.admin.command({"shardCollection": "db.h", "key": {"_id": "hashed"}})
    client.db.h.insert_many([{"_id": n} for n in range(20)])
    client.db.h.drop()
    assert all(shard.store.get("db.h") is None for shard in cluster.shards)
    client.admin.command("appendOplogNote", data={"msg": "done"})
    with shardstream.watch(
        cluster.uri, start_at_operation_time=START, max_await_time_ms=100
    ) as stream:
        events = collect(stream, 21)
    assert [e["operationType"] for e in events].count("drop") == 1
