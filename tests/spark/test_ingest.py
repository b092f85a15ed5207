"""The ingest query in-process on the shared session: both partition modes, restart rules."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from shardstream.sim.apply_events import encoded_state
from shardstream.spark.delta.commits import BatchCommit, watermark_cluster_time
from shardstream.spark.delta.mirror import workers as mirror_workers
from shardstream.spark.delta.mirror.check import (
    changelog_difference,
    collection_tables,
    collections_state,
    mirror_state,
    read_table,
)
from shardstream.spark.delta.sink import LakehouseSink
from shardstream.spark.ingest.progress import IngestProgress
from shardstream.spark.ingest.query import run_ingest, stream_source_options
from shardstream.spark.ingest.settings import IngestSettings
from tests.spark.lakehouse_checks import event_batches, merged_events, simulate

SIMULATION = {"simulate": "true", "shards": "4", "entries": "200", "seed": "21"}


def _settings(root: Path, **options: str) -> IngestSettings:
    return IngestSettings(table=root, source_options={**SIMULATION, **options}, bounded=True)


def test_a_fresh_table_starts_where_the_user_said(tmp_path: Path) -> None:
    settings = _settings(tmp_path, startAtOperationTime="5,1")
    options, restart = stream_source_options(settings)
    assert restart is None
    assert options["startAtOperationTime"] == "5,1"
    assert options["jsonFormat"] == "canonical"  # the mirror needs BSON types


def test_a_lost_checkpoint_restarts_at_the_lower_watermarks_cluster_time(tmp_path: Path) -> None:
    result = simulate(seed=21, shards=4, operations=200)
    batches = event_batches(merged_events(result), 100)
    sink = LakehouseSink(tmp_path, "old")
    sink.write_batch(batches[0], 0)
    sink.write_batch(batches[1], 1)
    mirror_mark = batches[1]["_id"][-1].as_py()
    # The mirror falls behind: the change log alone takes batch 2.
    commit = BatchCommit(app_id="old", batch_id=2, watermark=batches[2]["_id"][-1].as_py())
    sink.changelog.append(batches[2], commit)
    options, restart = stream_source_options(_settings(tmp_path, resumeAfter="82AB"))
    assert restart == mirror_mark
    time = watermark_cluster_time(mirror_mark)
    assert options["startAtOperationTime"] == f"{time.time},{time.inc}"
    assert "resumeAfter" not in options
    # With checkpoint offsets present, Spark's own offsets rule and the options stay.
    (tmp_path / "_checkpoint" / "offsets").mkdir(parents=True)
    (tmp_path / "_checkpoint" / "offsets" / "2").write_text("v1\n{}\n{}")
    options, restart = stream_source_options(_settings(tmp_path, resumeAfter="82AB"))
    assert (restart, options["resumeAfter"]) == (None, "82AB")


def _sorted(table: pa.Table, keys: list[str]) -> pa.Table:
    return table.sort_by([(key, "ascending") for key in keys])


@pytest.mark.spark
@pytest.mark.parametrize("source", ["simulate", "files"])
def test_merged_and_per_shard_modes_write_identical_tables(
    spark: Any, tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # From BSON files, per-shard mode plans cluster-time windows (no merge in the driver)
    # and both modes read on the fast path; from the simulator, token ranges. Per-shard
    # mode prepares the mirror in worker processes (every batch, however small), merged
    # mode in the driver alone.
    monkeypatch.setattr(mirror_workers, "DEFAULT_MIN_EVENTS", 0)
    split_batches = []
    prepare = mirror_workers.MirrorWorkers.prepare

    def counted(self: mirror_workers.MirrorWorkers, fresh: pa.Table) -> Any:
        prepared = prepare(self, fresh)
        split_batches.append(prepared is not None and prepared.parts == 2)
        return prepared

    monkeypatch.setattr(mirror_workers.MirrorWorkers, "prepare", counted)
    result = simulate(seed=21, shards=4, operations=200)
    tokens = [event.token.data for event in merged_events(result)]
    files = result.write_oplogs(tmp_path / "oplogs")
    oplog = ",".join(f"{name}={path}" for name, path in files.items())
    tables = {}
    batches = {}
    # The third run: merged, batches cut by size (40 KB) long before 120 events.
    for mode in ("merged", "perShard", "bytes"):
        root = tmp_path / mode
        out = io.StringIO()
        progress = IngestProgress(out, interactive=False)
        limits = {"maxEventsPerTrigger": "120"}
        if mode == "bytes":
            limits = {"maxEventsPerTrigger": "100000", "maxBytesPerTrigger": "40k"}
        partitioning = {"partitionMode": "perShard" if mode == "perShard" else "merged"}
        settings = _settings(root, **partitioning, **limits)
        if source == "files":
            options = {"oplog": oplog, **partitioning, **limits}
            settings = dataclasses.replace(settings, source_options=options)
        # Compaction in one mode only: the tables must come out the same either way.
        settings = dataclasses.replace(settings, optimize_every=2 if mode == "perShard" else 0)
        settings = dataclasses.replace(settings, mirror_workers=2 if mode == "perShard" else 0)
        totals = run_ingest(spark, settings, progress)
        assert ("compacted after batch 1:" in out.getvalue()) == (mode == "perShard")
        assert totals.events == len(tokens)
        assert totals.batches >= 2
        batches[mode] = totals.batches
        changelog = read_table(root, "changelog")
        mirror = read_table(root, "mirror")
        assert changelog_difference(changelog, tokens) == {}
        assert mirror_state(mirror) == encoded_state(result.final_state)
        assert collections_state(root) == encoded_state(result.final_state)
        tables[mode] = (
            _sorted(changelog, ["_id"]),
            _sorted(mirror, ["db", "coll", "_documentId"]),
            collection_tables(root),
        )
    for other in ("perShard", "bytes"):
        assert tables["merged"][0].equals(tables[other][0])
        assert tables["merged"][1].equals(tables[other][1])
        # The typed mirrors and histories too, whatever the batches and partitions.
        assert tables["merged"][2].keys() == tables[other][2].keys()
        for name, table in tables["merged"][2].items():
            assert table.equals(tables[other][2][name]), name
    assert batches["bytes"] > batches["merged"]
    assert len(split_batches) >= 2
    assert all(split_batches)


@pytest.mark.spark
def test_the_spark_demo_checks_both_tables(spark: Any, tmp_path: Path) -> None:
    from shardstream.spark.ingest.demo import run_spark_demo

    out = io.StringIO()
    assert run_spark_demo(out, operations=200, root=tmp_path / "lake") == 0
    text = out.getvalue()
    assert "chunk migrations" in text
    assert "exactly once: yes" in text
    assert text.rstrip().endswith("byte for byte through _doc): yes")
    # Typed rows of each collection, one document's versions and a change feed are shown.
    assert f"{tmp_path / 'lake' / 'mirror' / 'shop'}" in text
    assert "versions of _id" in text
    assert "change data feed of shop." in text


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["merged", "perShard"])
def test_a_live_cluster_is_ingested_continuously_until_stopped(
    spark: Any, tmp_path: Path, mode: str
) -> None:
    # perShard: the batches are cluster-time windows the driver plans from the shards'
    # positions; the tasks read their shard's window.
    import threading
    import time

    from bson.timestamp import Timestamp

    from shardstream.emulator import EmulatedCluster
    from shardstream.resume_token.token_json import loads
    from tests import factories as make

    t = [Timestamp(1700000000, i) for i in range(10)]
    oplogs = {
        "shard00": [
            make.noop(t[1]),
            make.insert(t[2], {"_id": 1}),
            make.update(t[5], 1, {"u": {"a": 2}}),
        ],
        "shard01": [make.noop(t[1]), make.insert(t[3], {"_id": 2}), make.delete(t[4], 2)],
    }
    root = tmp_path / "live"
    with EmulatedCluster(shards=2) as cluster:
        for name, entries in oplogs.items():
            for entry in entries:
                cluster.shard(name).append(entry)
            cluster.shard(name).set_majority(t[8])
        options = {
            "uri": cluster.uri,
            "startAtOperationTime": "1700000000,1",
            "partitionMode": mode,
        }
        settings = IngestSettings(
            table=root, source_options=options, bounded=False, trigger_interval="0 seconds"
        )
        progress = IngestProgress(io.StringIO(), interactive=False)
        runner = threading.Thread(target=run_ingest, args=(spark, settings, progress))
        runner.start()
        deadline = time.monotonic() + 60
        while progress.totals.events < 4 and time.monotonic() < deadline and runner.is_alive():
            time.sleep(0.2)
        for query in spark.streams.active:  # the live query runs until stopped
            query.stop()
        runner.join(timeout=60)
    assert not runner.is_alive()
    changelog = read_table(root, "changelog").sort_by("_id")  # files come in any order
    assert changelog["operationType"].to_pylist() == ["insert", "insert", "delete", "update"]
    mirror = read_table(root, "mirror")
    assert [loads(doc) for doc in mirror["fullDocument"].to_pylist()] == [{"_id": 1, "a": 2}]
