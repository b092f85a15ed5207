"""PositionedSource: a file or simulated oplog read from the stream's start, as a tailer is."""

from __future__ import annotations

from pathlib import Path

import bson
import pytest
from bson.timestamp import Timestamp

import shardstream
from shardstream.errors import ChangeStreamHistoryLost
from shardstream.oplog.file_source import FileOplogSource
from shardstream.oplog.source import OplogSource
from shardstream.spark.source.positioned_source import PositionedSource
from tests import factories as make

T = [Timestamp(1700000000, i) for i in range(10)]
ENTRIES = [
    make.noop(T[0]),
    make.apply_ops(T[1], [make.inner(make.insert(T[0], {"_id": 1}))], partial=True),
    make.insert(T[2], {"_id": 9}),
    make.apply_ops(T[4], [make.inner(make.insert(T[0], {"_id": 2}))], prev=T[1]),
    make.insert(T[5], {"_id": 5}),
]


def _file(tmp_path: Path, entries: list[dict[str, object]]) -> FileOplogSource:
    path = tmp_path / "a.bson"
    path.write_bytes(b"".join(bson.encode(entry) for entry in entries))
    return FileOplogSource("a", str(path))


def test_entries_before_the_start_are_skipped_but_still_fetched(tmp_path: Path) -> None:
    source = PositionedSource(_file(tmp_path, ENTRIES), T[3])
    batch = source.next_batch(2)
    assert batch is not None
    assert list(batch.entries) == []  # the two entries read were both before the start
    assert batch.promise == T[1]
    rest = source.next_batch(10)
    assert rest is not None
    assert [entry["ts"] for entry in rest.entries] == [T[4], T[5]]
    assert source.fetch_entry(T[1]) == ENTRIES[1]


def test_a_transaction_begun_before_the_start_reads_as_from_the_whole_file(
    tmp_path: Path,
) -> None:
    def keys(source: OplogSource) -> list[object]:
        with shardstream.watch({"a": source}, start_at_operation_time=T[3]) as stream:
            return [event["documentKey"]["_id"] for event in stream]

    whole = keys(_file(tmp_path, ENTRIES))
    assert whole == [1, 2, 5]
    assert keys(PositionedSource(_file(tmp_path, ENTRIES), T[3])) == whole


def test_an_oplog_that_starts_after_the_start_is_history_lost(tmp_path: Path) -> None:
    source = PositionedSource(_file(tmp_path, ENTRIES[2:]), T[1])
    with pytest.raises(ChangeStreamHistoryLost, match="starts at Timestamp"):
        source.next_batch(10)
