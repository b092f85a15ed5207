"""A replica set's oplog, like a shard's, must strictly increase in ts on every path.

server: the oplog's records are keyed by their ts (record_id_helpers::keyForOptime), so
one oplog never holds two entries at one ts, and a scan reads them in increasing order; a
file that does not is refused, with the message a shard of a merge has always given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.errors import OplogError
from shardstream.oplog import read_oplog_file
from shardstream.oplog.file_source import FileOplogSource
from shardstream.oplog.ts_order import in_ts_order
from tests import factories as make
from tests.transform.replay_paths import ALL_PATHS, assert_refused, run_paths, write_oplog


def _inserts(*times: tuple[int, int]) -> list[dict[str, Any]]:
    return [
        make.insert(Timestamp(*time), {"_id": ObjectId(f"65f0000000000000000000{n:02x}")})
        for n, time in enumerate(times)
    ]


@pytest.mark.parametrize(
    ("times", "got", "after"),
    [
        (((10, 1), (10, 1)), "Timestamp(10, 1)", "Timestamp(10, 1)"),
        (((10, 2), (10, 1)), "Timestamp(10, 1)", "Timestamp(10, 2)"),
        (((10, 1), (11, 1), (9, 5)), "Timestamp(9, 5)", "Timestamp(11, 1)"),
    ],
    ids=["duplicate", "decreasing", "decreasing-later"],
)
def test_an_oplog_out_of_ts_order_is_refused_on_every_path(
    times: tuple[tuple[int, int], ...],
    got: str,
    after: str,
    tmp_path: Path,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    verdicts = run_paths(tmp_path, _inserts(*times), capsysbinary, ALL_PATHS)
    messages = assert_refused(verdicts, "expected ts to increase", f"got {got} after {after}")
    # Each names its oplog: the file of a replica set, shard a of a merge.
    for path in ("fast", "fast-json", "reference", "expanded"):
        assert "oplog." in verdicts[path].message
    for message in messages[4:]:
        assert "shard 'a'" in message


@pytest.mark.parametrize("ts", [None, 5, "x"], ids=["missing", "int", "string"])
def test_an_entry_without_a_timestamp_ts_is_refused_on_every_path(
    ts: Any, tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """server: ts is a required Timestamp of every oplog entry (OpTimeBase in
    oplog_entry.idl); refused before the transform sees the entry, on every path."""
    entries = _inserts((10, 1), (10, 2))
    if ts is None:
        del entries[1]["ts"]
    else:
        entries[1]["ts"] = ts
    verdicts = run_paths(tmp_path, entries, capsysbinary, ALL_PATHS)
    assert_refused(verdicts, "expected every entry to have a Timestamp ts", f"got {ts!r}")


@pytest.mark.parametrize("ts", [(2**31, 1), (10, 2**31), (2**32 - 1, 2**32 - 1)])
def test_an_entry_beyond_the_servers_clock_is_refused_on_every_path(
    ts: tuple[int, int], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """server: the cluster time never passes 2**31 - 1 seconds or increments
    (``LogicalClock::kMaxSignedInt``), so no oplog holds such a ts; refused as out of order
    is, and no window has to end past the largest Timestamp."""
    verdicts = run_paths(tmp_path, _inserts((10, 1), ts), capsysbinary, ALL_PATHS)
    assert_refused(
        verdicts, "expected ts seconds and increment at most 2147483647", repr(Timestamp(*ts))
    )


def test_the_first_defect_in_oplog_order_decides(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """An entry the transform refuses, before one out of order: every path reports the
    first (a source reading ahead hands out the entries before a defect first)."""
    entries = _inserts((10, 1), (10, 2), (10, 3), (9, 1))
    entries[1]["op"] = "x"
    verdicts = run_paths(tmp_path, entries, capsysbinary, ALL_PATHS)
    assert_refused(verdicts, "got 'x'", "[server error 2]")


def test_an_ordered_oplog_replays(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    verdicts = run_paths(tmp_path, _inserts((10, 1), (10, 2), (11, 1)), capsysbinary, ("fast",))
    assert verdicts["fast"].code == 0


def test_in_ts_order_passes_an_ordered_oplog_and_names_the_first_break(tmp_path: Path) -> None:
    path = write_oplog(tmp_path, "oplog", _inserts((1, 1), (1, 2), (1, 2)))
    entries = in_ts_order(read_oplog_file(str(path)), "shard 'x'")
    assert next(entries)["ts"] == Timestamp(1, 1)
    assert next(entries)["ts"] == Timestamp(1, 2)
    with pytest.raises(OplogError) as raised:
        next(entries)
    assert str(raised.value) == (
        "shard 'x': expected ts to increase, got Timestamp(1, 2) after Timestamp(1, 2)"
    )


def test_a_file_source_refuses_the_same_way(tmp_path: Path) -> None:
    path = write_oplog(tmp_path, "oplog", _inserts((2, 1), (1, 1)))
    source = FileOplogSource("s", str(path))
    first = source.next_batch(10)  # the entries before the defect come first
    assert [entry["ts"] for entry in first.entries] == [Timestamp(2, 1)]
    assert first.promise == Timestamp(2, 1)
    assert not first.exhausted
    with pytest.raises(OplogError, match=r"shard 's' \(.*\): expected ts to increase"):
        source.next_batch(10)
    source.close()


def test_a_raw_file_source_defers_a_framing_defect(tmp_path: Path) -> None:
    path = write_oplog(tmp_path, "oplog", _inserts((1, 1), (1, 2)))
    path.write_bytes(path.read_bytes() + b"\x03\x00\x00\x00")
    source = FileOplogSource("s", str(path), raw_entries=True)
    first = source.next_batch(10)
    assert len(first.entries) == 2
    assert first.promise == Timestamp(1, 2)
    with pytest.raises(OplogError, match="expected a document length of at least 5"):
        source.next_batch(10)
    source.close()


def test_an_entry_out_of_order_that_the_transform_would_refuse_is_out_of_order(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """The order rule is checked before the transform reads an entry, on every path and in
    the Spark source's readers (the fast path checks it after, and re-checks on an error:
    found by the fuzz campaign, a Spark read reporting the transform's error)."""
    from shardstream.spark.source.data_source import ShardstreamBatchReader
    from shardstream.spark.source.options import parse_options

    entries = _inserts((10, 1), (10, 2), (10, 3))
    entries[2]["ts"] = Timestamp(10, 2)
    entries[2]["op"] = "x"
    verdicts = run_paths(tmp_path, entries, capsysbinary, ALL_PATHS)
    assert_refused(verdicts, "expected ts to increase")
    for mode in ("merged", "perShard"):
        reader = ShardstreamBatchReader(
            parse_options({"oplog": f"a={tmp_path / 'oplog.bson'}", "partitionMode": mode})
        )
        with pytest.raises(OplogError, match="expected ts to increase"):
            _read_all(reader)


def _read_all(reader: Any) -> list[Any]:
    """Every partition of a batch reader read, as the executors would."""
    return [batch for partition in reader.partitions() for batch in reader.read(partition)]
