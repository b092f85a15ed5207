"""The acknowledge-only mongos (a benchmark's target): the chosen databases' writes are
answered as applied and dropped; every other database, and transactions that reach one,
are served as always."""

from __future__ import annotations

from typing import Any

from pymongo import DeleteOne, InsertOne, MongoClient, ReplaceOne, UpdateOne

from shardstream.emulator import EmulatedCluster


def test_the_chosen_databases_writes_are_acknowledged_and_dropped() -> None:
    with EmulatedCluster(shards=2) as cluster:
        mode = cluster.mongos.acknowledge_only(["shop"])
        client: MongoClient[Any] = MongoClient(cluster.uri)
        with client:
            result = client.shop.orders.bulk_write(
                [
                    InsertOne({"_id": 1}),
                    ReplaceOne({"_id": 2}, {"_id": 2, "a": 1}, upsert=True),
                    UpdateOne({"_id": 1}, {"$set": {"a": 2}}),
                    DeleteOne({"_id": 3}),
                ]
            )
            assert result.acknowledged
            assert (result.inserted_count, result.deleted_count) == (1, 1)
            assert mode.acknowledged == 4
            assert client.shop.orders.count_documents({}) == 0
            logged = [e["ns"] for shard in cluster.shards for e in shard.oplog.entries()]
            assert "shop.orders" not in logged
            client.sync_state.checkpoints.insert_one({"_id": "run", "at": 1})
            assert client.sync_state.checkpoints.find_one() == {"_id": "run", "at": 1}
            assert mode.acknowledged == 4


def test_transactions_end_where_their_writes_went() -> None:
    with EmulatedCluster(shards=2) as cluster:
        cluster.mongos.acknowledge_only(["shop"])
        client: MongoClient[Any] = MongoClient(cluster.uri)
        with client:
            client.other.kept.insert_one({"_id": 0})  # exists before the transactions
            with client.start_session() as session:
                with session.start_transaction():  # acknowledged only: no shard involved
                    client.shop.orders.insert_one({"_id": 1}, session=session)
                    client.shop.orders.delete_one({"_id": 2}, session=session)
                with session.start_transaction():  # half of it reaches a shard
                    client.shop.orders.insert_one({"_id": 3}, session=session)
                    client.other.kept.insert_one({"_id": 4}, session=session)
            assert sorted(doc["_id"] for doc in client.other.kept.find()) == [0, 4]
            assert client.shop.orders.count_documents({}) == 0
