"""What a Spark task of the lakehouse writer does with its events, and what it tells the
driver's commit.

:class:`WriterOptions` is the writer's options as a task reads them; :func:`write_events`
writes a task's share of a batch: its change-log file
(:func:`~shardstream.spark.delta.changelog.task_files.write_changelog_file`) and, with a
bucketed document table (the bucketed mirror, or the per-collection layout's state), each of
its buckets rewritten
(:func:`~shardstream.spark.delta.mirror.bucketed.bucket_writer.apply_buckets`).  A
:class:`Written` message carries the files to the driver, which commits them
(:mod:`shardstream.spark.ingest.lakehouse_writer`).
"""

from __future__ import annotations

import dataclasses
import os
import signal
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import WriterCommitMessage

from shardstream.spark.delta.changelog.task_files import ChangelogFile, write_changelog_file
from shardstream.spark.delta.mirror.bucketed.bucket_writer import (
    AppliedBucket,
    BucketWrite,
    apply_buckets,
)
from shardstream.spark.delta.mirror.table import MIRROR_TABLE
from shardstream.spark.delta.typed.paths import STATE_TABLE
from shardstream.spark.ingest import DEFAULT_MAX_COLUMNS

# Test hook (kill tests): "<where>:<batch id>", where is "task" (a task dies after writing
# its files), "collections" (a collection task dies after committing its tables), "commit"
# (the commit's process dies before committing) or "between" (after the change log's
# commit, before the documents').
CRASH_OPTION: Final = "crashAtForTest"
# The column saying which copy of an event the change log takes: an event that names no
# document goes to every bucket, and only bucket 0's copy is logged.
LOGGED: Final = "_logged"


@dataclasses.dataclass(frozen=True, slots=True)
class WriterOptions:
    """The writer's options (``frame.write.options(...)``), read.

    Attributes:
        root: the lakehouse root.
        app_id / batch_id: the batch's markers.
        log: the change log lacks the batch (write it).
        changelog_watermark: the change log's watermark.
        documents_version: the bucketed document table's version the tasks read (-1: no
            bucketed table to write, or it already has the batch).
        documents_watermark: its watermark.
        strict: the documents refuse updates of documents they never held.
        collections: the per-collection layout (the bucketed table is its state, and the
            collections' tables are written by a second round of tasks).
        history: (collections) keep each collection's SCD2 history.
        max_columns: (collections) the most field columns a collection's table gets.
        crash_at: the kill tests' hook (:data:`CRASH_OPTION`).
    """

    root: Path
    app_id: str
    batch_id: int
    log: bool
    changelog_watermark: str | None
    documents_version: int
    documents_watermark: str | None
    strict: bool
    collections: bool
    history: bool
    max_columns: int
    crash_at: str

    @classmethod
    def read(cls, options: Mapping[str, str]) -> WriterOptions:
        """The options as Spark passes them (strings; its keys' case is not kept)."""
        return cls(
            root=Path(options["path"]),
            app_id=options["appId"],
            batch_id=int(options["batchId"]),
            log=options.get("log") == "true",
            changelog_watermark=options.get("changelogWatermark") or None,
            documents_version=int(options.get("mirrorVersion") or -1),
            documents_watermark=options.get("mirrorWatermark") or None,
            strict=options.get("strict") != "false",
            collections=options.get("collections") == "true",
            history=options.get("history") != "false",
            max_columns=int(options.get("maxColumns") or DEFAULT_MAX_COLUMNS),
            crash_at=options.get(CRASH_OPTION, ""),
        )

    @property
    def documents_table(self) -> str:
        """The bucketed document table's directory and marker name."""
        return STATE_TABLE if self.collections else MIRROR_TABLE

    def maybe_crash(self, where: str) -> None:
        """SIGKILL this process when the kill test's hook says so."""
        if self.crash_at == f"{where}:{self.batch_id}":
            os.kill(os.getpid(), signal.SIGKILL)


class Written(WriterCommitMessage):
    """A task's commit message: the files it wrote, and the newest event it was given."""

    def __init__(
        self, changelogs: list[ChangelogFile], buckets: list[BucketWrite], last_event: str | None
    ) -> None:
        self.changelogs = changelogs
        self.buckets = buckets
        self.last_event = last_event

    @classmethod
    def joined(cls, messages: Iterable[Written]) -> Written:
        """Several tasks' messages as one."""
        found = list(messages)
        marks = [m.last_event for m in found if m.last_event is not None]
        return cls(
            [log for m in found for log in m.changelogs],
            [write for m in found for write in m.buckets],
            max(marks) if marks else None,
        )


def write_events(options: WriterOptions, events: pa.Table) -> tuple[Written, list[AppliedBucket]]:
    """Write a task's events (event columns, :data:`LOGGED` when shuffled by bucket): its
    change-log file, its buckets' new files; say them, and what each bucket's events did."""
    logged = events.filter(events[LOGGED]) if LOGGED in events.column_names else events
    changelogs = []
    if options.log:
        changelogs.append(write_changelog_file(options.root, logged, options.changelog_watermark))
    applied: list[AppliedBucket] = []
    if options.documents_version >= 0:
        applied = apply_buckets(
            options.root / options.documents_table,
            options.documents_version,
            events,
            options.documents_watermark,
            strict=options.strict,
            record_versions=options.collections,
        )
    last = pc.max(logged["_id"]).as_py() if logged.num_rows else None
    return Written(changelogs, [bucket.write for bucket in applied], last), applied
