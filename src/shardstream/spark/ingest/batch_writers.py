"""The ingest's ``foreachBatch``: who writes a micro-batch's tables.

:class:`DriverBatches` hands each batch to :class:`~shardstream.spark.delta.sink.
LakehouseSink` in the driver (the one-table layouts, and a lakehouse whose document state
the driver writes: after a snapshot, or with mirror workers); :func:`task_written_batches`
builds :class:`~shardstream.spark.ingest.task_batches.TaskWrittenBatches`, whose Spark tasks
write the tables and whose driver only commits (the default).  ``query.run_ingest`` chooses.
"""

from __future__ import annotations

from typing import Any, Final

from shardstream.errors import ConfigurationError
from shardstream.spark.delta.changelog.task_files import create_changelog
from shardstream.spark.delta.maintenance import TableMaintenance
from shardstream.spark.delta.mirror.bucketed.bucket_table import create_bucketed_mirror
from shardstream.spark.delta.mirror.table import MIRROR_TABLE
from shardstream.spark.delta.sink import BatchOutcome, CrashPoint, LakehouseSink
from shardstream.spark.delta.typed.paths import STATE_TABLE
from shardstream.spark.ingest import MirrorLayout
from shardstream.spark.ingest.progress import IngestProgress
from shardstream.spark.ingest.settings import IngestSettings, checkpoint_app_id
from shardstream.spark.ingest.task_batches import CollectionTables, TaskWrittenBatches


def task_written_batches(settings: IngestSettings, progress: IngestProgress) -> TaskWrittenBatches:
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
        lambda: checkpoint_app_id(settings.checkpoint_path),
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


class DriverBatches:
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
                    checkpoint_app_id(self.settings.checkpoint_path),
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
