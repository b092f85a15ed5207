"""``setUserWriteBlockMode`` on the emulated cluster: user writes refused with the server's
code while it is set, internal databases still writable, lifted by ``global: false``."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

from shardstream.emulator import EmulatedCluster

USER_WRITES_BLOCKED = 371  # ErrorCodes::UserWritesBlocked


def test_a_blocked_cluster_refuses_user_writes_until_the_block_is_lifted() -> None:
    with EmulatedCluster(shards=2) as cluster:
        client: MongoClient[Any] = MongoClient(cluster.uri)
        with client:
            orders = client.shop.orders
            orders.insert_many([{"_id": 1, "qty": 1}, {"_id": 2, "qty": 2}])
            client.admin.command({"setUserWriteBlockMode": 1, "global": True})
            assert [shard.write_block.blocked for shard in cluster.shards] == [True, True]
            refused: list[Any] = [
                lambda: orders.insert_one({"_id": 3}),
                lambda: orders.update_one({"_id": 1}, {"$set": {"qty": 9}}),
                lambda: orders.delete_one({"_id": 2}),
            ]
            for write in refused:
                with pytest.raises(WriteError) as failed:
                    write()
                assert failed.value.code == USER_WRITES_BLOCKED
            with pytest.raises(BulkWriteError) as bulk:
                orders.insert_many([{"_id": n} for n in (4, 5, 6)], ordered=False)
            codes = [error["code"] for error in bulk.value.details["writeErrors"]]
            assert codes == [USER_WRITES_BLOCKED] * 3  # unordered: each one tried and refused
            with pytest.raises(OperationFailure) as ddl:
                client.shop.create_collection("other")
            assert ddl.value.code == USER_WRITES_BLOCKED
            client.admin.tool_state.insert_one({"_id": "kept"})  # internal: still writable
            assert sorted(d["_id"] for d in orders.find()) == [1, 2]
            assert orders.find_one({"_id": 1}) == {"_id": 1, "qty": 1}

            client.admin.command({"setUserWriteBlockMode": 1, "global": False})
            orders.insert_one({"_id": 3})
            assert sorted(d["_id"] for d in orders.find()) == [1, 2, 3]


@pytest.mark.parametrize(
    ("database", "body", "code"),
    [
        ("shop", {"setUserWriteBlockMode": 1, "global": True}, 13),
        ("admin", {"setUserWriteBlockMode": 1}, 40414),
        ("admin", {"setUserWriteBlockMode": 1, "global": "yes"}, 40414),
    ],
    ids=["not-admin", "no-global", "global-not-bool"],
)
def test_a_malformed_block_request_is_refused_and_blocks_nothing(
    database: str, body: dict[str, Any], code: int
) -> None:
    with EmulatedCluster(shards=2) as cluster:
        client: MongoClient[Any] = MongoClient(cluster.uri)
        with client:
            with pytest.raises(OperationFailure) as failed:
                client[database].command(body)
            assert failed.value.code == code
            assert not any(shard.write_block.blocked for shard in cluster.shards)
            client.shop.orders.insert_one({"_id": 1})
