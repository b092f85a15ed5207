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

import pytest
from pymongo import MongoClient

import shardstream
from tests.docker.sharded_cluster import sharded_cluster
from tests.docker.workload import move_a_chunk, read_until, run_workload

# Never run here (no Docker engine): a cluster start is about a minute, so a generous bound.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]
IMAGES = ["mongo:7.0", "mongo:8.0"]


@pytest.mark.parametrize("image", IMAGES)
def test_shardstream_watch_equals_native_watch(docker_engine: None, image: str) -> None:
    with sharded_cluster(image) as cluster, MongoClient(cluster.uri) as client:
        start = client.admin.command("ping")["operationTime"]
        run_workload(client)
        with client.watch(start_at_operation_time=start) as native:
            expected = read_until(native, "last")
        with shardstream.watch(cluster.uri, start_at_operation_time=start) as ours:
            got = read_until(ours, "last")
    assert [event["_id"] for event in got] == [event["_id"] for event in expected]
    assert got == expected


@pytest.mark.parametrize("image", IMAGES)
def test_a_shard_added_mid_stream_is_followed(docker_engine: None, image: str) -> None:
    with sharded_cluster(image, spare=1) as cluster, MongoClient(cluster.uri) as client:
        start = client.admin.command("ping")["operationTime"]
        with shardstream.watch(cluster.uri, start_at_operation_time=start) as ours:
            run_workload(client)
            added = client.admin.command("addShard", cluster.spare_shards[0])["shardAdded"]
            move_a_chunk(client, "app.c", to=added)  # the new shard now owns data
            client.app.c.insert_many([{"_id": f"n{n}"} for n in range(50)])
            client.app.c.insert_one({"_id": "after-add"})
            got = read_until(ours, "after-add")
        with client.watch(start_at_operation_time=start) as native:
            expected = read_until(native, "after-add")
    assert {event.get("documentKey", {}).get("_id") for event in got} >= {"last", "after-add"}
    assert [event["_id"] for event in got] == [event["_id"] for event in expected]
