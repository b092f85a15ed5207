"""Sink: the mirror, ``<table>/mirror``: the current state of every document.

Columns: ``db``, ``coll``, ``documentKey`` and ``fullDocument`` (canonical Extended JSON),
and the ``_id`` token and ``clusterTime`` of the last event applied to the row; the internal
``_documentId`` (the ``_id`` alone, as canonical Extended JSON) is the merge key.

A batch is applied in two steps: :meth:`DeltaMirror.prepare` reads only the rows it can
touch and applies the events to them in token order
(:mod:`shardstream.spark.delta.mirror.prepare`; in worker processes for a large batch,
:mod:`shardstream.spark.delta.mirror.workers`), and :meth:`DeltaMirror.write` writes the
touched rows back with one Delta MERGE (delete, update, insert) that also carries the batch
markers of :mod:`shardstream.spark.delta.commits`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from shardstream.spark.delta.changelog.table import newer_than
from shardstream.spark.delta.commits import (
    BatchCommit,
    already_committed,
    committed_watermark,
    open_table,
    table_rows,
)
from shardstream.spark.delta.mirror.prepare import (
    DELETE,
    EVENT_COLUMNS,
    MIRROR_SCHEMA,
    PreparedBatch,
    prepare_events,
    quoted,
)
from shardstream.spark.delta.mirror.workers import MirrorWorkers
from shardstream.spark.delta.snapshot.marks import snapshot_times

MIRROR_TABLE: Final = "mirror"


_MATCH: Final = " AND ".join(
    f"t.{quoted(name)} = s.{quoted(name)}" for name in ("db", "coll", "_documentId")
)
_SET_ALL: Final = {quoted(name): f"s.{quoted(name)}" for name in MIRROR_SCHEMA.names}


@dataclasses.dataclass(frozen=True, slots=True)
class MirrorWrite:
    """What one batch did to the mirror.

    Attributes:
        events: events applied (those above the mirror's watermark).
        rows_read: stored rows the batch read.
        rows_written: rows upserted; ``rows_deleted``: rows deleted (if present).
        unknown_updates: updates of documents the mirror never held (lenient mode).
    """

    events: int
    rows_read: int
    rows_written: int
    rows_deleted: int
    unknown_updates: int


class DeltaMirror:
    """The mirror table under a lakehouse root (its only writer while an ingest runs).

    Args:
        root: the lakehouse root.
        strict: an update of a document the mirror never held is an error (else counted).
        workers: prepare large batches in this many worker processes, a part of the
            documents each (:mod:`shardstream.spark.delta.mirror.workers`); 0 or 1: in this
            process.
        table: the table's directory under the root, and its name in its commits' app
            transaction (``mirror``; the per-collection layout keeps it as ``_mirror_state``).
        record_versions: prepared batches carry every document version (the history's).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        strict: bool = True,
        workers: int = 0,
        table: str = MIRROR_TABLE,
        record_versions: bool = False,
    ) -> None:
        self.path = Path(root) / table
        self.table = table
        self.strict = strict
        self.record_versions = record_versions
        stored = open_table(self.path)
        self._watermark: str | None = committed_watermark(stored)
        # After a snapshot, an update read before its end may find its document gone.
        read_end = (snapshot_times(stored) or (None, None))[1]
        self._snapshot_read_end = None if read_end is None else (read_end.time, read_end.inc)
        self.workers = (
            MirrorWorkers(
                self.path,
                workers,
                strict=strict,
                snapshot_read_end=self._snapshot_read_end,
                record_versions=record_versions,
            )
            if workers > 1
            else None
        )

    def close(self) -> None:
        """Stop the worker processes, if any."""
        if self.workers is not None:
            self.workers.close()

    @property
    def watermark(self) -> str | None:
        """The ``_id`` of the last event applied (None: none yet)."""
        return self._watermark

    def committed(self, commit: BatchCommit) -> bool:
        """Whether the table already holds this batch (Spark replayed it)."""
        return already_committed(open_table(self.path), commit, self.table)

    def prepare(self, events: pa.Table) -> PreparedBatch:
        """Apply a batch (token order) to the rows it touches; nothing is written yet."""
        return self.prepare_fresh(self.fresh(events))

    def fresh(self, events: pa.Table) -> pa.Table:
        """The mirror's columns of a batch's events above its watermark (token order)."""
        return newer_than(events, self._watermark).select(list(EVENT_COLUMNS))

    def prepare_fresh(self, fresh: pa.Table) -> PreparedBatch:
        """:meth:`prepare` of the events :meth:`fresh` kept."""
        if self.workers is not None:
            prepared = self.workers.prepare(fresh)
            if prepared is not None:
                return prepared
        return prepare_events(
            self.path,
            fresh,
            strict=self.strict,
            snapshot_read_end=self._snapshot_read_end,
            record_versions=self.record_versions,
        )

    def write(self, prepared: PreparedBatch, commit: BatchCommit) -> MirrorWrite:
        """Write a prepared batch in one commit carrying the batch markers."""
        source = prepared.source
        deleted = pc.sum(source[DELETE]).as_py() or 0
        table = self._table()
        if source.num_rows:
            (
                table.merge(
                    source,
                    _MATCH,
                    source_alias="s",
                    target_alias="t",
                    commit_properties=commit.properties(self.table, self._watermark),
                )
                .when_matched_delete(predicate=f"s.{quoted(DELETE)}")
                .when_matched_update(updates=_SET_ALL, predicate=f"NOT s.{quoted(DELETE)}")
                .when_not_matched_insert(updates=_SET_ALL, predicate=f"NOT s.{quoted(DELETE)}")
                .execute()
            )
        else:
            # A MERGE of nothing writes no commit; the markers still must be recorded.
            write_deltalake(
                table,
                MIRROR_SCHEMA.empty_table(),
                mode="append",
                commit_properties=commit.properties(self.table, self._watermark),
            )
        self._watermark = commit.advanced(self._watermark)
        return MirrorWrite(
            events=prepared.events,
            rows_read=prepared.rows_read,
            rows_written=source.num_rows - deleted,
            rows_deleted=deleted,
            unknown_updates=prepared.unknown_updates,
        )

    def read_all(self) -> pa.Table:
        """The whole mirror (for checks and small tables)."""
        table = open_table(self.path)
        return table_rows(table).cast(MIRROR_SCHEMA) if table else MIRROR_SCHEMA.empty_table()

    def _table(self) -> DeltaTable:
        table = open_table(self.path)
        if table is None:
            table = DeltaTable.create(str(self.path), MIRROR_SCHEMA, mode="ignore")
        return table
