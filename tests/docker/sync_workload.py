"""The workload the real-cluster sync tests run through the source mongos.

:func:`seed_source` runs before the sync starts (what its initial copy takes at T0);
:func:`change_source` while it runs, or while it is down (what must arrive through the
stream): CRUD on a hashed sharded collection, a multi-shard transaction, a chunk migration
with the balancer on, and DDL (indexes, ``collMod``, create, rename, drop, a new sharded
collection).  Each round ends with an insert of ``{_id: "last-<round>"}`` into
``app.orders``.

The balancer is on throughout, but with this little data (8.0 balances by data size, a
range being 128 MB) it never moves a chunk by itself: the migrations are ``moveChunk``
commands, made while the balancer runs.  Never run: no Docker engine where it was written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pymongo import MongoClient

from tests.docker.workload import move_a_chunk

DB: Final = "app"
ORDERS: Final = 400


def seed_source(client: MongoClient[Any]) -> None:
    """Shard ``app.orders`` (hashed ``_id``), fill it, and add two unsharded collections."""
    admin = client.admin
    admin.command("balancerStart")
    admin.command("enableSharding", DB)
    admin.command("shardCollection", f"{DB}.orders", key={"_id": "hashed"})
    database = client[DB]
    database.orders.insert_many(
        [{"_id": n, "status": "new", "qty": n % 7, "tags": ["seed"]} for n in range(ORDERS)]
    )
    database.settings.create_index("name", unique=True)
    database.settings.insert_many(
        [{"_id": f"s{n}", "name": f"setting-{n}", "value": n} for n in range(20)]
    )
    database.scratch.insert_one({"_id": 1, "note": "dropped in round 1"})


def change_source(client: MongoClient[Any], round_: int, shard_uris: Sequence[str]) -> int:
    """One round of changes (see the module); returns how many shards the transaction wrote.

    Args:
        client: the source mongos.
        round_: 1, 2, ...: keys and names of the round's new documents and collections.
        shard_uris: direct URIs of the source's shards, to count where the transaction's
            documents landed (right after its commit, before this round's migration).
    """
    database = client[DB]
    orders = database.orders
    base = 10_000 * round_
    orders.update_many(
        {"_id": {"$lt": 100}},
        {"$set": {"status": f"paid-{round_}"}, "$inc": {"qty": 1}, "$push": {"tags": round_}},
    )
    orders.update_many({"_id": {"$gte": 100, "$lt": 120}}, {"$unset": {"tags": ""}})
    orders.replace_one({"_id": 150}, {"status": "replaced", "round": round_})
    orders.delete_many({"_id": {"$gte": 300 + 10 * round_, "$lt": 305 + 10 * round_}})
    orders.insert_many([{"_id": base + n, "status": "new", "round": round_} for n in range(50)])
    with client.start_session() as session, session.start_transaction():
        orders.insert_many(
            [{"_id": base + 100 + n, "txn": round_} for n in range(10)], session=session
        )
        orders.update_many(
            {"_id": {"$in": [1, 2, 3, 4]}}, {"$set": {"txn": round_}}, session=session
        )
        orders.delete_one({"_id": base}, session=session)
    txn_shards = sum(
        1
        for uri in shard_uris
        if _count(uri, f"{DB}.orders", {"txn": round_, "_id": {"$gte": base}})
    )
    move_a_chunk(client, f"{DB}.orders")
    orders.update_many({}, {"$inc": {"seen": 1}})  # after the move: the recipient logs these
    orders.create_index([("status", 1), ("qty", -1)], name=f"status_qty_{round_}")
    if round_ == 1:
        database.command(
            "collMod", "settings", validator={"name": {"$type": "string"}}, validationLevel="strict"
        )
        database.drop_collection("scratch")
    else:
        database.command("collMod", "orders", index={"name": "status_qty_1", "hidden": True})
    database.settings.insert_one({"_id": f"r{round_}", "name": f"round-{round_}", "value": 0})
    audit = f"audit_{round_}"
    database[audit].insert_many([{"_id": n, "round": round_} for n in range(5)])
    client.admin.command("renameCollection", f"{DB}.{audit}", to=f"{DB}.{audit}_old")
    client.admin.command("shardCollection", f"{DB}.late_{round_}", key={"_id": "hashed"})
    database[f"late_{round_}"].insert_many([{"_id": n, "late": round_} for n in range(30)])
    orders.insert_one({"_id": f"last-{round_}"})
    return txn_shards


def _count(uri: str, ns: str, query: dict[str, Any]) -> int:
    db, _, coll = ns.partition(".")
    shard: MongoClient[Any] = MongoClient(uri)
    with shard:
        return shard[db][coll].count_documents(query)
