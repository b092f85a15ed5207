"""The Spark data source ``shardstream_changelog``: a batch's change log written by its tasks.

``frame.write.format("shardstream_changelog").options(path=..., appId=..., batchId=...,
watermark=...).mode("append").save()``: each task writes its rows as one Parquet file
(:func:`~shardstream.spark.delta.changelog_files.write_changelog_file`), and the driver's
``commit`` adds them all in one Delta commit with the batch's markers
(:func:`~shardstream.spark.delta.changelog_files.commit_changelog_files`); ``abort`` deletes
the files of a job that failed.  The ingest uses it when it keeps no mirror
(``--no-mirror``): the rows never reach the driver.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from shardstream.spark.delta.changelog import CHANGELOG_TABLE
from shardstream.spark.delta.changelog_files import (
    ChangelogFile,
    commit_changelog_files,
    committed_counts,
    write_changelog_file,
)
from shardstream.spark.delta.commits import (
    BatchCommit,
    already_committed,
    committed_watermark,
    open_table,
)
from shardstream.spark.delta.maintenance import Maintained, TableMaintenance
from shardstream.spark.delta.sink import BatchOutcome
from shardstream.spark.ingest.progress import IngestProgress

FORMAT: Final = "shardstream_changelog"
# Test hook (kill tests): "<where>:<batch id>", where is "task" (a task dies after writing
# its file) or "commit" (the commit's process dies before committing).
CRASH_OPTION: Final = "crashAtForTest"


class ChangelogDataSource(DataSource):
    """The writer's data source (write only)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def writer(self, schema: Any, overwrite: bool) -> ChangelogWriter:  # noqa: ARG002
        return ChangelogWriter(self.options)


class _Written(WriterCommitMessage):
    """A task's commit message: what it wrote."""

    def __init__(self, written: ChangelogFile) -> None:
        self.written = written


class ChangelogWriter(DataSourceArrowWriter):
    """Tasks write files; the driver commits them (see the module)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.root = options["path"]
        self.app_id = options["appId"]
        self.batch_id = int(options["batchId"])
        self.watermark = options.get("watermark") or None
        self.crash_at = options.get(CRASH_OPTION, "")  # Spark's options ignore case

    def write(self, iterator: Iterator[Any]) -> _Written:
        written = write_changelog_file(self.root, iterator, self.watermark)
        self._maybe_crash("task")
        return _Written(written)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._maybe_crash("commit")
        files = [message.written for message in messages if isinstance(message, _Written)]
        commit_changelog_files(self.root, files, self.app_id, self.batch_id)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        for message in messages:
            if isinstance(message, _Written) and message.written.name is not None:
                (Path(self.root) / CHANGELOG_TABLE / message.written.name).unlink(missing_ok=True)

    def _maybe_crash(self, where: str) -> None:
        if self.crash_at == f"{where}:{self.batch_id}":
            os.kill(os.getpid(), signal.SIGKILL)


def register(spark: Any) -> None:
    """Register ``shardstream_changelog`` with ``spark`` (a SparkSession)."""
    spark.dataSource.register(ChangelogDataSource)


class ChangelogBatches:
    """The ingest's ``foreachBatch`` when it keeps no mirror: per batch, the driver checks
    the table's markers, has the tasks write (``shardstream_changelog``) and reports what the
    commit recorded.  No row reaches this process.

    Args:
        root: the lakehouse root.
        app_id: gives the ingest's app id (read from the checkpoint once it exists).
        progress: receives every batch's outcome.
        maintenance: compacts the change log every so many batches.
        crash_at_for_test: kill tests: ``(point, batch id)``, the point one of ``task``,
            ``commit`` (the writer's) or ``driver`` (this process, after the commit).
    """

    def __init__(
        self,
        root: Path,
        app_id: Callable[[], str],
        progress: IngestProgress,
        maintenance: TableMaintenance,
        crash_at_for_test: tuple[str, int] | None = None,
    ) -> None:
        self.root = root
        self._app_id = app_id
        self._progress = progress
        self._maintenance = maintenance
        self._crash = crash_at_for_test

    def __call__(self, frame: Any, batch_id: int) -> None:
        app_id = self._app_id()
        path = self.root / CHANGELOG_TABLE
        table = open_table(path)
        replay = BatchCommit(app_id=app_id, batch_id=batch_id, watermark="")
        if already_committed(table, replay, CHANGELOG_TABLE):
            self._progress.batch(BatchOutcome(batch_id, 0, None, None, None))
            return
        options = {
            "path": str(self.root),
            "appId": app_id,
            "batchId": str(batch_id),
            "watermark": committed_watermark(table) or "",
        }
        if self._crash is not None and self._crash[1] == batch_id:
            options[CRASH_OPTION] = f"{self._crash[0]}:{batch_id}"
        frame.write.format(FORMAT).mode("append").options(**options).save()
        events, rows, watermark = committed_counts(self.root, app_id, batch_id) or (0, 0, None)
        if self._crash == ("driver", batch_id):
            os.kill(os.getpid(), signal.SIGKILL)
        maintained: tuple[Maintained, ...] = ()
        if self._maintenance.due(batch_id):
            maintained = tuple(self._maintenance.run([path]))
        self._progress.batch(BatchOutcome(batch_id, events, watermark, rows, None, maintained))

    def close(self) -> None:
        """Nothing to release: the tasks and the commits hold no state here."""

    def raise_failure(self) -> None:
        """Nothing kept: a failure is Spark's own error, raised by the query."""
