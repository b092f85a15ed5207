"""The ingest's ``foreachBatch`` when Spark's tasks write the tables: the driver plans each
batch's shuffle, has the tasks write, commits the files they name (``driver_commit``) and
reports what the commits recorded.  No event reaches this process.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import functions
from pyspark.sql.pandas.types import from_arrow_schema

from shardstream.spark.delta.changelog.table import CHANGELOG_TABLE
from shardstream.spark.delta.changelog.task_files import committed_counts
from shardstream.spark.delta.commits import (
    BatchCommit,
    OpenTables,
    already_committed,
    committed_watermark,
)
from shardstream.spark.delta.maintenance import Maintained, TableMaintenance
from shardstream.spark.delta.mirror.bucketed.bucket_commit import committed_write
from shardstream.spark.delta.mirror.bucketed.bucket_writer import EVENT_BUCKET
from shardstream.spark.delta.mirror.table import MIRROR_TABLE
from shardstream.spark.delta.sink import BatchOutcome
from shardstream.spark.delta.typed.paths import (
    HISTORY_DIR,
    MIRROR_DIR,
    STATE_TABLE,
    collections_of,
    table_path,
)
from shardstream.spark.ingest.collection_stage import collection_rounds
from shardstream.spark.ingest.driver_commit import commit_written, run_tasks
from shardstream.spark.ingest.progress import IngestProgress
from shardstream.spark.ingest.task_writes import (
    LOGGED,
    MESSAGE_SCHEMA,
    EventTasks,
    WriterOptions,
)


@dataclasses.dataclass(frozen=True, slots=True)
class CollectionTables:
    """The per-collection layout's settings (its tables written by the tasks).

    Attributes:
        history: keep each collection's SCD2 history.
        max_columns: the most field columns a collection's table gets.
    """

    history: bool
    max_columns: int


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
    driver checks each table's markers, has the tasks write, commits what they wrote and
    reports what the commits recorded.  No event reaches this process.

    Args:
        root: the lakehouse root.
        app_id: gives the ingest's app id (read from the checkpoint once it exists).
        progress: receives every batch's outcome.
        maintenance: compacts the tables every so many batches.
        buckets: the bucketed document table's bucket count (None: the change log alone).
        collections: the per-collection layout (the bucketed table is its state); None:
            the bucketed mirror.
        strict: the documents refuse updates of documents they never held.
        crash_at_for_test: kill tests: ``(point, batch id)``, the point one of ``task``,
            ``collections`` (the tasks'), ``commit``, ``between`` or ``driver`` (this
            process: before its commits, between them, after them).
    """

    def __init__(
        self,
        root: Path,
        app_id: Callable[[], str],
        progress: IngestProgress,
        maintenance: TableMaintenance,
        *,
        buckets: int | None = None,
        collections: CollectionTables | None = None,
        strict: bool = True,
        crash_at_for_test: tuple[str, int] | None = None,
    ) -> None:
        self.root = root
        self._app_id = app_id
        self._progress = progress
        self._maintenance = maintenance
        self._buckets = buckets
        self._collections = collections
        self._documents = STATE_TABLE if collections is not None else MIRROR_TABLE
        self._strict = strict
        self._crash = crash_at_for_test
        self._tables = OpenTables(root)

    def __call__(self, frame: Any, batch_id: int) -> None:
        app_id = self._app_id()
        replay = BatchCommit(app_id=app_id, batch_id=batch_id, watermark="")
        changelog = self._tables[CHANGELOG_TABLE]
        log = not already_committed(changelog, replay, CHANGELOG_TABLE)
        documents = self._tables[self._documents] if self._buckets is not None else None
        apply = documents is not None and not already_committed(documents, replay, self._documents)
        if log or apply:
            crash = self._crash[0] if self._crash and self._crash[1] == batch_id else ""
            options = WriterOptions(
                root=self.root,
                app_id=app_id,
                batch_id=batch_id,
                log=log,
                changelog_watermark=committed_watermark(changelog),
                strict=self._strict,
                crash_at=crash,
            )
            if apply and documents is not None and self._buckets is not None:
                options = dataclasses.replace(
                    options,
                    documents_version=documents.version(),
                    documents_watermark=committed_watermark(documents),
                )
                if self._collections is not None:
                    options = dataclasses.replace(
                        options,
                        collections=True,
                        history=self._collections.history,
                        max_columns=self._collections.max_columns,
                        buckets=self._buckets,
                    )
            commit_written(options, run_tasks(self._tasks(frame, options)))
        self._report(app_id, batch_id, logged=log, applied=apply)

    def _tasks(self, frame: Any, options: WriterOptions) -> Any:
        """The batch's writing tasks, their messages out: the events' own partitions for
        the change log alone; else shuffled by bucket, then (per-collection layout) the
        collection tasks after them."""
        if options.documents_version < 0 or self._buckets is None:
            return frame.mapInArrow(EventTasks(options), from_arrow_schema(MESSAGE_SCHEMA))
        # A task per slot, not per bucket: a task costs ~80 ms of Spark's and the Python
        # worker's start whatever it holds (16 tasks per batch on 2 slots took 2.6 s a
        # batch against 1.4 s for 2; benchmarks/README.md).
        slots = frame.sparkSession.sparkContext.defaultParallelism
        shuffled = by_bucket(frame, self._buckets, max(1, min(self._buckets, slots)))
        if options.collections:
            return collection_rounds(shuffled, options, slots)
        return shuffled.mapInArrow(EventTasks(options), from_arrow_schema(MESSAGE_SCHEMA))

    def _report(self, app_id: str, batch_id: int, *, logged: bool, applied: bool) -> None:
        """The batch's outcome from its commits' metadata; a table that had the batch
        before this call (a replay) wrote nothing now, and counts nothing."""
        changelog = self._tables[CHANGELOG_TABLE]  # with the batch's commits read in
        events, rows, watermark = committed_counts(changelog, app_id, batch_id) or (0, None, None)
        if not logged:
            rows = None
        mirrored = None
        if self._buckets is not None and applied:
            mirrored = committed_write(self._tables[self._documents], app_id, batch_id)
            if mirrored is not None and not events:  # the change log had it: a replay
                events = mirrored.events
        if self._crash == ("driver", batch_id):
            os.kill(os.getpid(), signal.SIGKILL)
        maintained: tuple[Maintained, ...] = ()
        if self._maintenance.due(batch_id):
            maintained = tuple(self._maintenance.run(self._maintained_tables()))
        self._progress.batch(BatchOutcome(batch_id, events, watermark, rows, mirrored, maintained))

    def _maintained_tables(self) -> list[Path]:
        tables = [self.root / CHANGELOG_TABLE]
        if self._buckets is not None:
            tables.append(self.root / self._documents)
        if self._collections is not None:
            kinds = (MIRROR_DIR, HISTORY_DIR) if self._collections.history else (MIRROR_DIR,)
            for kind in kinds:
                tables += [table_path(self.root, kind, *n) for n in collections_of(self.root, kind)]
        return tables

    def close(self) -> None:
        """Nothing to release: the tasks and the commits hold no state here."""

    def raise_failure(self) -> None:
        """Nothing kept: a failure is Spark's own error, raised by the query."""
