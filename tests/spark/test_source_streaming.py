"""The shardstream source through Spark: availableNow with a read limit, restart, modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shardstream.merger import MergedStream
from shardstream.sim import simulated_sources
from shardstream.spark.shard_inputs import simulated_run
from shardstream.spark.source_options import parse_options
from shardstream.transform import ChangeStreamOptions

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


def _cluster_time_at(index: int) -> str:
    """The cluster time of the reference stream's event at ``index``, as T,I."""
    spec = parse_options(SIMULATION)
    assert spec.simulation is not None
    stream = MergedStream(
        simulated_sources(simulated_run(spec.simulation), seed=0), ChangeStreamOptions()
    )
    events = []
    while len(events) <= index:
        events += stream.next_batch(1000)[0]
    time = events[index].document["clusterTime"]
    return f"{time.time},{time.inc}"


def test_a_restarted_query_goes_on_from_its_checkpoint_without_loss_or_duplicates(
    spark: Any, tmp_path: Path
) -> None:
    import shardstream.spark

    shardstream.spark.register(spark)
    expected = _reference_ids(SIMULATION)
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "events"

    def run(extra: dict[str, str]) -> list[int]:
        query = (
            spark.readStream.format("shardstream")
            .options(**SIMULATION, maxEventsPerTrigger="200", **extra)
            .load()
            .writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination()
        finally:
            query.stop()
        return [progress["numInputRows"] for progress in query.recentProgress]

    # The first run stops half way (as if the cluster had written no more yet); the second,
    # a new query on the same checkpoint, goes on from the last committed offset.
    first = run({"endAtOperationTime": _cluster_time_at(len(expected) // 2)})
    second = run({})
    assert 0 < sum(first) < len(expected)
    assert sum(first) + sum(second) == len(expected)
    ids = [row["_id"] for row in spark.read.parquet(str(output)).select("_id").collect()]
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
