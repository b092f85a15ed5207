"""The Spark data source ``shardstream_lakehouse``: a batch's tables written by its tasks.

``frame.write.format("shardstream_lakehouse").options(...).mode("append").save()``: each
task writes its events into one change-log Parquet file
(:func:`~shardstream.spark.delta.changelog.task_files.write_changelog_file`) and, with the
bucketed mirror, rewrites each of its buckets
(:func:`~shardstream.spark.delta.mirror.bucketed.bucket_writer.write_buckets`); the driver's
``commit`` adds the change log's files in one Delta commit, then the mirror's rewrites in
another, each with the batch's markers, in the in-driver sink's order (a crash between the
two leaves the mirror behind, and the replay completes it); ``abort`` deletes the files of a
job that failed.  :class:`TaskWrittenBatches` is the ingest's ``foreachBatch`` around it: it
shuffles the batch by bucket in Spark, and handles no row itself.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from shardstream.spark.delta.changelog.table import CHANGELOG_TABLE
from shardstream.spark.delta.changelog.task_files import (
    ChangelogFile,
    commit_changelog_files,
    committed_counts,
    write_changelog_file,
)
from shardstream.spark.delta.commits import (
    BatchCommit,
    OpenTables,
    already_committed,
    committed_watermark,
    open_table,
)
from shardstream.spark.delta.maintenance import Maintained, TableMaintenance
from shardstream.spark.delta.mirror.bucketed.bucket_commit import commit_buckets, committed_write
from shardstream.spark.delta.mirror.bucketed.bucket_writer import (
    EVENT_BUCKET,
    BucketWrite,
    write_buckets,
)
from shardstream.spark.delta.mirror.table import MIRROR_TABLE
from shardstream.spark.delta.sink import BatchOutcome
from shardstream.spark.ingest.progress import IngestProgress

FORMAT: Final = "shardstream_lakehouse"
# Test hook (kill tests): "<where>:<batch id>", where is "task" (a task dies after writing
# its files), "commit" (the commit's process dies before committing) or "between" (after
# the change log's commit, before the mirror's).
CRASH_OPTION: Final = "crashAtForTest"
# The column saying which copy of an event the change log takes: an event that names no
# document goes to every bucket, and only bucket 0's copy is logged.
LOGGED: Final = "_logged"


class LakehouseDataSource(DataSource):
    """The writer's data source (write only)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def writer(self, schema: Any, overwrite: bool) -> LakehouseWriter:  # noqa: ARG002
        return LakehouseWriter(self.options)


class _Written(WriterCommitMessage):
    """A task's commit message: what it wrote, and the newest event it was given."""

    def __init__(
        self, changelog: ChangelogFile | None, buckets: list[BucketWrite], last_event: str | None
    ) -> None:
        self.changelog = changelog
        self.buckets = buckets
        self.last_event = last_event


class LakehouseWriter(DataSourceArrowWriter):
    """Tasks write files; the driver commits them (see the module)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.root = Path(options["path"])
        self.app_id = options["appId"]
        self.batch_id = int(options["batchId"])
        self.log = options.get("log") == "true"
        self.changelog_watermark = options.get("changelogWatermark") or None
        self.mirror_version = int(options.get("mirrorVersion") or -1)  # -1: no mirror
        self.mirror_watermark = options.get("mirrorWatermark") or None
        self.strict = options.get("strict") != "false"
        self.crash_at = options.get(CRASH_OPTION, "")  # Spark's options ignore case

    def write(self, iterator: Iterator[Any]) -> _Written:
        batches = list(iterator)
        events = pa.Table.from_batches(batches) if batches else None
        if events is None or not events.num_rows:
            return _Written(None, [], None)
        logged = events.filter(events[LOGGED]) if LOGGED in events.column_names else events
        changelog = None
        if self.log:
            changelog = write_changelog_file(self.root, logged, self.changelog_watermark)
        buckets: list[BucketWrite] = []
        if self.mirror_version >= 0:
            buckets = write_buckets(
                self.root / MIRROR_TABLE,
                self.mirror_version,
                events,
                self.mirror_watermark,
                strict=self.strict,
            )
        self._maybe_crash("task")
        last = pc.max(logged["_id"]).as_py() if logged.num_rows else None
        return _Written(changelog, buckets, last)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._maybe_crash("commit")
        written = [message for message in messages if isinstance(message, _Written)]
        if self.log:
            files = [w.changelog for w in written if w.changelog is not None]
            commit_changelog_files(self.root, files, self.app_id, self.batch_id)
        self._maybe_crash("between")
        marks = [w.last_event for w in written if w.last_event is not None]
        if self.mirror_version >= 0 and marks:
            commit = BatchCommit(app_id=self.app_id, batch_id=self.batch_id, watermark=max(marks))
            writes = [write for w in written for write in w.buckets]
            commit_buckets(self.root / MIRROR_TABLE, self.mirror_version, writes, commit)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Spark aborts a job whose commit failed, and the commit may have failed after a
        # table committed the batch (the mirror's commit, after the change log's): that
        # table's files are its data now; only a table without the batch loses its files.
        batch = BatchCommit(app_id=self.app_id, batch_id=self.batch_id, watermark="")
        done = {
            name: already_committed(open_table(self.root / name), batch, name)
            for name in (CHANGELOG_TABLE, MIRROR_TABLE)
        }
        for message in messages:
            if not isinstance(message, _Written):
                continue
            log = message.changelog
            if log is not None and log.name is not None and not done[CHANGELOG_TABLE]:
                (self.root / CHANGELOG_TABLE / log.name).unlink(missing_ok=True)
            for write in message.buckets:
                if write.added is not None and not done[MIRROR_TABLE]:
                    (self.root / MIRROR_TABLE / write.added.path).unlink(missing_ok=True)

    def _maybe_crash(self, where: str) -> None:
        if self.crash_at == f"{where}:{self.batch_id}":
            os.kill(os.getpid(), signal.SIGKILL)


def register(spark: Any) -> None:
    """Register ``shardstream_lakehouse`` with ``spark`` (a SparkSession)."""
    spark.dataSource.register(LakehouseDataSource)


def by_bucket(frame: Any, buckets: int, tasks: int) -> Any:
    """``frame``'s events shuffled to their buckets, sorted by bucket and token in each of
    ``tasks`` tasks (a task takes several buckets when there are more buckets than tasks).

    An event's bucket is ``pmod(xxhash64(its documentKey's _id as JSON), buckets)``
    (bucket_table.py); an event without a documentKey (a drop, a rename, a DDL event) goes to
    every bucket, which each apply it to their own rows, and is logged once (bucket 0's).
    """
    document_key = functions.col("documentKey")
    # A null _id (a document may have one) or an unreadable documentKey hashes as null does:
    # still one bucket, where the mirror's code keys (or refuses) the event as in the driver.
    key = functions.get_json_object(document_key, "$._id")
    own = functions.pmod(functions.xxhash64(key), functions.lit(buckets)).cast("int")
    every = functions.sequence(functions.lit(0), functions.lit(buckets - 1))
    chosen = functions.when(document_key.isNull(), every).otherwise(functions.array(own))
    spread = frame.select("*", functions.explode(chosen).alias(EVENT_BUCKET))
    logged = document_key.isNotNull() | (functions.col(EVENT_BUCKET) == 0)
    return (
        spread.withColumn(LOGGED, logged)
        .repartition(tasks, EVENT_BUCKET)
        .sortWithinPartitions(EVENT_BUCKET, "_id")
    )


class TaskWrittenBatches:
    """The ingest's ``foreachBatch`` when Spark's tasks write the tables: per batch, the
    driver checks each table's markers, has the tasks write (``shardstream_lakehouse``) and
    reports what the commits recorded.  No row reaches this process.

    Args:
        root: the lakehouse root.
        app_id: gives the ingest's app id (read from the checkpoint once it exists).
        progress: receives every batch's outcome.
        maintenance: compacts the tables every so many batches.
        buckets: the bucketed mirror's bucket count (None: the change log alone).
        strict: the mirror refuses updates of documents it never held.
        crash_at_for_test: kill tests: ``(point, batch id)``, the point one of ``task``,
            ``commit``, ``between`` (the writer's) or ``driver`` (this process, after the
            commits).
    """

    def __init__(
        self,
        root: Path,
        app_id: Callable[[], str],
        progress: IngestProgress,
        maintenance: TableMaintenance,
        *,
        buckets: int | None = None,
        strict: bool = True,
        crash_at_for_test: tuple[str, int] | None = None,
    ) -> None:
        self.root = root
        self._app_id = app_id
        self._progress = progress
        self._maintenance = maintenance
        self._buckets = buckets
        self._strict = strict
        self._crash = crash_at_for_test
        self._tables = OpenTables(root)

    def __call__(self, frame: Any, batch_id: int) -> None:
        app_id = self._app_id()
        replay = BatchCommit(app_id=app_id, batch_id=batch_id, watermark="")
        changelog = self._tables[CHANGELOG_TABLE]
        log = not already_committed(changelog, replay, CHANGELOG_TABLE)
        mirror = self._tables[MIRROR_TABLE] if self._buckets is not None else None
        apply = mirror is not None and not already_committed(mirror, replay, MIRROR_TABLE)
        if log or apply:
            options = {
                "path": str(self.root),
                "appId": app_id,
                "batchId": str(batch_id),
                "log": "true" if log else "false",
                "changelogWatermark": committed_watermark(changelog) or "",
            }
            if apply and mirror is not None and self._buckets is not None:
                # A task per slot, not per bucket: a task costs ~80 ms of Spark's and the
                # Python writer's start whatever it holds (16 tasks per batch on 2 slots
                # took 2.6 s a batch against 1.4 s for 2; benchmarks/README.md).
                slots = frame.sparkSession.sparkContext.defaultParallelism
                frame = by_bucket(frame, self._buckets, max(1, min(self._buckets, slots)))
                options["mirrorVersion"] = str(mirror.version())
                options["mirrorWatermark"] = committed_watermark(mirror) or ""
                options["strict"] = "true" if self._strict else "false"
            if self._crash is not None and self._crash[1] == batch_id:
                options[CRASH_OPTION] = f"{self._crash[0]}:{batch_id}"
            frame.write.format(FORMAT).mode("append").options(**options).save()
        self._report(app_id, batch_id)

    def _report(self, app_id: str, batch_id: int) -> None:
        changelog = self._tables[CHANGELOG_TABLE]  # with the batch's commits read in
        events, rows, watermark = committed_counts(changelog, app_id, batch_id) or (0, None, None)
        mirrored = None
        if self._buckets is not None:
            mirrored = committed_write(self._tables[MIRROR_TABLE], app_id, batch_id)
            if mirrored is not None and not events:  # the change log had it: a replay
                events = mirrored.events
        if self._crash == ("driver", batch_id):
            os.kill(os.getpid(), signal.SIGKILL)
        maintained: tuple[Maintained, ...] = ()
        if self._maintenance.due(batch_id):
            tables = [self.root / CHANGELOG_TABLE]
            if self._buckets is not None:
                tables.append(self.root / MIRROR_TABLE)
            maintained = tuple(self._maintenance.run(tables))
        self._progress.batch(BatchOutcome(batch_id, events, watermark, rows, mirrored, maintained))

    def close(self) -> None:
        """Nothing to release: the tasks and the commits hold no state here."""

    def raise_failure(self) -> None:
        """Nothing kept: a failure is Spark's own error, raised by the query."""
