"""Ingest: the ``shardstream`` source into the lakehouse tables, one query.

``spark.readStream.format("shardstream")`` → ``foreachBatch`` → :class:`LakehouseSink`
(``<table>/changelog`` and ``<table>/mirror``), checkpointed in ``<table>/_checkpoint``
unless told otherwise.  Bounded inputs (oplog files, a simulated cluster) run with
``availableNow`` and end; a live cluster runs until interrupted.

Restart rules:

* checkpoint present: Spark resumes from its offsets and replays an unfinished batch with
  the same id; the tables skip what they already committed;
* checkpoint absent (new, or lost) but the tables hold batches: the stream starts at the
  cluster time of the lower of the two tables' watermarks, and each table drops the events
  at or below its own watermark, so nothing is lost or written twice.

With ``snapshot`` (``--snapshot``), the source's documents as of T0 are loaded first
(:mod:`shardstream.spark.ingest.snapshot`); the tables' watermarks are then the token at
T0, so the rules above start the stream there.  A snapshot a killed run left half loaded
is completed before any stream starts, with or without ``snapshot``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from shardstream.errors import ConfigurationError
from shardstream.oplog.redaction import redacted_repr
from shardstream.spark.delta.changelog.task_files import create_changelog
from shardstream.spark.delta.commits import watermark_cluster_time
from shardstream.spark.delta.maintenance import TableMaintenance
from shardstream.spark.delta.mirror.bucketed.bucket_table import (
    create_bucketed_mirror,
    is_bucketed,
)
from shardstream.spark.delta.mirror.table import MIRROR_TABLE
from shardstream.spark.delta.sink import (
    BatchOutcome,
    CrashPoint,
    LakehouseSink,
    check_layout,
    resume_watermark,
)
from shardstream.spark.delta.snapshot.tables import complete_mirror, snapshot_in_changelog
from shardstream.spark.delta.snapshot.typed import complete_collections
from shardstream.spark.delta.typed.paths import STATE_TABLE
from shardstream.spark.ingest import (
    DEFAULT_BUCKETS,
    DEFAULT_MAX_COLUMNS,
    DEFAULT_MIRROR_WORKERS,
    DEFAULT_OPTIMIZE_EVERY,
    MirrorLayout,
)
from shardstream.spark.ingest.progress import IngestProgress, IngestTotals
from shardstream.spark.ingest.snapshot import (
    check_snapshot_options,
    load_snapshot,
)
from shardstream.spark.ingest.task_batches import CollectionTables, TaskWrittenBatches
from shardstream.spark.source.options import START_OPTION_FLAGS, parse_options
from shardstream.spark.source.shard_inputs import newest_time

CHECKPOINT_DIR: Final = "_checkpoint"
APP_PREFIX: Final = "shardstream"
# The mirror needs canonical Extended JSON: relaxed JSON loses BSON types.
_FIXED_OPTIONS: Final = {"jsonFormat": "canonical"}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class IngestSettings:
    """One ingest run.

    Attributes:
        table: the lakehouse root (``changelog`` and ``mirror`` tables live under it).
        source_options: options of the ``shardstream`` data source (uri / oplog /
            simulate, scope, start, maxEventsPerTrigger, partitionMode ...).
        bounded: the input ends by itself (files, simulated): run ``availableNow``.
        checkpoint: Spark's checkpoint directory (default ``<table>/_checkpoint``).
        trigger_interval: a live run's micro-batch interval.
        strict: the mirror refuses updates of documents it never held.
        optimize_every: compact and checkpoint both tables every this many batches (0: never).
        mirror_workers: processes preparing a large batch's mirror, a part of its documents
            each (0 or 1: the driver alone). Workers are spawned: a driver script must keep
            its work under ``if __name__ == "__main__":``.
        snapshot: load the live source's documents as of T0 into both tables first (once),
            then stream from T0; needs a ``uri`` and no start option.
        crash_at_for_test: SIGKILL the process at this point of this batch (kill tests).
        mirror_layout: typed per-collection tables (and histories), or one mirror table.
        history: the per-collection layout keeps each collection's SCD2 history.
        max_columns: the most field columns a collection table gets.
        mirror: keep the mirror (and the collections' tables); without it the change log
            alone is written, by Spark's tasks, the driver committing each batch's files.
        mirror_buckets: the bucket count of the bucketed layout's mirror, or of the
            per-collection layout's document state when Spark's tasks write it, when the
            ingest creates the table (an existing table keeps its own).

    Raises:
        ConfigurationError: ``snapshot`` with anything but a live cluster, or with a start;
            ``snapshot`` or ``mirror_workers`` with the bucketed layout.
    """

    table: Path
    source_options: Mapping[str, str]
    bounded: bool
    checkpoint: Path | None = None
    trigger_interval: str = "1 second"
    strict: bool = True
    optimize_every: int = DEFAULT_OPTIMIZE_EVERY
    mirror_workers: int = DEFAULT_MIRROR_WORKERS
    snapshot: bool = False
    crash_at_for_test: tuple[CrashPoint, int] | None = None
    mirror_layout: MirrorLayout = MirrorLayout.COLLECTIONS
    history: bool = True
    max_columns: int = DEFAULT_MAX_COLUMNS
    mirror: bool = True
    mirror_buckets: int = DEFAULT_BUCKETS

    def __post_init__(self) -> None:
        if self.snapshot and not self.mirror:
            raise ConfigurationError("expected --snapshot with a mirror, got --no-mirror")
        if self.mirror_layout is MirrorLayout.BUCKETED and (
            self.snapshot or self.mirror_workers > 1
        ):
            raise ConfigurationError(
                "expected neither --snapshot nor --mirror-workers with --mirror-layout bucketed "
                "(Spark's tasks apply its events; a snapshot's documents are not yet loaded "
                "by them)"
            )
        if self.snapshot:
            check_snapshot_options(self.source_options)

    def __repr__(self) -> str:
        # source_options holds the live source's uri: the generated repr would print it.
        return redacted_repr(self)

    @property
    def checkpoint_path(self) -> Path:
        """Where Spark keeps the query's offsets and commits."""
        return self.checkpoint or self.table / CHECKPOINT_DIR


def tables_written_by_tasks(settings: IngestSettings) -> bool:
    """Whether Spark's tasks write the tables under ``settings.table`` (the driver
    commits): without a mirror, with the bucketed one, and with the per-collection tables,
    unless their lakehouse keeps an unpartitioned state (written by the driver: after a
    snapshot, with ``mirror_workers``, or by an earlier shardstream) or is about to (a new
    one with ``snapshot`` or ``mirror_workers``, or a snapshot half loaded).

    Raises:
        ConfigurationError: ``snapshot`` or ``mirror_workers`` for a lakehouse whose
            state the tasks write (the driver's sink cannot write it).
    """
    if not settings.mirror or settings.mirror_layout is MirrorLayout.BUCKETED:
        return True
    if settings.mirror_layout is not MirrorLayout.COLLECTIONS:
        return False
    state = settings.table / STATE_TABLE
    if (state / "_delta_log").is_dir():
        if not is_bucketed(state):
            return False
        if settings.snapshot or settings.mirror_workers > 1:
            raise ConfigurationError(
                f"expected neither --snapshot nor --mirror-workers for {settings.table}, "
                "whose document state Spark's tasks write (partitioned by bucket), got "
                f"snapshot={settings.snapshot}, mirror_workers={settings.mirror_workers}"
            )
        return True
    if settings.snapshot or settings.mirror_workers > 1:
        return False
    # A snapshot half loaded (the change log holds it): the driver completes it.
    return snapshot_in_changelog(settings.table) is None


def stream_source_options(settings: IngestSettings) -> tuple[dict[str, str], str | None]:
    """The source options to start with, and the table watermark they restart from.

    When the checkpoint holds no offsets but the tables hold batches, the user's start
    option is replaced by the cluster time of the lower table watermark: at that time,
    events up to the watermark come again and each table drops what it holds.
    """
    options = {**settings.source_options, **_FIXED_OPTIONS}
    if _has_offsets(settings.checkpoint_path):
        return options, None
    watermark = resume_watermark(settings.table, mirror=settings.mirror)
    if watermark is None:
        return options, None
    time = watermark_cluster_time(watermark)
    # The user's start gives way to the table's own watermark.
    options = {k: v for k, v in options.items() if k.lower() not in START_OPTION_FLAGS}
    options["startAtOperationTime"] = f"{time.time},{time.inc}"
    return options, watermark


def run_ingest(spark: Any, settings: IngestSettings, progress: IngestProgress) -> IngestTotals:
    """Run the ingest query to its end (bounded) or until interrupted (live).

    Args:
        spark: a SparkSession.
        settings: what to read and where to write.
        progress: receives every batch's outcome.

    Returns:
        The totals of this run (replayed batches included).

    Raises:
        ShardstreamError: a batch the sink refused, as the sink raised it.
        Exception: Spark's own error (e.g. StreamingQueryException) for a failure in the
            source; its message quotes the Python error (see the CLI's summary of it).
    """
    from shardstream.spark import register

    register(spark)
    tasks_write = tables_written_by_tasks(settings)  # before the run creates its tables
    if settings.mirror:
        _complete_tables(settings, progress, tasks_write=tasks_write)
    options, restart = stream_source_options(settings)
    if restart is not None:
        # A checkpoint without offsets holds no progress, but its metadata would give the
        # new query the old query id, hence the old app id, whose batch ids the tables hold
        # already: batches 0, 1, ... would be skipped as replays. A new id is a new app.
        # Its checksum goes too: Spark will not write a metadata file over an old .crc.
        for name in ("metadata", ".metadata.crc"):
            (settings.checkpoint_path / name).unlink(missing_ok=True)
        progress.out.write(_restart_line(settings, restart))
    progress.bounded = settings.bounded
    if settings.bounded:  # lags against the data's own clock, not today's
        progress.source_time = newest_time(parse_options(options))
    batches: _BatchWriter | TaskWrittenBatches = _BatchWriter(settings, progress)
    if tasks_write:
        batches = _task_written_batches(settings, progress)
    events = spark.readStream.format("shardstream").options(**options).load()
    writer = events.writeStream.foreachBatch(batches).option(
        "checkpointLocation", str(settings.checkpoint_path)
    )
    if settings.bounded:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=settings.trigger_interval)
    query = writer.start()
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    except Exception:
        batches.raise_failure()
        raise
    finally:
        batches.close()
        progress.finish()
    batches.raise_failure()
    return progress.totals


def _complete_tables(
    settings: IngestSettings, progress: IngestProgress, *, tasks_write: bool
) -> None:
    """The mirror's start: its layout checked, a snapshot loaded (or a half-loaded one
    completed), and the collections' tables made from it."""
    check_layout(settings.table, settings.mirror_layout)
    if tasks_write:
        return  # no snapshot to load or complete (none is loaded into a bucketed table)
    collections = settings.mirror_layout is MirrorLayout.COLLECTIONS
    state = STATE_TABLE if collections else MIRROR_TABLE
    if settings.snapshot:
        progress.totals.snapshot_documents = (
            load_snapshot(settings.table, settings.source_options, progress.out, table=state) or 0
        )
    else:
        complete_mirror(settings.table, state)
    if collections:
        complete_collections(
            settings.table,
            history=settings.history,
            max_columns=settings.max_columns,
            buckets=settings.mirror_buckets,
        )


def _task_written_batches(settings: IngestSettings, progress: IngestProgress) -> TaskWrittenBatches:
    """The ``foreachBatch`` of an ingest whose tables Spark's tasks write, its tables made."""
    create_changelog(settings.table)
    buckets = collections = None
    if settings.mirror:
        documents = MIRROR_TABLE
        if settings.mirror_layout is MirrorLayout.COLLECTIONS:
            documents = STATE_TABLE
            collections = CollectionTables(settings.history, settings.max_columns)
        buckets = create_bucketed_mirror(settings.table / documents, settings.mirror_buckets)
    return TaskWrittenBatches(
        settings.table,
        lambda: _checkpoint_app_id(settings.checkpoint_path),
        progress,
        TableMaintenance(settings.optimize_every),
        buckets=buckets,
        collections=collections,
        strict=settings.strict,
        crash_at_for_test=_writer_crash(settings.crash_at_for_test, settings.mirror),
    )


# Where the kill tests' points fall when the tasks write: in a task (nothing committed),
# in a collection task after its tables' commits, in this process's commits (without a
# mirror: the tasks' files written, none committed; with a bucketed table: the change log
# committed, the documents not), in this process after them.
_WRITER_CRASHES: Final = {
    CrashPoint.IN_BATCH: "task",
    CrashPoint.IN_COLLECTIONS: "collections",
    CrashPoint.BETWEEN_COMMITS: "commit",
    CrashPoint.AFTER_COMMITS: "driver",
}


def _writer_crash(crash: tuple[CrashPoint, int] | None, mirror: bool) -> tuple[str, int] | None:
    if crash is None:
        return None
    point = _WRITER_CRASHES.get(crash[0])
    if point is None:
        raise ConfigurationError(f"expected a crash point of the tasks' writes, got {crash[0]}")
    if point == "commit" and mirror:
        point = "between"
    return point, crash[1]


class _BatchWriter:
    """The ``foreachBatch`` function: Spark DataFrame → Arrow → :class:`LakehouseSink`.

    The sink is built at the first batch, when the checkpoint's query id (the app id)
    exists.  A sink error is kept so the caller re-raises it as itself rather than as
    Spark's wrapped StreamingQueryException.
    """

    def __init__(self, settings: IngestSettings, progress: IngestProgress) -> None:
        self.settings = settings
        self.progress = progress
        self.sink: LakehouseSink | None = None
        self.failure: BaseException | None = None

    def __call__(self, frame: Any, batch_id: int) -> None:
        try:
            if self.sink is None:
                self.sink = LakehouseSink(
                    self.settings.table,
                    _checkpoint_app_id(self.settings.checkpoint_path),
                    strict=self.settings.strict,
                    optimize_every=self.settings.optimize_every,
                    mirror_workers=self.settings.mirror_workers,
                    crash_at_for_test=self.settings.crash_at_for_test,
                    layout=self.settings.mirror_layout,
                    history=self.settings.history,
                    max_columns=self.settings.max_columns,
                    buckets=self.settings.mirror_buckets,
                )
            outcome: BatchOutcome = self.sink.write_batch(frame.toArrow(), batch_id)
        except Exception as exc:
            self.failure = exc
            raise
        self.progress.batch(outcome)

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure


def _checkpoint_app_id(checkpoint: Path) -> str:
    """``shardstream:<query id>`` from a started query's checkpoint metadata.

    A deleted or new checkpoint gets a new query id, hence a new app: its batch ids
    restart at 0 and must never be compared with the old app's.
    """
    metadata = checkpoint / "metadata"
    try:
        query_id = json.loads(metadata.read_text())["id"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(
            f"expected Spark checkpoint metadata with a query id at {metadata}, got none ({exc})"
        ) from exc
    return f"{APP_PREFIX}:{query_id}"


def _restart_line(settings: IngestSettings, restart: str) -> str:
    time = watermark_cluster_time(restart)
    snapshot = snapshot_in_changelog(settings.table)
    if snapshot is not None and snapshot[0] == time:
        return f"ingest: the stream starts at the snapshot's time {time.time},{time.inc}\n"
    return (
        f"ingest: no checkpoint offsets in {settings.checkpoint_path}; restarting after "
        f"the tables' lower watermark {restart}\n"
    )


def _has_offsets(checkpoint: Path) -> bool:
    offsets = checkpoint / "offsets"
    return offsets.is_dir() and any(offsets.iterdir())
