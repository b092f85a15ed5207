"""Micro-batches capped by size (``maxBytesPerTrigger``) as well as by count, and tasks'
Arrow batches cut by size: large documents no longer make one batch too big for Spark.

Without the cap, 3,000 documents of 400 KB (1.2 GB) planned as one batch killed the local
JVM (its direct memory, then its heap); ``benchmarks/README.md`` ("Large documents") has
that run. These tests hold the rules on small files: every batch within the cap (one
event, or one window stride, at least), all batches together the stream exactly once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows

from shardstream.bench.corpus import large_document_files
from shardstream.errors import ConfigurationError
from shardstream.oplog import ts_index
from shardstream.oplog.ts_index import STRIDE
from shardstream.spark.source import partitions
from shardstream.spark.source.data_source import ShardstreamStreamReader, batch_limits
from shardstream.spark.source.event_batches import events_to_batch
from shardstream.spark.source.option_values import format_byte_size, parse_byte_size
from shardstream.spark.source.options import parse_options
from tests.spark.lakehouse_checks import merged_file_events
from tests.spark.test_stream_reader import _drain

SHARDS = 3
DOCUMENTS = 96  # per shard: three ts-index strides
BLOB = 20_000  # bytes of text per document


def _big_files(tmp_path: Path) -> str:
    """``SHARDS`` oplog files of ``DOCUMENTS`` inserts of ~20 KB documents each."""
    return large_document_files(tmp_path, SHARDS, DOCUMENTS, BLOB)


def _ids(batches: list[Any]) -> list[str]:
    return [row["_id"] for _, _, rows in batches for row in rows]


@pytest.mark.parametrize(
    ("text", "size"),
    [("1", 1), ("4096", 4096), ("512k", 512 << 10), ("64M", 64 << 20), (" 2gb ", 2 << 30)],
)
def test_sizes_read_as_bytes_with_binary_multiples(text: str, size: int) -> None:
    assert parse_byte_size("maxBytesPerTrigger", text) == size
    assert parse_byte_size("x", format_byte_size(size)) == size


@pytest.mark.parametrize("text", ["", "0", "0m", "-1", "1.5m", "12t", "m", "lots"])
def test_a_bad_size_names_the_option_and_what_arrived(text: str) -> None:
    with pytest.raises(ConfigurationError, match="expected maxBytesPerTrigger as a size") as err:
        parse_options({"simulate": "true", "maxBytesPerTrigger": text})
    assert repr(text) in str(err.value)


def test_the_default_limit_is_the_events_one_with_the_byte_cap_beside_it() -> None:
    both = parse_options(
        {"simulate": "true", "maxEventsPerTrigger": "10", "maxBytesPerTrigger": "1m"}
    )
    only_bytes = parse_options({"simulate": "true", "maxBytesPerTrigger": "1m"})
    neither = parse_options({"simulate": "true"})
    assert ShardstreamStreamReader(both).getDefaultReadLimit() == ReadMaxRows(10)
    assert ShardstreamStreamReader(only_bytes).getDefaultReadLimit() == ReadMaxBytes(1 << 20)
    assert ShardstreamStreamReader(neither).getDefaultReadLimit() == ReadAllAvailable()
    assert batch_limits(both, ReadMaxRows(10)) == (10, 1 << 20)
    assert batch_limits(both, ReadMaxBytes(500)) == (10, 500)
    assert batch_limits(only_bytes, ReadMaxBytes(1 << 20)) == (None, 1 << 20)
    assert batch_limits(both, ReadAllAvailable()) == (None, None)  # Trigger.Once: all of it


@pytest.mark.parametrize("cap", [100_000, 1])
def test_merged_batches_stay_within_the_byte_cap_and_read_everything_once(
    cap: int, tmp_path: Path
) -> None:
    options = {"oplog": _big_files(tmp_path), "maxBytesPerTrigger": str(cap)}
    whole = _drain(ShardstreamStreamReader(parse_options(options)), ReadAllAvailable())
    batches = _drain(ShardstreamStreamReader(parse_options(options)), ReadMaxRows(1_000))
    assert len(whole) == 1
    per_batch = max(1, cap // BLOB)  # one event at least, however large
    assert all(1 <= len(rows) <= per_batch for _, _, rows in batches)
    assert len(batches) >= SHARDS * DOCUMENTS // per_batch
    assert _ids(batches) == _ids(whole)


@pytest.mark.parametrize("sample_bytes", [ts_index.SAMPLE_BYTES, 4 * BLOB])
def test_per_shard_windows_stay_near_the_byte_cap(
    sample_bytes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ts_index, "SAMPLE_BYTES", sample_bytes)
    files = _big_files(tmp_path)
    options = {"oplog": files, "partitionMode": "perShard", "maxBytesPerTrigger": "700k"}
    batches = _drain(ShardstreamStreamReader(parse_options(options)), ReadMaxRows(100_000))
    whole = _drain(ShardstreamStreamReader(parse_options({"oplog": files})), ReadAllAvailable())
    # A window ends at a sampled time: the one whose entries reach the cap. Beyond them it
    # holds, on each shard, the entries since that shard's last sample below the end: up
    # to a stride, or the entries of SAMPLE_BYTES (4 here with the smaller setting).
    per_shard = min(STRIDE, -(-sample_bytes // BLOB))
    assert len(batches) > 2
    assert all(0 < len(rows) <= 700_000 // BLOB + SHARDS * per_shard for _, _, rows in batches)
    assert sorted(_ids(batches)) == sorted(_ids(whole))


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_tasks_arrow_batches_are_cut_by_size(
    fast_path: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = merged_file_events(_big_files(tmp_path), raw=fast_path)
    monkeypatch.setattr(partitions, "BYTES_PER_ARROW_BATCH", 5 * BLOB)
    cut = list(partitions.arrow_batches(events, relaxed=False))
    assert [batch.num_rows for batch in cut[:-1]] == [5] * (len(cut) - 1)  # 5 x 20 KB
    assert 1 <= cut[-1].num_rows <= 5
    rows = [row for batch in cut for row in batch.to_pylist()]
    assert rows == events_to_batch(events).to_pylist()
