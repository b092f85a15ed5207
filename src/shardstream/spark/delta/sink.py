"""Sink: one micro-batch into both lakehouse tables, exactly once.

``<root>/changelog`` (every event) and ``<root>/mirror`` (current documents) are written
by one :class:`LakehouseSink`, the body of the ingest's ``foreachBatch``.  Exactly once
rests on three facts:

1. each table commits a batch's rows and its markers (app transaction
   ``<app>:<table>`` = batch id, watermark = last event token) in one atomic Delta commit;
2. a batch Spark replays after a crash has the same id and the same events, so a table
   whose app transaction already reached that id skips it (:meth:`BatchCommit` markers);
3. every table drops events at or below its own watermark, so when the checkpoint is
   lost, the stream restarts after the lower of the two watermarks
   (:func:`resume_watermark`) and the table that was ahead skips what it holds.

The change log is committed first, then the mirror; a crash between the two leaves the
mirror behind, which the replay (or the lower watermark) catches up.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import signal
from pathlib import Path

import pyarrow as pa

from shardstream.errors import SinkError
from shardstream.spark.delta.changelog.table import DeltaChangelog
from shardstream.spark.delta.commits import BatchCommit
from shardstream.spark.delta.maintenance import Maintained, TableMaintenance
from shardstream.spark.delta.mirror.bucketed.bucket_table import is_bucketed
from shardstream.spark.delta.mirror.table import MIRROR_TABLE, DeltaMirror, MirrorWrite
from shardstream.spark.delta.typed.batch import CollectionWrites, write_collections
from shardstream.spark.delta.typed.paths import (
    HISTORY_DIR,
    MIRROR_DIR,
    STATE_TABLE,
    collections_of,
    state_table,
    table_path,
)
from shardstream.spark.ingest import DEFAULT_BUCKETS, DEFAULT_MAX_COLUMNS, MirrorLayout
from shardstream.spark.source.rows import EVENT_SCHEMA
from shardstream.transform.raw.encoded_stream import quiet_collector


class CrashPoint(enum.Enum):
    """Where a test makes the ingest SIGKILL itself inside a batch's write."""

    IN_BATCH = "in-batch"  # batch read and applied in memory, nothing committed
    BETWEEN_COMMITS = "between-commits"  # change log committed, mirror not
    IN_COLLECTIONS = "in-collections"  # collection tables committed, the state not
    AFTER_COMMITS = "after-commits"  # both committed, Spark's commit log not


@dataclasses.dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What one batch did.

    Attributes:
        batch_id: Spark's batch id.
        events: events in the batch.
        watermark: the last event's token (None: empty batch, nothing written).
        changelog_rows: rows appended (None: the table already had the batch).
        mirror: what the mirror did (None: the table already had the batch).
        maintained: the tables compacted after this batch (empty: none was due).
        collections: what the per-collection tables did (None: the single layout, or the
            state already had the batch).
    """

    batch_id: int
    events: int
    watermark: str | None
    changelog_rows: int | None
    mirror: MirrorWrite | None
    maintained: tuple[Maintained, ...] = ()
    collections: CollectionWrites | None = None


class LakehouseSink:
    """Writes micro-batches of event rows into ``<root>/changelog`` and ``<root>/mirror``.

    Args:
        root: the lakehouse table root (``--table PATH``).
        app_id: the ingest's app id, derived from its checkpoint.
        strict: the mirror refuses updates of documents it does not hold.
        optimize_every: compact and checkpoint both tables after every this many batches
            (0: never; see :mod:`shardstream.spark.delta.maintenance`).
        mirror_workers: prepare large batches' mirror in this many processes
            (:mod:`shardstream.spark.delta.mirror.workers`; 0 or 1: in this one).
        crash_at_for_test: (point, batch id): SIGKILL this process there (kill tests).
        layout: per-collection typed tables, or the one-table mirror.
        history: the per-collection layout also keeps each collection's SCD2 history.
        max_columns: the most field columns a collection table gets (the rest: _rescued).
        buckets: the bucket count of a collection table this creates (``typed.buckets``).
    """

    def __init__(
        self,
        root: str | Path,
        app_id: str,
        *,
        strict: bool = True,
        optimize_every: int = 0,
        mirror_workers: int = 0,
        crash_at_for_test: tuple[CrashPoint, int] | None = None,
        layout: MirrorLayout = MirrorLayout.SINGLE,
        history: bool = True,
        max_columns: int = DEFAULT_MAX_COLUMNS,
        buckets: int = DEFAULT_BUCKETS,
    ) -> None:
        self.root = Path(root)
        self.app_id = app_id
        self.layout = layout
        self.history = history
        self.max_columns = max_columns
        self.buckets = buckets
        check_layout(self.root, layout)
        self.changelog = DeltaChangelog(self.root)
        collections = layout is MirrorLayout.COLLECTIONS
        self.mirror = DeltaMirror(
            self.root,
            strict=strict,
            workers=mirror_workers,
            table=STATE_TABLE if collections else MIRROR_TABLE,
            record_versions=collections,
        )
        self.maintenance = TableMaintenance(optimize_every)
        self._crash_at = crash_at_for_test

    def write_batch(self, events: pa.Table, batch_id: int) -> BatchOutcome:
        """Write one batch (any row order; ``EVENT_SCHEMA`` columns) into both tables."""
        # A batch decodes and types every document it writes: hundreds of thousands of
        # young containers, none in a cycle, that the collector would walk over and over.
        with quiet_collector():
            return self._write_batch(events, batch_id)

    def _write_batch(self, events: pa.Table, batch_id: int) -> BatchOutcome:
        _check_columns(events)
        if not events.num_rows:
            return BatchOutcome(batch_id, 0, None, 0, None)
        # Per-shard partitions arrive shard by shard; the tables want token order.
        ordered = events.sort_by("_id")
        watermark = ordered["_id"][-1].as_py()
        commit = BatchCommit(app_id=self.app_id, batch_id=batch_id, watermark=watermark)
        write_changelog = not self.changelog.committed(commit)
        fresh = None if self.mirror.committed(commit) else self.mirror.fresh(ordered)
        prepared = None if fresh is None else self.mirror.prepare_fresh(fresh)
        self._maybe_crash(CrashPoint.IN_BATCH, batch_id)
        appended = self.changelog.append(ordered, commit) if write_changelog else None
        self._maybe_crash(CrashPoint.BETWEEN_COMMITS, batch_id)
        collections = None
        if prepared is not None and fresh is not None and self.layout is MirrorLayout.COLLECTIONS:
            # Before the state: a crash in between replays the batch into the tables that
            # lack it (the state, not moved, prepares it the same way again).
            collections = write_collections(
                self.root,
                fresh,
                prepared,
                commit,
                history=self.history,
                max_columns=self.max_columns,
                buckets=self.buckets,
            )
            self._maybe_crash(CrashPoint.IN_COLLECTIONS, batch_id)
        mirrored = self.mirror.write(prepared, commit) if prepared is not None else None
        self._maybe_crash(CrashPoint.AFTER_COMMITS, batch_id)
        maintained: tuple[Maintained, ...] = ()
        if self.maintenance.due(batch_id):  # after every commit: a crash here loses nothing
            maintained = tuple(self.maintenance.run(self._tables()))
        return BatchOutcome(
            batch_id, ordered.num_rows, watermark, appended, mirrored, maintained, collections
        )

    def _tables(self) -> list[Path]:
        """Every table this sink writes (maintenance compacts them all)."""
        tables = [self.changelog.path, self.mirror.path]
        if self.layout is MirrorLayout.COLLECTIONS:
            kinds = (MIRROR_DIR, HISTORY_DIR) if self.history else (MIRROR_DIR,)
            for kind in kinds:
                tables += [
                    table_path(self.root, kind, *name) for name in collections_of(self.root, kind)
                ]
        return tables

    def close(self) -> None:
        """Stop the mirror's worker processes, if any (the tables need no closing)."""
        self.mirror.close()

    def _maybe_crash(self, point: CrashPoint, batch_id: int) -> None:
        if self._crash_at == (point, batch_id):
            os.kill(os.getpid(), signal.SIGKILL)


def resume_watermark(root: str | Path, *, mirror: bool = True) -> str | None:
    """Where a stream must restart when its checkpoint is lost: the lower table watermark.

    None when neither table has a batch yet (the stream starts where the user said).  When
    the change log committed a batch the mirror never did (a crash between the two
    commits), the mirror needs everything since the stream began, and "where the user
    said" may be "now" on a live cluster: the restart point is then the change log's
    first event, which it holds since the stream's start.  Without a ``mirror`` the
    change log's watermark alone.
    """
    changelog = DeltaChangelog(root)
    if not mirror:
        return changelog.watermark
    mirror_mark = DeltaMirror(root, table=state_table(root)).watermark
    if changelog.watermark is None:
        return None  # the change log commits first: an empty one means nothing was written
    if mirror_mark is None:
        return changelog.first_event()
    return min(changelog.watermark, mirror_mark)


def check_layout(root: Path, layout: MirrorLayout) -> None:
    """Refuse a layout other than the one the tables under ``root`` were written in."""
    written = None
    if (root / STATE_TABLE / "_delta_log").is_dir():
        written = MirrorLayout.COLLECTIONS
    elif (root / MIRROR_TABLE / "_delta_log").is_dir():
        written = MirrorLayout.BUCKETED if is_bucketed(root / MIRROR_TABLE) else MirrorLayout.SINGLE
    if written is not None and written is not layout:
        raise SinkError(
            f"expected the mirror layout the tables under {root} were written in "
            f"(--mirror-layout {written.value}), got --mirror-layout {layout.value}"
        )


def _check_columns(events: pa.Table) -> None:
    missing = [name for name in EVENT_SCHEMA.names if name not in events.column_names]
    if missing:
        raise SinkError(
            f"expected batches with the shardstream event columns {EVENT_SCHEMA.names}, "
            f"got {events.column_names} (missing {missing})"
        )
