"""The source's planner on the fast path: the same batches and rows as on the reference path.

The driver's planner reads BSON oplog files raw and restarts after a token as a start at its
time (``fast_start``); the reference run patches that off. Both run in this process (the
reader's ``read`` is what a Spark task calls).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from shardstream.bench.corpus import corpus_files, oplog_bytes
from shardstream.merger.raw.shard_reader import FastShardReader
from shardstream.resume_token import TokenType, encode_token
from shardstream.spark.source import data_source, range_reader
from shardstream.spark.source import fast_start as fast_start_module
from shardstream.spark.source.data_source import ShardstreamStreamReader
from shardstream.spark.source.fast_start import FlooredStream, fast_start
from shardstream.spark.source.offsets import token_text
from shardstream.spark.source.options import parse_options
from tests.spark.lakehouse_checks import sim_files_option
from tests.spark.test_stream_reader import _drain


def _sim_files(tmp_path: Path, seed: int) -> str:
    return sim_files_option(tmp_path, seed, operations=300)


def _corpus_files(tmp_path: Path) -> str:
    # ObjectId keys: the events the fast path writes itself.
    return corpus_files(tmp_path / "corpus", 300, shards=3)


@pytest.mark.parametrize("corpus", ["sim", "objectid"])
@pytest.mark.parametrize("mode", ["merged", "perShard"])
def test_fast_batches_and_rows_equal_the_reference(
    corpus: str, mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Per-shard mode is planned as windows (test_window_planner.py); here, with windows
    # off, it is the merged planner's token ranges, as for sources windows do not take.
    monkeypatch.setattr(data_source, "windows_apply", lambda spec: False)
    oplog = _sim_files(tmp_path, 3) if corpus == "sim" else _corpus_files(tmp_path)
    options = {"oplog": oplog, "partitionMode": mode}
    planned = []

    class SpiedStream(FlooredStream):
        def __init__(self, *args: Any) -> None:
            planned.append(args)
            super().__init__(*args)

    shard_tasks = []

    class SpiedReader(FastShardReader):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            shard_tasks.append(args)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(fast_start_module, "FlooredStream", SpiedStream)
    monkeypatch.setattr(range_reader, "FastShardReader", SpiedReader)
    fast = _drain(ShardstreamStreamReader(parse_options(options)), ReadMaxRows(70))
    assert planned  # the planner read the oplogs on the fast path
    if mode == "perShard":
        assert shard_tasks  # and so did the tasks (merged ones: planned counts them too)
    else:
        assert len(planned) > len(fast)  # a planning stream, and one per task
    for module in (fast_start_module, range_reader):
        monkeypatch.setattr(module, "fast_start", lambda spec, after: None)
    reference = _drain(ShardstreamStreamReader(parse_options(options)), ReadMaxRows(70))
    assert len(fast) > 3
    assert fast == reference


def _spec(tmp_path: Path, **extra: str) -> Any:
    path = tmp_path / "s.bson"
    path.write_bytes(oplog_bytes(20, seed=1))
    return parse_options({"oplog": f"s={path}", **extra})


def _token(time: int, **kwargs: Any) -> str:
    from bson.timestamp import Timestamp

    from shardstream.resume_token import ResumeTokenData

    data = ResumeTokenData(
        cluster_time=Timestamp(time, 1), version=2, token_type=TokenType.EVENT, **kwargs
    )
    return token_text(encode_token(data))


def test_an_event_token_becomes_a_start_at_its_time_and_a_floor(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    after = _token(1_700_000_001, event_identifier={"operationType": "insert"})
    start = fast_start(spec, after)
    assert start is not None
    assert start.options.start_at_operation_time.time == 1_700_000_001
    assert start.options.resume_token is None
    assert start.floor == after  # the token's _data: events at or below it are dropped
    assert fast_start(spec, "") is not None  # the configured start


def test_the_reference_path_keeps_what_the_fast_start_cannot_do(tmp_path: Path) -> None:
    invalidate = _token(1_700_000_001, event_identifier={"operationType": "drop"})
    invalidate_of = _token(
        1_700_000_001, event_identifier={"operationType": "drop"}, from_invalidate=True
    )
    spec = _spec(tmp_path)
    assert fast_start(spec, invalidate) is not None
    assert fast_start(spec, invalidate_of) is None  # after it: startAfter, a new stream
    assert fast_start(_spec(tmp_path, showExpandedEvents="true"), "") is None
    ejson = tmp_path / "s.jsonl"
    ejson.write_text("")
    assert fast_start(parse_options({"oplog": f"s={ejson}"}), "") is None
