"""Per-shard mode over BSON files: batches are cluster-time windows planned from ts indexes.

The oracle is merged mode on the reference path (the driver's merge, one merged task, no
fast start): the windows' rows, all batches together, must be its rows; every window's
rows sort after the previous window's; and the driver never runs a merge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bson
import pytest
from bson.timestamp import Timestamp
from pyspark.sql.streaming.datasource import ReadMaxRows

from shardstream.bench.corpus import corpus_files
from shardstream.errors import MergeError, OplogError
from shardstream.oplog.ts_index import STRIDE
from shardstream.spark.source import batch_planner, range_reader
from shardstream.spark.source import fast_start as fast_start_module
from shardstream.spark.source.data_source import ShardstreamBatchReader, ShardstreamStreamReader
from shardstream.spark.source.offsets import StreamOffset
from shardstream.spark.source.options import parse_options
from shardstream.spark.source.partitions import ShardWindow
from shardstream.spark.source.window_planner import windows_apply
from tests.spark.lakehouse_checks import sim_files_option
from tests.spark.test_stream_reader import _drain, _read


def _sim_files(tmp_path: Path, seed: int) -> str:
    return sim_files_option(tmp_path, seed, operations=400, p_migration=0.05)


def _corpus_files(tmp_path: Path) -> str:
    return corpus_files(tmp_path / "corpus", 600, shards=3)


def _files(corpus: str, tmp_path: Path) -> str:
    return _corpus_files(tmp_path) if corpus == "objectid" else _sim_files(tmp_path, int(corpus))


def _table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # A DDL event seen on several shards has one token and a row per shard.
    return sorted(rows, key=lambda row: (row["_id"], row["shard"]))


def _reference(options: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    with monkeypatch.context() as patched:
        for module in (fast_start_module, range_reader):
            patched.setattr(module, "fast_start", lambda spec, after: None)
        reader = ShardstreamStreamReader(parse_options({**options, "partitionMode": "merged"}))
        return [row for _, _, rows in _drain(reader, ReadMaxRows(10_000)) for row in rows]


@pytest.mark.parametrize("corpus", ["1", "4", "objectid"])
def test_windows_give_the_merged_streams_rows(
    corpus: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {"oplog": _files(corpus, tmp_path), "partitionMode": "perShard"}
    assert windows_apply(parse_options(options))
    reference = _reference(options, monkeypatch)

    def no_merge(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a window is planned without the merge")

    monkeypatch.setattr(batch_planner.BatchPlanner, "plan", no_merge)
    batches = _drain(ShardstreamStreamReader(parse_options(options)), ReadMaxRows(150))
    assert len(batches) > 3
    previous = ""
    for _, end, rows in batches:
        assert end.get("window") is True
        assert StreamOffset.from_json(end).window
        ids = [row["_id"] for row in rows]
        assert all(previous < token < end["watermark"] for token in ids)  # exactly once
        previous = max(ids, default=previous)
    assert _table([row for _, _, rows in batches for row in rows]) == _table(reference)


def test_a_window_respects_the_match_pipeline_and_the_end_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {
        "oplog": _sim_files(tmp_path, 2),
        "partitionMode": "perShard",
        "pipeline": '[{"$match": {"operationType": {"$in": ["insert", "delete"]}}}]',
    }
    everything = _reference(options, monkeypatch)
    times = sorted({row["clusterTime"]["t"] for row in everything})
    options["endAtOperationTime"] = f"{times[len(times) // 2]},1"
    reference = _reference(options, monkeypatch)
    assert 0 < len(reference) < len(everything)
    assert {row["operationType"] for row in reference} <= {"insert", "delete"}
    rows = [
        r
        for _, _, rs in _drain(ShardstreamStreamReader(parse_options(options)), ReadMaxRows(100))
        for r in rs
    ]
    assert _table(rows) == _table(reference)


def test_a_batch_read_is_one_window_per_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {"oplog": _corpus_files(tmp_path), "partitionMode": "perShard"}
    reader = ShardstreamBatchReader(parse_options(options))
    partitions = reader.partitions()
    assert [type(p) for p in partitions] == [ShardWindow] * 3
    assert _table(_read(reader, partitions)) == _table(_reference(options, monkeypatch))


def test_a_per_shard_plan_over_an_out_of_order_file_fails_instead_of_reading_nothing(
    tmp_path: Path,
) -> None:
    files = _corpus_files(tmp_path)
    first = Path(files.split(",")[0].partition("=")[2])
    entries = list(bson.decode_all(first.read_bytes()))
    entries[STRIDE * 2]["ts"] = Timestamp(1, 1)
    first.write_bytes(b"".join(bson.encode(entry) for entry in entries))
    reader = ShardstreamBatchReader(parse_options({"oplog": files, "partitionMode": "perShard"}))
    # The plan runs to the files' end, so a task meets the entry in its place (after any
    # earlier entry's own error, as the reference path reports them).
    with pytest.raises(OplogError, match="expected ts to increase"):
        _read(reader, reader.partitions())


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        # The file ends inside an entry before any whole one: framed, never sampled.
        (lambda data: data[:40], "truncated BSON"),
        # The first entry at the largest Timestamp, the rest below it: no window can end
        # past it (found by the fuzz campaign: a ValueError building the window's end).
        ("max-ts-first", "expected ts seconds and increment at most 2147483647"),
        ("max-ts-last", "expected ts seconds and increment at most 2147483647"),
    ],
    ids=["cut-first-entry", "max-ts-first", "max-ts-last"],
)
def test_a_per_shard_plan_reports_what_the_reference_reports(
    damage: Any, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _corpus_files(tmp_path)
    first = Path(files.split(",")[0].partition("=")[2])
    if callable(damage):
        first.write_bytes(damage(first.read_bytes()))
    else:
        entries = list(bson.decode_all(first.read_bytes()))
        entries[0 if damage == "max-ts-first" else -1]["ts"] = Timestamp(2**32 - 1, 2**32 - 1)
        first.write_bytes(b"".join(bson.encode(entry) for entry in entries))
    for layout in (files.split(",")[0], files):
        options = {"oplog": layout, "partitionMode": "perShard"}
        with pytest.raises(OplogError, match=expected):
            _reference(options, monkeypatch)
        reader = ShardstreamBatchReader(parse_options(options))
        with pytest.raises(OplogError, match=expected):
            _read(reader, reader.partitions())


def test_a_merged_query_goes_on_from_a_window_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A checkpoint written in per-shard mode, restarted in merged mode: the window offsets
    # already taken are read as windows, and the merge goes on after the last one.
    options = {"oplog": _sim_files(tmp_path, 5), "partitionMode": "perShard"}
    windows = ShardstreamStreamReader(parse_options(options))
    start = windows.initialOffset()
    rows: list[dict[str, Any]] = []
    for _ in range(2):
        end = windows.latestOffset(start, ReadMaxRows(200))
        rows += _read(windows, windows.partitions(start, end))
        start = end
    merged = ShardstreamStreamReader(parse_options({**options, "partitionMode": "merged"}))
    assert merged.partitions(windows.initialOffset(), start)  # a window read in merged mode
    while (end := merged.latestOffset(start, ReadMaxRows(200))) != start:
        rows += _read(merged, merged.partitions(start, end))
        start = end
    assert _table(rows) == _table(_reference(options, monkeypatch))


@pytest.mark.parametrize(
    "extra",
    [{"db": "shop"}, {"showExpandedEvents": "true"}, {"partitionMode": "merged"}],
    ids=["database-stream", "expanded-events", "merged-mode"],
)
def test_windows_only_where_they_are_the_merged_stream(
    extra: dict[str, str], tmp_path: Path
) -> None:
    # A database or collection stream ends at its invalidate, which only the merge finds.
    options = {"oplog": _corpus_files(tmp_path), "partitionMode": "perShard", **extra}
    assert not windows_apply(parse_options(options))


def test_a_window_task_needs_the_fast_path(tmp_path: Path) -> None:
    spec = parse_options({"oplog": _corpus_files(tmp_path), "showExpandedEvents": "true"})
    with pytest.raises(MergeError, match="fast path"):
        list(range_reader.read_shard_window(spec, "s0", "", "82"))
