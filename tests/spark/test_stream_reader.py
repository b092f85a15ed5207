"""The stream reader's logic without Spark: offsets, read limits, replay, partition modes.

The reader classes are built directly and driven as Spark's source runner drives them
(initialOffset, latestOffset, partitions, read, commit); the reference is the merged
stream read in one go.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import bson
import pytest
from bson import json_util
from bson.timestamp import Timestamp
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from shardstream.errors import ChangeStreamHistoryLost, MergeError, OplogError
from shardstream.merger import MergedStream
from shardstream.resume_token import decode_token
from shardstream.sim import simulated_sources
from shardstream.spark.source.data_source import ShardstreamBatchReader, ShardstreamStreamReader
from shardstream.spark.source.offsets import data_of, token_of_text
from shardstream.spark.source.options import parse_options
from shardstream.spark.source.partitions import MergedRange, ShardRange
from shardstream.spark.source.rows import EVENT_SCHEMA
from shardstream.spark.source.simulated_input import simulated_run
from tests import factories as make

Batch = tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]


def _reader(**options: str) -> ShardstreamStreamReader:
    return ShardstreamStreamReader(parse_options(options))


def _read(reader: Any, partitions: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for partition in partitions:
        for batch in reader.read(partition):
            assert batch.schema == EVENT_SCHEMA
            rows += batch.to_pylist()
    return rows


def _drain(reader: ShardstreamStreamReader, limit: Any) -> list[Batch]:
    """Run the query to the end as Spark would: one (start, end, rows) per batch."""
    batches: list[Batch] = []
    start = reader.initialOffset()
    while True:
        end = reader.latestOffset(start, limit)
        if end == start:
            assert reader.partitions(start, end) == []
            return batches
        batches.append((start, end, _read(reader, reader.partitions(start, end))))
        reader.commit(end)
        start = end


def _reference(options: Mapping[str, str]) -> list[str]:
    """The merged stream's tokens in one go (no batches, no Spark)."""
    spec = parse_options(options)
    assert spec.simulation is not None
    stream = MergedStream(
        simulated_sources(simulated_run(spec.simulation), seed=99),
        spec.stream,
    )
    ids: list[str] = []
    while not stream.exhausted:
        ids += [event.token.data for event in stream.next_batch(500)[0]]
    return ids


def _sim(seed: int, **extra: str) -> dict[str, str]:
    return {"simulate": "true", "shards": "3", "entries": "250", "seed": str(seed), **extra}


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("expanded", ["false", "true"])
def test_batches_are_consecutive_slices_of_the_merged_stream(seed: int, expanded: str) -> None:
    options = _sim(seed, showExpandedEvents=expanded)
    batches = _drain(_reader(**options), ReadMaxRows(37))
    ids = [row["_id"] for _, _, rows in batches for row in rows]
    assert ids == _reference(options)  # merged mode: stream order, nothing lost or repeated
    assert all(0 < len(rows) <= 37 for _, _, rows in batches)
    assert all(len(rows) == 37 for _, _, rows in batches[:-1])
    for (_, end, rows), (_, _, later) in itertools.pairwise(batches):
        assert data_of(end["watermark"]) == rows[-1]["_id"] < later[0]["_id"]


def test_the_cut_falls_inside_transactions_and_the_next_batch_resumes_there() -> None:
    inside = 0
    for seed in (1, 2):
        batches = _drain(_reader(**_sim(seed)), ReadMaxRows(9))
        for (_, end, rows), (_, _, later) in itertools.pairwise(batches):
            last, first = rows[-1], later[0]
            same_txn = last["lsid"] is not None and (
                (last["lsid"], last["txnNumber"]) == (first["lsid"], first["txnNumber"])
            )
            if same_txn and last["clusterTime"] == first["clusterTime"]:
                inside += 1  # one commit time: only the token's txnOpIndex tells them apart
                cut = decode_token(token_of_text(end["watermark"]))  # type bits included
                time = first["clusterTime"]
                assert cut.cluster_time == Timestamp(time["t"], time["i"])
                assert data_of(end["watermark"]) == last["_id"] < first["_id"]
        assert [row["_id"] for _, _, rows in batches for row in rows] == _reference(_sim(seed))
    assert inside > 0  # the seeds do cut between two operations of one transaction


def test_offsets_have_one_key_order_and_name_each_shards_last_event() -> None:
    batches = _drain(_reader(**_sim(5)), ReadMaxRows(50))
    for start, end, rows in batches:
        assert list(end) == ["v", "watermark", "shards"]
        assert list(end["shards"]) == sorted(end["shards"])
        assert json.loads(json.dumps(end)) == end
        for shard, token in end["shards"].items():
            mine = [row["_id"] for row in rows if row["shard"] == shard]
            if mine:
                assert data_of(token) == mine[-1]
            else:
                assert token == start["shards"][shard]


def test_read_all_available_wins_over_the_default_limit() -> None:
    reader = _reader(**_sim(1), maxEventsPerTrigger="10")
    assert reader.getDefaultReadLimit() == ReadMaxRows(10)
    batches = _drain(reader, ReadAllAvailable())
    assert len(batches) == 1
    assert len(batches[0][2]) == len(_reference(_sim(1)))
    assert _reader(**_sim(1)).getDefaultReadLimit() == ReadAllAvailable()


def test_a_replayed_batch_gives_the_same_rows_from_a_new_reader() -> None:
    options = _sim(2, partitionMode="perShard", eventsPerPartition="7")
    batches = _drain(_reader(**options), ReadMaxRows(40))
    start, end, rows = batches[len(batches) // 2]
    # A restart: a fresh reader (no planner state) is asked for the write-ahead batch.
    again = _reader(**options)
    partitions = again.partitions(start, end)
    assert all(isinstance(p, ShardRange) for p in partitions)
    assert len(partitions) > 3  # split every 7 events of a shard
    assert _read(again, partitions) == rows


@pytest.mark.parametrize("seed", [1, 2, 3, 6])
def test_per_shard_mode_gives_the_merged_rows(seed: int) -> None:
    merged = _drain(_reader(**_sim(seed, showExpandedEvents="true")), ReadMaxRows(60))
    per_shard = _drain(
        _reader(**_sim(seed, showExpandedEvents="true", partitionMode="perShard")),
        ReadMaxRows(60),
    )
    assert [(s, e) for s, e, _ in per_shard] == [(s, e) for s, e, _ in merged]
    for (_, _, merged_rows), (_, _, shard_rows) in zip(merged, per_shard, strict=True):
        assert sorted(shard_rows, key=lambda row: row["_id"]) == merged_rows
    config = parse_options(_sim(seed)).simulation
    assert config is not None
    result = simulated_run(config)
    assert result.counters.migrations > 0
    assert result.counters.multi_shard_transactions > 0


def test_per_shard_mode_applies_the_router_stages() -> None:
    options = _sim(
        3, db="shop", coll="orders", pipeline='[{"$match": {"operationType": "update"}}]'
    )
    merged = _drain(_reader(**options), ReadMaxRows(20))
    per_shard = _drain(_reader(**options, partitionMode="perShard"), ReadMaxRows(20))
    rows = [row for _, _, batch in merged for row in batch]
    assert rows
    assert {(r["operationType"], r["coll"]) for r in rows} == {("update", "orders")}
    assert sorted(r["_id"] for _, _, b in per_shard for r in b) == [r["_id"] for r in rows]


def test_merged_mode_is_one_partition_and_empty_batches_have_none() -> None:
    reader = _reader(**_sim(1))
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(5))
    (partition,) = reader.partitions(start, end)
    assert isinstance(partition, MergedRange)
    assert reader.partitions(end, end) == []


def _write(tmp_path: Path, oplogs: Mapping[str, list[dict[str, Any]]]) -> str:
    paths = []
    for name, entries in oplogs.items():
        path = tmp_path / f"{name}.bson"
        path.write_bytes(b"".join(bson.encode(entry) for entry in entries))
        paths.append(f"{name}={path}")
    return ",".join(paths)


T = [Timestamp(1700000000, i) for i in range(20)]


def _dropped_on_two_shards() -> dict[str, list[dict[str, Any]]]:
    drop = make.command(T[5], "db", {"drop": "coll"})
    return {
        "a": [make.noop(T[0]), make.insert(T[1], {"_id": 1}), drop, make.insert(T[7], {"_id": 7})],
        "b": [make.noop(T[0]), make.insert(T[2], {"_id": 2}), drop, make.insert(T[8], {"_id": 8})],
    }


@pytest.mark.parametrize("mode", ["merged", "perShard"])
def test_identical_tokens_stay_in_one_batch_and_a_batch_ends_at_an_invalidate(
    tmp_path: Path, mode: str
) -> None:
    oplog = _write(tmp_path, _dropped_on_two_shards())
    reader = _reader(oplog=oplog, db="db", coll="coll", partitionMode=mode)
    batches = _drain(reader, ReadMaxRows(1))
    kinds = [[(row["operationType"], row["shard"]) for row in rows] for _, _, rows in batches]
    # One drop per shard (byte-identical tokens: never split), then the invalidate ends the
    # stream; the next batch starts after it (startAfter), as a resumed stream does.
    assert [sorted(kind) for kind in kinds] == [
        [("insert", "a")],
        [("insert", "b")],
        [("drop", "a"), ("drop", "b")],
        [("invalidate", "a")],
        [("insert", "a")],
        [("insert", "b")],
    ]


def test_end_at_operation_time_bounds_a_batch_read(tmp_path: Path) -> None:
    oplog = _write(tmp_path, _dropped_on_two_shards())
    spec = parse_options({"oplog": oplog, "db": "db", "endAtOperationTime": "1700000000,5"})
    reader = ShardstreamBatchReader(spec)
    rows = _read(reader, reader.partitions())
    # Both inserts, but not the drops at the (exclusive) end time.
    assert [row["documentKey"] for row in rows] == [
        '{"_id": {"$numberInt": "1"}}',
        '{"_id": {"$numberInt": "2"}}',
    ]


def test_start_at_operation_time_and_a_later_end_for_a_backfill(tmp_path: Path) -> None:
    oplog = _write(tmp_path, _dropped_on_two_shards())
    spec = parse_options(
        {
            "oplog": oplog,
            "db": "db",
            "startAtOperationTime": "1700000000,2",
            "endAtOperationTime": "1700000000,8",
            "partitionMode": "perShard",
        }
    )
    reader = ShardstreamBatchReader(spec)
    rows = sorted(_read(reader, reader.partitions()), key=lambda row: row["_id"])
    assert [(row["operationType"], row["clusterTime"]["i"]) for row in rows] == [
        ("insert", 2),
        ("drop", 5),
        ("drop", 5),
        ("insert", 7),
    ]


def test_a_range_whose_oplog_rolled_over_fails_as_history_lost(tmp_path: Path) -> None:
    oplogs = _dropped_on_two_shards()
    oplog = _write(tmp_path, oplogs)
    reader = _reader(oplog=oplog, db="db")
    start = reader.initialOffset()
    first = reader.latestOffset(start, ReadMaxRows(1))
    end = reader.latestOffset(first, ReadMaxRows(1))
    partitions = reader.partitions(first, end)
    # Before the batch is read, shard a's oplog rolls past the batch's start.
    _write(tmp_path, {"a": oplogs["a"][3:]})
    with pytest.raises(ChangeStreamHistoryLost):
        _read(reader, partitions)


@pytest.mark.parametrize("mode", ["merged", "perShard"])
def test_a_range_that_changed_under_the_reader_fails_loudly(tmp_path: Path, mode: str) -> None:
    oplogs = _dropped_on_two_shards()
    reader = _reader(oplog=_write(tmp_path, oplogs), db="db", partitionMode=mode)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(2))
    partitions = reader.partitions(start, end)
    # Shard b's oplog is replaced by another history: its planned last event is gone.
    _write(tmp_path, {"b": [make.noop(T[0]), make.insert(T[3], {"_id": 3}), make.noop(T[9])]})
    with pytest.raises(OplogError, match=r"cannot re-read .*shard 'b'"):
        _read(reader, partitions)


def test_relaxed_json_on_request() -> None:
    reader = _reader(**_sim(1), jsonFormat="relaxed")
    start = reader.initialOffset()
    rows = _read(reader, reader.partitions(start, reader.latestOffset(start, ReadMaxRows(20))))
    inserts = [row for row in rows if row["operationType"] == "insert"]
    assert inserts
    assert all("$numberInt" not in row["documentKey"] for row in inserts)
    assert all(row["documentKey"].startswith('{"') for row in inserts)


def test_a_replayed_batch_whose_stream_changed_cannot_be_planned_again(tmp_path: Path) -> None:
    oplogs = _dropped_on_two_shards()
    options = {"oplog": _write(tmp_path, oplogs), "db": "db", "partitionMode": "perShard"}
    reader = _reader(**options)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(2))
    _write(tmp_path, {"b": [make.noop(T[0]), make.insert(T[3], {"_id": 3}), make.noop(T[9])]})
    with pytest.raises(MergeError, match="cannot be planned again"):
        _reader(**options).partitions(start, end)  # after a restart: no boundaries cached


@pytest.mark.parametrize("input_format", ["bson", "ejson"])
def test_a_backfill_from_oplog_dumps_equals_the_simulated_cluster(
    tmp_path: Path, input_format: str
) -> None:
    options = _sim(4, showExpandedEvents="true")
    config = parse_options(options).simulation
    assert config is not None
    paths = []
    for shard, path in simulated_run(config).write_oplogs(tmp_path).items():
        if input_format == "ejson":
            entries = bson.decode_all(path.read_bytes())
            path = path.with_suffix(".jsonl")
            path.write_text(
                "".join(
                    json_util.dumps(entry, json_options=json_util.CANONICAL_JSON_OPTIONS) + "\n"
                    for entry in entries
                )
            )
        paths.append(f"{shard}={path}")
    dump = ShardstreamBatchReader(
        parse_options(
            {
                "oplog": ",".join(paths),
                "inputFormat": input_format,
                "showExpandedEvents": "true",
                "partitionMode": "perShard",
            }
        )
    )
    simulated = ShardstreamBatchReader(parse_options(options))
    rows = sorted(_read(dump, dump.partitions()), key=lambda row: row["_id"])
    assert rows == _read(simulated, simulated.partitions())
    assert [row["_id"] for row in rows] == _reference(options)


def test_a_new_query_can_start_after_a_stored_watermark() -> None:
    # A sink that lost its checkpoint starts again after the watermark it committed.
    options = _sim(2)
    batches = _drain(_reader(**options), ReadMaxRows(100))
    watermarks = [end["watermark"] for _, end, _ in batches[:-1]]
    stored = next(text for text in watermarks if ":" in text)  # one with type bits
    position = [end["watermark"] for _, end, _ in batches].index(stored)
    later = [row["_id"] for _, _, rows in batches[position + 1 :] for row in rows]
    again = _drain(_reader(**options, startAfter=stored), ReadMaxRows(100))
    assert [row["_id"] for _, _, rows in again for row in rows] == later


def test_end_at_operation_time_pauses_a_stream_that_a_later_query_continues() -> None:
    options = _sim(3)
    reference = _reference(options)
    # Stop before the event half way: its cluster time is the (exclusive) end.
    middle = next(
        row["clusterTime"]
        for _, _, rows in _drain(_reader(**options), ReadMaxRows(1000))
        for row in rows
        if row["_id"] == reference[len(reference) // 2]
    )
    bounded = _reader(**options, endAtOperationTime=f"{middle['t']},{middle['i']}")
    first = _drain(bounded, ReadMaxRows(40))
    paused = first[-1][1]
    assert bounded.latestOffset(paused, ReadAllAvailable()) == paused  # nothing past the end
    seen = [row["_id"] for _, _, rows in first for row in rows]
    assert seen == reference[: len(seen)]
    assert 0 < len(seen) <= len(reference) // 2
    # The same checkpointed offset, read by a query without the bound, goes on.
    rest = _reader(**options)
    later: list[str] = []
    start = paused
    while (end := rest.latestOffset(start, ReadMaxRows(40))) != start:
        later += [row["_id"] for row in _read(rest, rest.partitions(start, end))]
        start = end
    assert seen + later == reference


@pytest.mark.parametrize("mode", ["merged", "perShard"])
def test_a_larger_batch_also_ends_at_the_invalidate(tmp_path: Path, mode: str) -> None:
    oplog = _write(tmp_path, _dropped_on_two_shards())
    reader = _reader(oplog=oplog, db="db", coll="coll", partitionMode=mode)
    batches = _drain(reader, ReadMaxRows(10))
    kinds = [sorted(row["operationType"] for row in rows) for _, _, rows in batches]
    assert kinds == [["drop", "drop", "insert", "insert", "invalidate"], ["insert", "insert"]]
