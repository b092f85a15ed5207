"""The stream reader over a live cluster (the wire emulator), without Spark.

The driver plans from live tailers, the tasks re-read the same range with tailers of
their own, and the rows equal those of the same oplogs read as files.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import bson
import pytest
from bson.timestamp import Timestamp
from pyspark.sql.streaming.datasource import ReadMaxRows

from shardstream.emulator import EmulatedCluster
from shardstream.resume_token import decode_token
from shardstream.spark.source import data_source
from shardstream.spark.source.data_source import ShardstreamStreamReader
from shardstream.spark.source.offsets import token_of_text
from shardstream.spark.source.options import parse_options
from tests import factories as make
from tests.oplog.live_helpers import load_committed

T = [Timestamp(1700000000, i) for i in range(30)]
OPLOGS = {
    "shard00": [
        make.noop(T[1]),
        make.insert(T[2], {"_id": 1}),
        make.insert(T[5], {"_id": 5}),
        make.update(T[7], 1, {"u": {"a": 1}}),
        make.noop(T[20]),
    ],
    "shard01": [
        make.noop(T[1]),
        make.insert(T[2], {"_id": 2}),
        make.update(T[3], 2, {"u": {"a": 1}}),
        make.delete(T[6], 2),
        make.noop(T[20]),
    ],
}


def _drain(reader: ShardstreamStreamReader, start: dict[str, Any]) -> list[list[dict[str, Any]]]:
    batches = []
    while (end := reader.latestOffset(start, ReadMaxRows(2))) != start:
        rows = [
            r for p in reader.partitions(start, end) for b in reader.read(p) for r in b.to_pylist()
        ]
        batches.append(rows)
        start = end
    return batches


@pytest.mark.parametrize("mode", ["merged", "perShard"])
def test_live_batches_equal_the_same_oplogs_read_as_files(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Batch by batch: the files planned as a live cluster is (by the merge, not in
    # cluster-time windows, which only files take; test_window_planner.py checks those).
    monkeypatch.setattr(data_source, "windows_apply", lambda spec: False)
    files = []
    for name, entries in OPLOGS.items():
        path = tmp_path / f"{name}.bson"
        path.write_bytes(b"".join(bson.encode(entry) for entry in entries))
        files.append(f"{name}={path}")
    common = {"startAtOperationTime": "1700000000,1", "partitionMode": mode}
    expected = _drain(
        ShardstreamStreamReader(parse_options({"oplog": ",".join(files), **common})),
        None
        or ShardstreamStreamReader(
            parse_options({"oplog": ",".join(files), **common})
        ).initialOffset(),
    )
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, OPLOGS)
        reader = ShardstreamStreamReader(parse_options({"uri": cluster.uri, **common}))
        reader.prepareForTriggerAvailableNow()
        try:
            live = _drain(reader, reader.initialOffset())
        finally:
            reader.stop()
    assert [len(rows) for rows in live] == [2, 2, 2]
    assert live == expected


def test_a_quiet_live_stream_moves_its_watermark_without_events() -> None:
    later = Timestamp(1700000000 + 120, 1)  # two minutes of cluster time with nothing watched
    with EmulatedCluster(shards=2) as cluster:
        for name, entries in OPLOGS.items():
            for entry in entries:
                cluster.shard(name).append(entry)
            cluster.shard(name).append(make.noop(later))
            cluster.shard(name).set_majority(later)
        options = {"uri": cluster.uri, "db": "elsewhere", "startAtOperationTime": "1700000000,1"}
        reader = ShardstreamStreamReader(parse_options(options))
        try:
            start = reader.initialOffset()
            end = start
            deadline = time.monotonic() + 10
            while end == start and time.monotonic() < deadline:
                time.sleep(0.05)  # the tailers deliver in the background
                end = reader.latestOffset(start, ReadMaxRows(10))
            # An eventless batch: no task to run, the watermark is a mark past the quiet time.
            assert end["shards"] == start["shards"]
            assert reader.partitions(start, end) == []
            assert decode_token(token_of_text(end["watermark"])).cluster_time >= later
            assert reader.latestOffset(end, ReadMaxRows(10)) == end  # and it stays there
        finally:
            reader.stop()


def test_a_live_start_is_pinned_in_the_first_offset_so_a_restart_needs_no_option() -> None:
    # A checkpoint whose batches hold no event yet has only the initial offset: a restart
    # given other options (the snapshot's T0 is an option of the first run only) must
    # still start where the first run did.
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, OPLOGS)
        first = ShardstreamStreamReader(
            parse_options({"uri": cluster.uri, "startAtOperationTime": "1700000000,3"})
        )
        try:
            start = first.initialOffset()
        finally:
            first.stop()
        pinned = decode_token(token_of_text(start["watermark"]))
        assert (pinned.cluster_time, pinned.token_type) == (T[3], 0)  # the mark sorts first
        restarted = ShardstreamStreamReader(parse_options({"uri": cluster.uri}))
        restarted.prepareForTriggerAvailableNow()
        try:
            rows = [row for batch in _drain(restarted, start) for row in batch]
        finally:
            restarted.stop()
    times = [(row["clusterTime"]["t"], row["clusterTime"]["i"]) for row in rows]
    assert times == [(t.time, t.inc) for t in (T[3], T[5], T[6], T[7])]
