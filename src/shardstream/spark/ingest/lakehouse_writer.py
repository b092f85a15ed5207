"""The Spark data source ``shardstream_lakehouse``: a batch's tables written by its tasks.

``frame.write.format("shardstream_lakehouse").options(...).mode("append").save()``: each
task writes its events into one change-log Parquet file and, with a bucketed document table
(the bucketed mirror), rewrites each of its buckets (:mod:`~shardstream.spark.ingest.task_writes`);
in the per-collection layout the tasks are the collection tasks of
:mod:`~shardstream.spark.ingest.collection_stage`, handed the state tasks' files with their
rows.  The driver's ``commit`` adds the change log's files in one Delta commit, then the
document table's rewrites in another, each with the batch's markers, in the in-driver sink's
order (a crash between the two leaves the documents behind, and the replay completes them);
``abort`` deletes the files of a job that failed.  The ingest's ``foreachBatch`` around it is
:mod:`~shardstream.spark.ingest.task_batches`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from shardstream.spark.delta.changelog.table import CHANGELOG_TABLE
from shardstream.spark.delta.changelog.task_files import commit_changelog_files
from shardstream.spark.delta.commits import BatchCommit, already_committed, open_table
from shardstream.spark.delta.mirror.bucketed.bucket_commit import commit_buckets
from shardstream.spark.ingest.collection_stage import write_collection_rows
from shardstream.spark.ingest.task_writes import WriterOptions, Written, write_events

FORMAT: Final = "shardstream_lakehouse"


class LakehouseDataSource(DataSource):
    """The writer's data source (write only)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def writer(self, schema: Any, overwrite: bool) -> LakehouseWriter:  # noqa: ARG002
        return LakehouseWriter(self.options)


class LakehouseWriter(DataSourceArrowWriter):
    """Tasks write files; the driver commits them (see the module)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = WriterOptions.read(options)

    def write(self, iterator: Iterator[Any]) -> Written:
        batches = list(iterator)
        if not batches:
            return Written([], [], None)
        rows = pa.Table.from_batches(batches)
        if self.options.collections:
            return write_collection_rows(self.options, rows)
        written, _ = write_events(self.options, rows)
        self.options.maybe_crash("task")
        return written

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        options = self.options
        options.maybe_crash("commit")
        written = Written.joined(m for m in messages if isinstance(m, Written))
        if options.log:
            logs = written.changelogs
            commit_changelog_files(options.root, logs, options.app_id, options.batch_id)
        options.maybe_crash("between")
        if options.documents_version >= 0 and written.last_event is not None:
            commit = BatchCommit(
                app_id=options.app_id, batch_id=options.batch_id, watermark=written.last_event
            )
            path = options.root / options.documents_table
            commit_buckets(
                path, options.documents_version, written.buckets, commit, options.documents_table
            )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Spark aborts a job whose commit failed, and the commit may have failed after a
        # table committed the batch (the documents' commit, after the change log's): that
        # table's files are its data now; only a table without the batch loses its files.
        options = self.options
        batch = BatchCommit(app_id=options.app_id, batch_id=options.batch_id, watermark="")
        done = {
            name: already_committed(open_table(options.root / name), batch, name)
            for name in (CHANGELOG_TABLE, options.documents_table)
        }
        written = Written.joined(m for m in messages if isinstance(m, Written))
        if not done[CHANGELOG_TABLE]:
            for log in written.changelogs:
                if log.name is not None:
                    (options.root / CHANGELOG_TABLE / log.name).unlink(missing_ok=True)
        if not done[options.documents_table]:
            for write in written.buckets:
                if write.added is not None:
                    path = options.root / options.documents_table / write.added.path
                    path.unlink(missing_ok=True)


def register(spark: Any) -> None:
    """Register ``shardstream_lakehouse`` with ``spark`` (a SparkSession)."""
    spark.dataSource.register(LakehouseDataSource)
