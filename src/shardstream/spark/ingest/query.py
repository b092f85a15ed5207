"""Ingest: the ``shardstream`` source into the lakehouse tables, one query.

``spark.readStream.format("shardstream")`` → ``foreachBatch`` (``batch_writers``: Spark's
tasks write the tables and the driver commits, or the driver's :class:`LakehouseSink` writes
them) → the change log and the mirror's tables under ``<table>``, checkpointed in
``<table>/_checkpoint`` unless told otherwise (``settings``).  Bounded inputs (oplog
files, a simulated cluster) run with ``availableNow`` and end; a live cluster runs until
interrupted.

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

from pathlib import Path
from typing import Any, Final

from shardstream.errors import ConfigurationError
from shardstream.spark.delta.commits import watermark_cluster_time
from shardstream.spark.delta.mirror.bucketed.bucket_table import is_bucketed
from shardstream.spark.delta.mirror.table import MIRROR_TABLE
from shardstream.spark.delta.sink import check_layout, resume_watermark
from shardstream.spark.delta.snapshot.tables import complete_mirror, snapshot_in_changelog
from shardstream.spark.delta.snapshot.typed import complete_collections
from shardstream.spark.delta.typed.paths import STATE_TABLE
from shardstream.spark.ingest import MirrorLayout
from shardstream.spark.ingest.batch_writers import DriverBatches, task_written_batches
from shardstream.spark.ingest.progress import IngestProgress, IngestTotals
from shardstream.spark.ingest.settings import IngestSettings
from shardstream.spark.ingest.snapshot import load_snapshot
from shardstream.spark.ingest.task_batches import TaskWrittenBatches
from shardstream.spark.source.options import START_OPTION_FLAGS, parse_options
from shardstream.spark.source.shard_inputs import newest_time

# The mirror needs canonical Extended JSON: relaxed JSON loses BSON types.
_FIXED_OPTIONS: Final = {"jsonFormat": "canonical"}


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
    batches: DriverBatches | TaskWrittenBatches = DriverBatches(settings, progress)
    if tasks_write:
        batches = task_written_batches(settings, progress)
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
