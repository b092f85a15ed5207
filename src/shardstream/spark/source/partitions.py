"""A planned batch as Spark tasks, and what each task yields (Arrow batches).

Partitions are pickled from the driver to the executors, so they carry plain values
only: the offsets (merged mode) or one shard's token range (per-shard mode).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Final

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from shardstream.merger.raw.shard_reader import EncodedRun
from shardstream.spark.source.event_batches import EventBatcher
from shardstream.spark.source.offsets import StreamOffset
from shardstream.spark.source.options import PartitionMode, SourceSpec
from shardstream.spark.source.range_reader import (
    read_merged_range,
    read_shard_range,
    read_shard_window,
)
from shardstream.transform import ChangeEvent

ROWS_PER_ARROW_BATCH: Final = 10_000
# Large documents fill a batch long before its rows do: a string column holds 2 GiB at most,
# and each batch is one allocation of the JVM's direct memory (1 GiB by default; a task that
# read 1,500 documents of 400 KB into one batch died there), so batches are cut by size too.
BYTES_PER_ARROW_BATCH: Final = 64 << 20


@dataclasses.dataclass(frozen=True)
class MergedRange(InputPartition):
    """One task reading the whole batch through the real merge: events in ``(start, end]``."""

    start: StreamOffset
    end: StreamOffset


@dataclasses.dataclass(frozen=True)
class ShardRange(InputPartition):
    """One task reading one shard's events in ``(after, last]`` (tokens; "" = the start)."""

    shard: str
    after: str
    last: str


@dataclasses.dataclass(frozen=True)
class ShardWindow(InputPartition):
    """One task reading one shard's events above token ``after`` and below ``end`` (the
    high-water-mark token of a cluster-time window's end)."""

    shard: str
    after: str
    end: str


def plan_window_partitions(start: StreamOffset, end: StreamOffset) -> list[InputPartition]:
    """The tasks of the window ``(start, end)``: one per shard (the offset's shards, which
    the planner checked are the input's)."""
    return [ShardWindow(name, start.watermark, end.watermark) for name in sorted(end.shards)]


def plan_partitions(
    spec: SourceSpec,
    start: StreamOffset,
    end: StreamOffset,
    splits: Mapping[str, Iterable[str]],
) -> list[InputPartition]:
    """The tasks of the batch ``(start, end]``: none when it holds no event.

    Args:
        spec: the source (its partition mode).
        start / end: the batch's offsets.
        splits: per-shard mode: per shard, tokens after which a new task starts.
    """
    advanced = end.shards_advanced_from(start)
    if not advanced:
        return []
    if spec.partition_mode is PartitionMode.MERGED:
        return [MergedRange(start, end)]
    partitions: list[InputPartition] = []
    for shard in sorted(advanced):
        bounds = [start.watermark, *splits.get(shard, ()), advanced[shard]]
        for after, last in itertools.pairwise(bounds):
            partitions.append(ShardRange(shard, after, last))
    return partitions


def read_partition(spec: SourceSpec, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Read one task's events as Arrow record batches of the event schema."""
    events: Iterable[ChangeEvent | EncodedRun]
    if isinstance(partition, MergedRange):
        events = read_merged_range(spec, partition.start, partition.end)
    elif isinstance(partition, ShardRange):
        events = read_shard_range(spec, partition.shard, partition.after, partition.last)
    elif isinstance(partition, ShardWindow):
        events = read_shard_window(spec, partition.shard, partition.after, partition.end)
    else:
        return  # Spark's placeholder for a batch read with no partitions
    yield from arrow_batches(events, relaxed=spec.relaxed_json)


def arrow_batches(
    events: Iterable[ChangeEvent | EncodedRun], *, relaxed: bool
) -> Iterator[pa.RecordBatch]:
    """``events`` (runs among them: their events in order) as record batches of at most
    :data:`ROWS_PER_ARROW_BATCH` rows and about :data:`BYTES_PER_ARROW_BATCH` bytes of
    events (a fast-path event's BSON, whose text is about as long; a dict event's row text)."""
    batcher = EventBatcher(relaxed=relaxed)
    limits = (ROWS_PER_ARROW_BATCH, BYTES_PER_ARROW_BATCH)
    for event in events:
        if isinstance(event, EncodedRun):
            start = 0
            while start < len(event.keys):
                start = batcher.add_run(event, start, *limits)
                if batcher.full(*limits):
                    yield batcher.flush()
            continue
        batcher.add(event)
        if batcher.full(*limits):
            yield batcher.flush()
    if len(batcher):
        yield batcher.flush()
