"""The live config.shards monitor: shards joining and leaving a running cluster.

The emulated config server logs each add_shard / remove_shard in its oplog, as a real
one does; watch(URI) tails that oplog as a remote of the merge (it gates it, as on
mongos), opens added shards from their add time, and fails on removed ones.  On both
paths (the ``path`` fixture, tests/paths.py: ``watch(fast_path=...)``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.emulator import EmulatedCluster, ErrorReply
from shardstream.errors import ChangeStreamHistoryLost, OplogError
from tests import factories as make
from tests.merger.stream_helpers import collect
from tests.oplog.live_helpers import append_committed
from tests.paths import OnPath

T = [Timestamp(1700000300, i) for i in range(20)]


def _keys(events: list[dict[str, Any]]) -> list[Any]:
    return [event["documentKey"]["_id"] for event in events]


def test_a_shard_added_mid_stream_is_read_from_its_add_time(path: OnPath) -> None:
    with EmulatedCluster(shards=2) as cluster:
        append_committed(
            cluster.shard("shard00"), [make.noop(T[1]), make.insert(T[2], {"_id": "a"})]
        )
        append_committed(cluster.shard("shard01"), [make.noop(T[1])])
        with path.watch(cluster.uri, start_at_operation_time=T[1], max_await_time_ms=100) as stream:
            # The new replica set already holds an entry from before it joined: not reported.
            added = cluster.add_shard("shard02", ts=T[3])
            added.append(make.insert(T[2], {"_id": "before-add"}))
            append_committed(
                cluster.shard("shard02"), [make.insert(T[4], {"_id": "c"}), make.noop(T[6])]
            )
            append_committed(
                cluster.shard("shard01"), [make.insert(T[5], {"_id": "b"}), make.noop(T[6])]
            )
            append_committed(cluster.shard("shard00"), [make.noop(T[6])])
            events = collect(stream, 3)
            assert _keys(events) == ["a", "c", "b"]
            assert stream.shard_positions()["shard02"] is not None


def test_the_monitor_gates_the_merge_until_the_config_server_moves(path: OnPath) -> None:
    with EmulatedCluster(shards=2) as cluster:
        cluster.config.periodic_noops = False  # an idle config server: its majority stays put
        append_committed(
            cluster.shard("shard00"), [make.noop(T[1]), make.insert(T[2], {"_id": "a"})]
        )
        append_committed(cluster.shard("shard01"), [make.noop(T[1]), make.noop(T[3])])
        with path.watch(cluster.uri, start_at_operation_time=T[1], max_await_time_ms=100) as stream:
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                assert stream.try_next() is None  # a shard might still be added before T2
            cluster.config.periodic_noops = True
            assert _keys(collect(stream, 1)) == ["a"]


def test_a_removed_shard_fails_the_stream_naming_it(path: OnPath) -> None:
    with EmulatedCluster(shards=2) as cluster:
        append_committed(
            cluster.shard("shard00"), [make.noop(T[1]), make.insert(T[2], {"_id": "a"})]
        )
        append_committed(cluster.shard("shard01"), [make.noop(T[1]), make.noop(T[3])])
        with path.watch(cluster.uri, start_at_operation_time=T[1], max_await_time_ms=100) as stream:
            assert _keys(collect(stream, 1)) == ["a"]
            removed = cluster.remove_shard("shard01", ts=T[4])
            append_committed(cluster.shard("shard00"), [make.noop(T[5])])
            removed.append(make.noop(T[5]))  # a removed shard's mongod runs on
            removed.set_majority(T[5])
            with pytest.raises(ChangeStreamHistoryLost, match="shard 'shard01' was removed"):
                collect(stream, 1)


def test_ignore_removed_shards_goes_on_reading(path: OnPath) -> None:
    with EmulatedCluster(shards=2) as cluster:
        append_committed(cluster.shard("shard00"), [make.noop(T[1])])
        append_committed(cluster.shard("shard01"), [make.noop(T[1]), make.noop(T[2])])
        with path.watch(
            cluster.uri,
            start_at_operation_time=T[1],
            max_await_time_ms=100,
            ignore_removed_shards=True,
        ) as stream:
            removed = cluster.remove_shard("shard01", ts=T[3])
            append_committed(
                cluster.shard("shard00"), [make.insert(T[4], {"_id": "x"}), make.noop(T[6])]
            )
            removed.append(make.insert(T[5], {"_id": "y"}))
            removed.append(make.noop(T[6]))
            removed.set_majority(T[6])
            assert _keys(collect(stream, 2)) == ["x", "y"]


def test_without_get_shard_map_watch_says_what_to_do(path: OnPath) -> None:
    with EmulatedCluster(shards=1) as cluster:
        append_committed(cluster.shard("shard00"), [make.noop(T[1])])
        refused = ErrorReply(13, "Unauthorized", "not authorized on admin to execute command")
        cluster.mongos.faults.add("getshardmap", refused)
        with pytest.raises(OplogError, match="monitor_shards=False"):
            path.watch(cluster.uri, start_at_operation_time=T[1])
        cluster.mongos.faults.add("getshardmap", refused)
        with path.watch(
            cluster.uri, start_at_operation_time=T[1], monitor_shards=False, max_await_time_ms=100
        ) as stream:
            append_committed(cluster.shard("shard00"), [make.insert(T[2], {"_id": "z"})])
            assert _keys(collect(stream, 1)) == ["z"]


def test_pre_images_of_an_added_shard_come_from_that_shard(path: OnPath) -> None:
    with EmulatedCluster(shards=1) as cluster:
        append_committed(cluster.shard("shard00"), [make.noop(T[1])])
        with path.watch(
            cluster.uri,
            start_at_operation_time=T[1],
            full_document_before_change="required",
            max_await_time_ms=100,
        ) as stream:
            added = cluster.add_shard("shard01", ts=T[2])
            added.append(make.noop(T[1]))  # a replica set's oplog begins before it joins
            key = {"nsUUID": make.COLLECTION_UUID, "ts": T[4], "applyOpsIndex": Int64(0)}
            added.insert("config.system.preimages", {"_id": key, "preImage": {"_id": 1, "v": 0}})
            append_committed(
                cluster.shard("shard01"), [make.update(T[4], 1, {"u": {"v": 1}}), make.noop(T[6])]
            )
            append_committed(cluster.shard("shard00"), [make.noop(T[6])])
            (event,) = collect(stream, 1)
    assert event["fullDocumentBeforeChange"] == {"_id": 1, "v": 0}
