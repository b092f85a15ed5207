"""What a Spark task writing the lakehouse does with its events, and what it tells the
driver's commit.

:class:`WriterOptions` is a batch's settings as its tasks get them; :func:`write_events`
writes a task's share of a batch: its change-log file
(:func:`~shardstream.spark.delta.changelog.task_files.write_changelog_file`) and, with a
bucketed document table (the bucketed mirror, or the per-collection layout's state), each of
its buckets rewritten
(:func:`~shardstream.spark.delta.mirror.bucketed.bucket_writer.apply_buckets`).
:class:`EventTasks` is that task as the body of a ``mapInArrow``; its output, one row per
task, is a :class:`Written` message naming the files, which the driver collects and commits
(:mod:`shardstream.spark.ingest.driver_commit`).
"""

from __future__ import annotations

import dataclasses
import os

# A task's message crosses to the driver pickled: this pipeline's own objects, between
# its own processes.
import pickle
import signal
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from shardstream.spark.delta.changelog.task_files import ChangelogFile, write_changelog_file
from shardstream.spark.delta.mirror.bucketed.bucket_writer import (
    AppliedBucket,
    BucketWrite,
    apply_buckets,
)
from shardstream.spark.delta.mirror.table import MIRROR_TABLE
from shardstream.spark.delta.typed.paths import STATE_TABLE
from shardstream.spark.ingest import DEFAULT_BUCKETS, DEFAULT_MAX_COLUMNS
from shardstream.transform.raw.encoded_stream import quiet_collector

# The column saying which copy of an event the change log takes: an event that names no
# document goes to every bucket, and only bucket 0's copy is logged.
LOGGED: Final = "_logged"


# A task's output: one row, its pickled :class:`Written`.
MESSAGE_SCHEMA: Final = pa.schema([pa.field("message", pa.binary(), nullable=False)])


@dataclasses.dataclass(frozen=True, slots=True)
class WriterOptions:
    """A batch's settings, as the driver hands them to its tasks and its commit.

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
        buckets: (collections) the bucket count of a collection table the batch creates.
        crash_at: the kill tests' hook: where this batch's process SIGKILLs itself,
            ``task`` (a task, after writing its files), ``collections`` (a collection
            task, after committing its tables), ``commit`` (the driver, before its
            commits) or ``between`` (the driver, after the change log's commit, before
            the documents'); empty: nowhere.
    """

    root: Path
    app_id: str
    batch_id: int
    log: bool = True
    changelog_watermark: str | None = None
    documents_version: int = -1
    documents_watermark: str | None = None
    strict: bool = True
    collections: bool = False
    history: bool = True
    max_columns: int = DEFAULT_MAX_COLUMNS
    buckets: int = DEFAULT_BUCKETS
    crash_at: str = ""

    @property
    def documents_table(self) -> str:
        """The bucketed document table's directory and marker name."""
        return STATE_TABLE if self.collections else MIRROR_TABLE

    def maybe_crash(self, where: str) -> None:
        """SIGKILL this process when the kill test's hook says so."""
        if self.crash_at == where:
            os.kill(os.getpid(), signal.SIGKILL)


class Written:
    """A task's message to the driver's commit: the files it wrote, and the newest event it
    was given."""

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

    def pickled(self) -> bytes:
        """This message as it crosses between processes."""
        return pickle.dumps(self)

    def to_batch(self) -> pa.RecordBatch:
        """This message as a task's output row (:data:`MESSAGE_SCHEMA`)."""
        return pa.record_batch([pa.array([self.pickled()], pa.binary())], MESSAGE_SCHEMA)

    @classmethod
    def unpickled(cls, payloads: Iterable[bytes]) -> Written:
        """Several tasks' messages, each as :meth:`pickled` gave it, as one."""
        return cls.joined(pickle.loads(payload) for payload in payloads)


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


class EventTasks:
    """A task writing the change log and the bucketed document table (``mapInArrow``):
    its events in (event columns, :data:`LOGGED` when shuffled by bucket), its
    :class:`Written` message out (no row for a task given no event)."""

    def __init__(self, options: WriterOptions) -> None:
        self.options = options

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # A task's rows make hundreds of thousands of young containers, none in a cycle,
        # that the cyclic collector would walk over and over (as the replay's and the
        # in-driver sink's loops); every task body writes in such a quiet period.
        with quiet_collector():
            done = write_task_events(self.options, batches)
        if done is not None:
            yield done[0].to_batch()


def write_task_events(
    options: WriterOptions, batches: Iterator[pa.RecordBatch]
) -> tuple[Written, list[AppliedBucket]] | None:
    """A task's events written (:func:`write_events`), then the kill tests' ``task`` hook;
    None for a task given no event."""
    read = list(batches)
    if not read:
        return None
    done = write_events(options, pa.Table.from_batches(read))
    options.maybe_crash("task")
    return done
