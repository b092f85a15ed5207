"""The ``shardstream`` Spark data source (streaming and batch reads).

``spark.readStream.format("shardstream")`` reads the merged change stream in
micro-batches cut at resume tokens; ``spark.read.format("shardstream")`` reads a bounded
range once (a backfill from oplog dumps).  Options: :mod:`shardstream.spark.source.options`.

Process model (PySpark 4.3): the driver's source runner keeps one stream reader for the
query's life, and calls ``initialOffset``, ``latestOffset``, ``partitions`` and ``commit``
on it; it holds the :class:`BatchPlanner` (an open merged stream).  ``read`` runs on a
copy of a reader *as constructed*, on the executors: everything it needs travels in the
spec and the partition.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from shardstream.errors import MergeError
from shardstream.spark.source.batch_planner import BatchPlanner
from shardstream.spark.source.live_window_planner import LiveWindowPlanner
from shardstream.spark.source.offsets import StreamOffset
from shardstream.spark.source.options import PartitionMode, SourceKind, SourceSpec, parse_options
from shardstream.spark.source.partitions import (
    plan_partitions,
    plan_window_partitions,
    read_partition,
)
from shardstream.spark.source.rows import SPARK_DDL
from shardstream.spark.source.shard_inputs import ReadBound, initial_offset, read_bound
from shardstream.spark.source.window_planner import plan_window, windows_apply

FORMAT_NAME = "shardstream"
REDACTION_CONF = "spark.sql.redaction.options.regex"
URI_REDACTION = "(?i)^uri$"
# A live query whose stream has been quiet this long (cluster time) moves its watermark on.
IDLE_WATERMARK_S = 60


class ShardstreamDataSource(DataSource):
    """The ``shardstream`` format: a sharded cluster's merged change stream as rows."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        # Checked here, when the query is defined, so bad options fail before it starts.
        parse_options(self.options)
        return SPARK_DDL

    # Spark passes the schema it got from schema(); the rows always have that one.
    def streamReader(self, schema: StructType) -> ShardstreamStreamReader:  # noqa: ARG002
        return ShardstreamStreamReader(parse_options(self.options))

    def reader(self, schema: StructType) -> ShardstreamBatchReader:  # noqa: ARG002
        return ShardstreamBatchReader(parse_options(self.options))


def batch_limits(spec: SourceSpec, limit: ReadLimit) -> tuple[int | None, int | None]:
    """(events, bytes) one batch may hold under ``limit`` (None: no limit).

    Spark may pass ReadAllAvailable whatever the default limit is (``Trigger.Once``); it
    must win, byte cap and all.  Under either limit of the source's own, both of its caps
    apply.
    """
    if isinstance(limit, (ReadMaxRows, ReadMaxBytes)):
        events = limit.max_rows if isinstance(limit, ReadMaxRows) else spec.max_events_per_trigger
        size = limit.max_bytes if isinstance(limit, ReadMaxBytes) else spec.max_bytes_per_trigger
        return events, size
    return None, None


class ShardstreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches whose offsets are resume tokens (see :mod:`shardstream.spark.source.offsets`).

    Args:
        spec: the parsed options.
    """

    def __init__(self, spec: SourceSpec) -> None:
        self._spec = spec
        self._planner: BatchPlanner | None = None  # opened on the driver, on first use
        self._live_windows: LiveWindowPlanner | None = None  # likewise
        self._available_now = False
        self._target: ReadBound | None = None
        # Per-shard task boundaries found while planning, by (start, end) offset text.
        self._splits: dict[tuple[str, str], Mapping[str, tuple[str, ...]]] = {}

    def initialOffset(self) -> dict[str, Any]:
        return initial_offset(self._spec).to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        # One limit only (a Python source gets no composite one): the events limit, with
        # the byte cap applied beside it by batch_limits.
        spec = self._spec
        if spec.max_events_per_trigger is not None:
            return ReadMaxRows(spec.max_events_per_trigger)
        if spec.max_bytes_per_trigger is not None:
            return ReadMaxBytes(spec.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # Pin "now": later writes to a live cluster are not part of this run.  Files and
        # a simulated run are fixed, so their target is simply their end.
        self._available_now = True
        self._target = read_bound(self._spec, pin_now=True)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = StreamOffset.from_json(start)
        max_events, max_bytes = batch_limits(self._spec, limit)
        bound = self._target if self._available_now else read_bound(self._spec, pin_now=False)
        if windows_apply(self._spec):
            if self._spec.kind is not SourceKind.LIVE:
                return plan_window(
                    self._spec, begin, max_events, bound, max_bytes=max_bytes
                ).to_json()
            window = self._live_windows_().plan(
                begin,
                max_events=max_events,
                max_bytes=max_bytes,
                bound=bound,
                wait_for_bound=self._available_now,
                advance_idle_after=None if self._available_now else IDLE_WATERMARK_S,
            )
            if window is not None:  # None: the shards changed, which only the merge follows
                return window.to_json()
        plan = self._planner_().plan(
            begin,
            max_events=max_events,
            max_bytes=max_bytes,
            bound=bound,
            wait_for_bound=self._available_now and not self._spec.bounded,
            # availableNow stops at its target; only an open-ended query moves past quiet times.
            advance_idle_after=None if self._available_now else IDLE_WATERMARK_S,
        )
        if plan.events:
            self._splits[_key(begin, plan.end)] = plan.splits
        return plan.end.to_json()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, finish = StreamOffset.from_json(start), StreamOffset.from_json(end)
        if finish.window:  # whatever the mode now: the offset says how the batch was cut
            if finish.watermark == begin.watermark:
                return []
            return plan_window_partitions(begin, finish)
        splits = self._splits.get(_key(begin, finish))
        # Only per-shard tasks need the boundaries; merged mode has one task whatever they are.
        per_shard = self._spec.partition_mode is PartitionMode.PER_SHARD
        if splits is None and per_shard and finish.shards_advanced_from(begin):
            # After a restart. Files and simulations plan again exactly; a live stream just
            # reopened may have nothing ready yet, so it gets one task per shard: the same
            # events, with less parallelism, and never a batch that cannot be planned.
            live = self._spec.kind is SourceKind.LIVE
            splits = {} if live else self._replan(begin, finish)
        return plan_partitions(self._spec, begin, finish, splits or {})

    def _replan(self, begin: StreamOffset, finish: StreamOffset) -> Mapping[str, tuple[str, ...]]:
        """Find the task boundaries of a batch planned before a restart (Spark replays it)."""
        plan = self._planner_().plan(begin, max_events=None, until=finish.watermark)
        if plan.end != finish:
            raise MergeError(
                f"{self._spec.display}: the batch ending at {finish.watermark} cannot be "
                f"planned again: the stream now gives {plan.end.to_json()!r} for it"
            )
        return plan.splits

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self._spec, partition)

    def commit(self, end: dict[str, Any]) -> None:
        # Boundaries of committed batches are no longer needed; keep the ones ahead.
        done = json.dumps(StreamOffset.from_json(end).to_json())
        self._splits = {key: value for key, value in self._splits.items() if key[0] == done}

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None
        if self._live_windows is not None:
            self._live_windows.close()
            self._live_windows = None

    def _live_windows_(self) -> LiveWindowPlanner:
        if self._live_windows is None:
            self._live_windows = LiveWindowPlanner(self._spec)
        return self._live_windows

    def _planner_(self) -> BatchPlanner:
        if self._planner is None:
            self._planner = BatchPlanner(self._spec, split_every=self._spec.events_per_partition)
        return self._planner


class ShardstreamBatchReader(DataSourceReader):
    """One bounded read: from the configured start to the end of the data.

    The end is the oplog files' or the simulated run's end, ``endAtOperationTime``
    (exclusive), or, for a live cluster, its time when the read is planned.
    """

    def __init__(self, spec: SourceSpec) -> None:
        self._spec = spec

    def partitions(self) -> list[InputPartition]:
        spec = self._spec
        start = initial_offset(spec)
        # One window, from the start to the end of the data.  A live cluster's bounded read
        # keeps the merge: its window would wait for every shard to pass "now".
        if windows_apply(spec) and spec.kind is not SourceKind.LIVE:
            end = plan_window(spec, start, None, read_bound(spec, pin_now=True))
            return plan_window_partitions(start, end) if end.window else []
        # A local planner: this reader is pickled to the executors after this call.
        planner = BatchPlanner(spec, split_every=spec.events_per_partition)
        try:
            plan = planner.plan(
                start,
                max_events=None,
                bound=read_bound(spec, pin_now=True),
                wait_for_bound=not spec.bounded,
            )
        finally:
            planner.close()
        return plan_partitions(spec, start, plan.end, plan.splits)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self._spec, partition)


def register(spark: SparkSession) -> None:
    """Make ``spark.readStream.format("shardstream")`` and ``spark.read.format(...)`` work.

    Also hides the ``uri`` option's value wherever Spark shows a source's options (query
    plans, ``explain()``, the UI): Spark redacts the values of options whose key or value
    matches ``spark.sql.redaction.options.regex``, by default only ``(?i)url``, and a
    mongos URI may carry a password.
    """
    spark.dataSource.register(ShardstreamDataSource)
    current = spark.conf.get(REDACTION_CONF) or ""
    if URI_REDACTION not in current:
        spark.conf.set(REDACTION_CONF, f"{current}|{URI_REDACTION}" if current else URI_REDACTION)


def _key(start: StreamOffset, end: StreamOffset) -> tuple[str, str]:
    return json.dumps(start.to_json()), json.dumps(end.to_json())
