"""watch(mongos URI): live tailers on every shard of an emulated cluster, merged.

The emulator speaks the wire protocol, so this runs shardstream's real pymongo
code: discovery through mongos, one tailer per shard, majority reads.  The streams
run on both paths (the ``path`` fixture, tests/paths.py: ``watch(fast_path=...)``).
"""

from __future__ import annotations

import json
from typing import Any

import bson
import pytest
from bson.timestamp import Timestamp

import shardstream
from shardstream.cli.main import main
from shardstream.emulator import EmulatedCluster
from shardstream.oplog.file_source import FileOplogSource
from tests import factories as make
from tests.deadlines import returns_within
from tests.merger.stream_helpers import collect
from tests.oplog.live_helpers import load_committed
from tests.paths import OnPath


def _oplogs() -> dict[str, list[dict[str, Any]]]:
    t = [Timestamp(1700000000, i) for i in range(20)]
    return {
        "shard00": [make.noop(t[1]), make.insert(t[2], {"_id": 1}), make.insert(t[5], {"_id": 5})],
        # shard01's periodic noop at t9 is what lets shard00's t5 event out of the gate.
        "shard01": [
            make.noop(t[1]),
            make.insert(t[2], {"_id": 2}),
            make.update(t[3], 2, {"u": {"a": 1}}),
            make.noop(t[9]),
        ],
    }


def test_watching_a_cluster_uri_merges_its_shards_like_the_files(
    path: OnPath, tmp_path: Any
) -> None:
    oplogs = _oplogs()
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, oplogs)
        start = Timestamp(1700000000, 1)
        with path.watch(
            cluster.uri, start_at_operation_time=start, max_await_time_ms=100
        ) as stream:
            live = collect(stream, 4)
    files = {}
    for name, entries in oplogs.items():
        file = tmp_path / f"{name}.bson"
        file.write_bytes(b"".join(bson.encode(entry) for entry in entries))
        files[name] = FileOplogSource(name, str(file))
    expected = list(shardstream.watch(files, start_at_operation_time=start))  # the reference
    assert [e["_id"] for e in live] == [e["_id"] for e in expected]
    assert [e["documentKey"]["_id"] for e in live] == [1, 2, 2, 5]


def test_without_a_start_the_stream_begins_at_the_cluster_time(path: OnPath) -> None:
    t = [Timestamp(1700000100, i) for i in range(20)]
    with EmulatedCluster(shards=2) as cluster:
        for name in ("shard00", "shard01"):
            cluster.shard(name).append(make.insert(t[1], {"_id": f"old-{name}"}))
            cluster.shard(name).set_majority(t[1])
        with path.watch(cluster.uri, max_await_time_ms=100) as stream:
            for name, n in (("shard00", 3), ("shard01", 4)):
                cluster.shard(name).append(make.insert(t[n], {"_id": f"new-{name}"}))
                cluster.shard(name).set_majority(t[n])
            # shard00's next periodic noop lets shard01's later event through the gate.
            cluster.shard("shard00").append(make.noop(t[6]))
            cluster.shard("shard00").set_majority(t[6])
            events = collect(stream, 2)
    assert [e["documentKey"]["_id"] for e in events] == ["new-shard00", "new-shard01"]


def test_the_watch_command_writes_the_merged_stream(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    oplogs = _oplogs()
    monkeypatch.setattr("shardstream.cli.watch.STATS_EVERY_S", 0.0)
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, oplogs)
        argv = ["watch", cluster.uri, "--start-at-operation-time", "1700000000,1"]
        argv += ["--read-preference", "nearest"]
        # The command runs until its 4th event: a merge that held one back would never end.
        command = [*argv, "--max-events", "4", "--stats"]
        assert returns_within(lambda: main(command), "watch 4 events") == 0
    out, err = capsys.readouterr()
    keys = [json.loads(line)["documentKey"]["_id"]["$numberInt"] for line in out.splitlines()]
    assert keys == ["1", "2", "2", "5"]
    assert "events/s" in err
    assert "lag per shard: shard00" in err


def test_the_watch_command_never_prints_the_password(capsys: pytest.CaptureFixture[str]) -> None:
    uri = "mongodb://alice:s3cr3t-pw@127.0.0.1:9/?serverSelectionTimeoutMS=200&connectTimeoutMS=200"
    assert main(["watch", uri, "--max-events", "1"]) == 1
    err = capsys.readouterr().err
    assert "s3cr3t-pw" not in err
    assert "shardstream watch: error:" in err


def test_update_lookup_and_pre_images_come_from_the_live_cluster(path: OnPath) -> None:
    t = [Timestamp(1700000200, i) for i in range(20)]
    shard_a, shard_b = "shard00", "shard01"
    with EmulatedCluster(shards=2) as cluster:
        a, b = cluster.shard(shard_a), cluster.shard(shard_b)
        for entry in (make.insert(t[1], {"_id": 1, "v": 0}), make.update(t[3], 1, {"u": {"v": 1}})):
            a.append(entry)
        b.append(make.noop(t[1]))
        b.append(make.noop(t[5]))
        a.set_majority(t[3])
        b.set_majority(t[5])
        # What the shards hold: the document now (through mongos) and the update's pre-image.
        a.insert("db.coll", {"_id": 1, "v": 7})
        pre_image_id = {
            "nsUUID": make.COLLECTION_UUID,
            "ts": t[3],
            "applyOpsIndex": bson.int64.Int64(0),
        }
        a.insert("config.system.preimages", {"_id": pre_image_id, "preImage": {"_id": 1, "v": 0}})
        with path.watch(
            cluster.uri,
            start_at_operation_time=t[1],
            full_document="updateLookup",
            full_document_before_change="whenAvailable",
            max_await_time_ms=100,
        ) as stream:
            insert, update = collect(stream, 2)
    assert insert["fullDocument"] == {"_id": 1, "v": 0}
    assert update["fullDocument"] == {"_id": 1, "v": 7}
    assert update["fullDocumentBeforeChange"] == {"_id": 1, "v": 0}
    assert list(update)[-1] == "fullDocumentBeforeChange"
