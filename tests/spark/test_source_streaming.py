"""The shardstream source through Spark: availableNow with a read limit, replay, modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bson
import pytest
from pyspark.errors import StreamingQueryException

from shardstream.merger import MergedStream
from shardstream.sim import simulated_sources
from shardstream.spark.source.options import parse_options
from shardstream.spark.source.simulated_input import simulated_run
from shardstream.transform import ChangeStreamOptions
from tests.oplog.live_helpers import load_committed

pytestmark = pytest.mark.spark

SIMULATION = {"simulate": "true", "shards": "3", "entries": "300", "seed": "11"}


def _reference_ids(options: dict[str, str]) -> list[str]:
    """The merged stream's tokens, read directly (no Spark, no batches)."""
    spec = parse_options(options)
    assert spec.simulation is not None
    stream = MergedStream(
        simulated_sources(simulated_run(spec.simulation), seed=0), ChangeStreamOptions()
    )
    ids: list[str] = []
    while not stream.exhausted:
        ids += [event.token.data for event in stream.next_batch(1000)[0]]
    return ids


def _run(spark: Any, options: dict[str, str], name: str, checkpoint: Path) -> list[int]:
    """Run one availableNow query into a memory sink; return rows per batch."""
    import shardstream.spark

    shardstream.spark.register(spark)
    query = (
        spark.readStream.format("shardstream")
        .options(**options)
        .load()
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        query.stop()
    return [progress["numInputRows"] for progress in query.recentProgress]


def test_available_now_cuts_batches_at_the_limit_and_keeps_stream_order(
    spark: Any, tmp_path: Path
) -> None:
    options = {**SIMULATION, "maxEventsPerTrigger": "150"}
    rows = _run(spark, options, "limited", tmp_path / "checkpoint")
    expected = _reference_ids(SIMULATION)
    assert len(expected) > 300  # several batches of 150
    assert [n for n in rows if n] == [
        min(150, len(expected) - i) for i in range(0, len(expected), 150)
    ]
    ids = [row["_id"] for row in spark.table("limited").select("_id").collect()]
    assert sorted(ids) == expected


def test_per_shard_and_merged_batch_reads_give_identical_rows(spark: Any) -> None:
    import shardstream.spark

    shardstream.spark.register(spark)
    options = {**SIMULATION, "showExpandedEvents": "true", "eventsPerPartition": "100"}
    merged = spark.read.format("shardstream").options(**options).load()
    per_shard = spark.read.format("shardstream").options(**options, partitionMode="perShard").load()
    assert merged.rdd.getNumPartitions() == 1
    assert per_shard.rdd.getNumPartitions() > 3  # shards split every 100 events
    merged_rows = merged.collect()
    assert [row["_id"] for row in merged_rows] == sorted(row["_id"] for row in merged_rows)
    assert sorted(per_shard.collect(), key=lambda row: row["_id"]) == merged_rows


def test_a_batch_that_failed_is_replayed_from_its_offsets_with_the_same_rows(
    spark: Any, tmp_path: Path
) -> None:
    import shardstream.spark

    shardstream.spark.register(spark)
    expected = _reference_ids(SIMULATION)
    seen: dict[int, list[str]] = {}
    crash_at = {"batch": 2}

    def sink(frame: Any, batch_id: int) -> None:
        ids = [row["_id"] for row in frame.select("_id").collect()]
        if batch_id == crash_at["batch"]:
            crash_at["batch"] = -1
            raise RuntimeError("injected failure after the batch's offsets were logged")
        seen[batch_id] = ids

    def run(mode: str, *, fails: bool) -> None:
        query = (
            spark.readStream.format("shardstream")
            .options(**SIMULATION, maxEventsPerTrigger="150", partitionMode=mode)
            .load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            if fails:
                with pytest.raises(StreamingQueryException, match="injected failure"):
                    query.awaitTermination()
            else:
                query.awaitTermination()
        finally:
            query.stop()

    run("merged", fails=True)
    assert sorted(seen) == [0, 1]  # batch 2's offsets are in the log, its commit is not
    # The restart (a new source runner, per-shard tasks planned afresh) replays batch 2 from
    # the logged offsets, then goes on.
    run("perShard", fails=False)
    assert min(set(seen) - {0, 1}) == 2
    ids = [token for batch in sorted(seen) for token in sorted(seen[batch])]
    assert ids == expected  # every event once, batches in stream order


def test_plans_never_show_the_password_of_a_uri(
    spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import shardstream.spark

    shardstream.spark.register(spark)
    shardstream.spark.register(spark)  # twice: the redaction pattern is added once
    frame = (
        spark.readStream.format("shardstream")
        .option("uri", "mongodb://alice:s3cret-pw@127.0.0.1:9/?authSource=admin")
        .load()
    )
    frame.explain(True)
    plans = capsys.readouterr().out
    assert "uri=" in plans
    assert "s3cret-pw" not in plans
    assert spark.conf.get("spark.sql.redaction.options.regex").count("^uri$") == 1


@pytest.mark.parametrize("mode", ["merged", "perShard"])
def test_a_live_cluster_through_spark(spark: Any, tmp_path: Path, mode: str) -> None:
    # perShard: cluster-time windows planned from the shards' positions (no driver merge).
    import shardstream.spark
    from shardstream.emulator import EmulatedCluster
    from tests.spark.test_stream_reader_live import OPLOGS

    shardstream.spark.register(spark)
    paths = []
    for name, entries in OPLOGS.items():
        path = tmp_path / f"{name}.bson"
        path.write_bytes(b"".join(bson.encode(entry) for entry in entries))
        paths.append(f"{name}={path}")
    start = {"startAtOperationTime": "1700000000,1"}
    files = spark.read.format("shardstream").options(oplog=",".join(paths), **start).load()
    expected = sorted(files.collect(), key=lambda row: row["_id"])
    with EmulatedCluster(shards=2) as cluster:
        load_committed(cluster, OPLOGS)
        rows = _run(
            spark,
            {"uri": cluster.uri, "maxEventsPerTrigger": "4", "partitionMode": mode, **start},
            f"live_{mode}",
            tmp_path / "ck",
        )
        live = sorted(spark.table(f"live_{mode}").collect(), key=lambda row: row["_id"])
    assert [n for n in rows if n] == [4, 2]
    assert live == expected
