"""Per-shard batches of a live cluster (the wire emulator) as cluster-time windows, planned
from the shards' majority points and oplog counts, with no merge in the driver.

Each batch must be a slice of the merged stream (mongos's order: the reference), whatever
the limits; the driver asks the shards, the tasks read their shard's slice.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from bson.timestamp import Timestamp
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxBytes, ReadMaxRows

from shardstream.emulator import EmulatedCluster
from shardstream.errors import OplogError
from shardstream.resume_token import decode_token
from shardstream.spark.source import live_window_planner
from shardstream.spark.source.data_source import ShardstreamStreamReader
from shardstream.spark.source.offsets import token_of_text
from shardstream.spark.source.options import parse_options
from tests import factories as make
from tests.oplog.live_helpers import load_committed
from tests.spark.test_stream_reader_live import OPLOGS, T

START = {"startAtOperationTime": "1700000000,1"}


def _rows(
    reader: ShardstreamStreamReader, start: dict[str, Any], end: dict[str, Any]
) -> list[dict[str, Any]]:
    """The rows of the batch ``(start, end)``, its tasks read one after the other."""
    return [
        row
        for partition in reader.partitions(start, end)
        for batch in reader.read(partition)
        for row in batch.to_pylist()
    ]


def _drain(
    reader: ShardstreamStreamReader, start: dict[str, Any], limit: ReadLimit
) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """Every batch's rows and end offset until the reader has nothing more."""
    batches, ends = [], []
    while (end := reader.latestOffset(start, limit)) != start:
        batches.append(_rows(reader, start, end))
        ends.append(end)
        start = end
    return batches, ends


@pytest.fixture(scope="module")
def reference() -> list[dict[str, Any]]:
    """The merged stream's rows of :data:`OPLOGS`, in its order (one batch: nothing cut)."""
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, OPLOGS)
        reader = ShardstreamStreamReader(
            parse_options({"uri": cluster.uri, "partitionMode": "merged", **START})
        )
        reader.prepareForTriggerAvailableNow()
        try:
            batches, _ = _drain(reader, reader.initialOffset(), ReadMaxRows(1000))
        finally:
            reader.stop()
    return [row for batch in batches for row in batch]


def _per_shard_reader(cluster: EmulatedCluster) -> ShardstreamStreamReader:
    return ShardstreamStreamReader(
        parse_options({"uri": cluster.uri, "partitionMode": "perShard", **START})
    )


def _windows(cluster: EmulatedCluster, limit: ReadLimit) -> tuple[list[Any], list[Any]]:
    """Every batch of an ``availableNow`` per-shard read of ``cluster``, and its end."""
    reader = _per_shard_reader(cluster)
    reader.prepareForTriggerAvailableNow()
    try:
        return _drain(reader, reader.initialOffset(), limit)
    finally:
        reader.stop()


def _assert_slices(batches: list[list[dict[str, Any]]], reference: list[dict[str, Any]]) -> None:
    """The batches, each in token order, are the reference cut in consecutive slices."""
    assert [row for batch in batches for row in sorted(batch, key=lambda r: r["_id"])] == reference


@pytest.mark.parametrize(
    ("limit", "sizes"),
    [
        # One entry per shard (2 events / 2 shards): each window cut where a shard has it.
        (ReadMaxRows(2), [2, 2, 2]),
        (ReadMaxRows(4), [4, 2]),
        (ReadMaxRows(1000), [6]),
        # A byte cap far below one entry still moves one entry of a shard per window.
        (ReadMaxBytes(1), [2, 2, 2]),
    ],
)
def test_live_windows_are_slices_of_the_merged_stream(
    limit: ReadLimit, sizes: list[int], reference: list[dict[str, Any]]
) -> None:
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, OPLOGS)
        batches, ends = _windows(cluster, limit)
    assert len(reference) == 6
    assert [len(batch) for batch in batches] == sizes
    assert all(end.get("window") for end in ends)
    _assert_slices(batches, reference)
    # The last window ends at the pinned "now" (just past the newest entry), no further.
    last = decode_token(token_of_text(ends[-1]["watermark"])).cluster_time
    assert last == Timestamp(T[20].time, T[20].inc + 1)


def test_a_window_waits_for_a_lagging_shard_then_reads_what_it_had_not_committed(
    reference: list[dict[str, Any]],
) -> None:
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, {"shard00": OPLOGS["shard00"]})
        lagging = cluster.shard("shard01")
        for entry in OPLOGS["shard01"]:
            lagging.append(entry)
        lagging.set_majority(T[3])  # its delete at T6 is not majority-committed yet
        catch_up = threading.Timer(0.5, lagging.set_majority, args=(T[20],))
        catch_up.start()
        try:
            batches, _ = _windows(cluster, ReadMaxRows(1000))
        finally:
            catch_up.join()
    assert [len(batch) for batch in batches] == [3, 3]  # up to T3, then the rest
    _assert_slices(batches, reference)


def test_a_shard_that_never_reaches_the_pinned_time_fails_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(live_window_planner, "_WAIT_S", 0.3)
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, {"shard00": OPLOGS["shard00"]})
        for entry in OPLOGS["shard01"]:
            cluster.shard("shard01").append(entry)
        cluster.shard("shard01").set_majority(T[3])
        with pytest.raises(OplogError, match="majority points did not reach the pinned target"):
            _windows(cluster, ReadMaxRows(1000))


def test_a_streaming_query_waits_on_a_quiet_cluster_then_moves_its_watermark() -> None:
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, OPLOGS)
        reader = _per_shard_reader(cluster)
        try:
            start = reader.initialOffset()
            end = reader.latestOffset(start, ReadMaxRows(1000))
            rows = _rows(reader, start, end)
            assert len(rows) == 6
            # Nothing but the shards' positions moves: no batch for less than a minute...
            later = Timestamp(T[20].time + 30, 1)
            for shard in cluster.shards:
                shard.append(make.noop(later))
                shard.set_majority(later)
            assert reader.latestOffset(end, ReadMaxRows(1000)) == end
            # ... then an eventless window carries the watermark past the quiet time.
            quiet = Timestamp(T[20].time + 120, 1)
            for shard in cluster.shards:
                shard.append(make.noop(quiet))
                shard.set_majority(quiet)
            moved = reader.latestOffset(end, ReadMaxRows(1000))
            assert decode_token(token_of_text(moved["watermark"])).cluster_time > quiet
            assert _rows(reader, end, moved) == []
        finally:
            reader.stop()


def test_a_shard_added_while_streaming_hands_the_batch_to_the_merge() -> None:
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, OPLOGS)
        reader = _per_shard_reader(cluster)
        try:
            start = reader.initialOffset()
            first = reader.latestOffset(start, ReadMaxRows(2))
            assert first.get("window")
            added = cluster.add_shard("shard02", ts=T[21])
            added.append(make.noop(T[1]))  # its oplog reaches back, as a real new set's does
            added.append(make.insert(T[22], {"_id": 9}))
            added.set_majority(T[22])
            for shard in ("shard00", "shard01"):
                cluster.shard(shard).append(make.noop(T[23]))
                cluster.shard(shard).set_majority(T[23])
            deadline = time.monotonic() + 10
            rows: list[dict[str, Any]] = []
            begin = first
            while len(rows) < 5 and time.monotonic() < deadline:
                end = reader.latestOffset(begin, ReadMaxRows(1000))
                if end == begin:
                    time.sleep(0.05)  # the merge's tailers deliver in the background
                    continue
                assert not end.get("window")  # the shards are not the offset's any more
                rows += _rows(reader, begin, end)
                begin = end
        finally:
            reader.stop()
    assert len(rows) == 5  # the first window's 2 events, then 3 more and the new shard's
    assert [row["documentKey"] for row in rows][-1] == '{"_id": {"$numberInt": "9"}}'
