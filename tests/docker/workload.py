"""The workload the real-cluster tests and the vector recorder run through mongos."""

from __future__ import annotations

import time
from typing import Any

from pymongo import MongoClient


def run_workload(client: MongoClient[Any]) -> None:
    """A hashed sharded collection, CRUD, a multi-shard transaction and a chunk migration.

    Ends with an insert of ``{_id: "last"}``, which readers wait for.
    """
    admin = client.admin
    admin.command("enableSharding", "app")
    admin.command("shardCollection", "app.c", key={"_id": "hashed"})
    collection = client.app.c
    collection.insert_many([{"_id": n, "v": n} for n in range(100)])
    collection.update_many({"_id": {"$lt": 20}}, {"$set": {"v": -1}, "$inc": {"n": 1}})
    collection.delete_many({"_id": {"$gte": 90}})
    with client.start_session() as session, session.start_transaction():
        collection.insert_many([{"_id": 1000 + n} for n in range(10)], session=session)
    move_a_chunk(client, "app.c")
    collection.insert_one({"_id": "last"})


def move_a_chunk(client: MongoClient[Any], ns: str, to: str | None = None) -> None:
    """Move one chunk of ``ns`` to shard ``to`` (default: any other shard)."""
    shards = [shard["_id"] for shard in client.admin.command("listShards")["shards"]]
    uuid = (client.config.collections.find_one({"_id": ns}) or {}).get("uuid")
    chunk = client.config.chunks.find_one({"uuid": uuid}) or {}
    if chunk.get("shard") not in shards:
        raise AssertionError(f"no chunk of {ns} found on {shards}: {chunk!r}")
    target = to or next(name for name in shards if name != chunk["shard"])
    client.admin.command("moveChunk", ns, bounds=[chunk["min"], chunk["max"]], to=target)


def read_until(stream: Any, until: str, timeout: float = 60) -> list[dict[str, Any]]:
    """Events of ``stream`` up to the one whose documentKey ``_id`` is ``until``."""
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = stream.try_next()
        if event is None:
            continue
        events.append(event)
        if event.get("documentKey", {}).get("_id") == until:
            return events
    raise AssertionError(f"the stream did not reach {until!r} in {timeout}s ({len(events)} events)")
