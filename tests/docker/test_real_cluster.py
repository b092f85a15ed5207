"""Against real MongoDB (7.0 and 8.0): shardstream.watch() equals native watch().

A workload through mongos — a hashed sharded collection, inserts, updates,
deletes, a multi-shard transaction and a chunk migration — is streamed both by
mongos's own ``watch()`` and by ``shardstream.watch()`` from the same
``start_at_operation_time``; the two event sequences must be identical, ``_id``
(the resume token bytes) included.  This is where majority visibility and the
real oplog format are verified.  Not run on the development machines (no Docker
engine there); it skips with the reason.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from pymongo import MongoClient

import shardstream
from tests.docker.sharded_cluster import sharded_cluster

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _workload(client: MongoClient[Any]) -> None:
    admin = client.admin
    admin.command("enableSharding", "app")
    admin.command("shardCollection", "app.c", key={"_id": "hashed"})
    collection = client.app.c
    collection.insert_many([{"_id": n, "v": n} for n in range(100)])
    collection.update_many({"_id": {"$lt": 20}}, {"$set": {"v": -1}, "$inc": {"n": 1}})
    collection.delete_many({"_id": {"$gte": 90}})
    with client.start_session() as session, session.start_transaction():
        collection.insert_many([{"_id": 1000 + n} for n in range(10)], session=session)
    shards = [shard["_id"] for shard in admin.command("listShards")["shards"]]
    chunk = client.config.chunks.find_one({}) or {}
    if chunk.get("shard") in shards:
        target = next(name for name in shards if name != chunk["shard"])
        admin.command("moveChunk", "app.c", bounds=[chunk["min"], chunk["max"]], to=target)
    collection.insert_one({"_id": "last"})


def _events(stream: Any, until: str, timeout: float = 60) -> list[dict[str, Any]]:
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


@pytest.mark.parametrize("image", ["mongo:7.0", "mongo:8.0"])
def test_shardstream_watch_equals_native_watch(docker_engine: None, image: str) -> None:
    with sharded_cluster(image) as uri, MongoClient(uri) as client:
        start = client.admin.command("ping")["operationTime"]
        _workload(client)
        with client.watch(start_at_operation_time=start) as native:
            expected = _events(native, "last")
        with shardstream.watch(uri, start_at_operation_time=start) as ours:
            got = _events(ours, "last")
    assert [event["_id"] for event in got] == [event["_id"] for event in expected]
    assert got == expected
