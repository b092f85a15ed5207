"""Sink: the mirror, ``<table>/mirror``: the current state of every document.

Columns: ``db``, ``coll``, ``documentKey`` and ``fullDocument`` (canonical Extended JSON),
and the ``_id`` token and ``clusterTime`` of the last event applied to the row; the internal
``_documentId`` (the ``_id`` alone, as canonical Extended JSON) is the merge key.

A batch is applied in three steps: read only the rows it can touch (one filtered scan:
the keys its updates read, plus whole collections or databases a drop or rename acts on),
apply the events in token order in Python (:mod:`shardstream.spark.delta.mirror_state`), and
write the touched rows back with one Delta MERGE (delete, update, insert) that also
carries the batch markers of :mod:`shardstream.spark.delta.commits`.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from shardstream.spark.delta.changelog import newer_than
from shardstream.spark.delta.commits import (
    BatchCommit,
    already_committed,
    committed_watermark,
    open_table,
)
from shardstream.spark.delta.mirror_keys import RowKey
from shardstream.spark.delta.mirror_plain import split_plain
from shardstream.spark.delta.mirror_state import (
    BatchNeeds,
    MirrorChanges,
    MirrorRow,
    apply_batch,
    batch_needs,
)
from shardstream.spark.delta.snapshot_marks import snapshot_times
from shardstream.spark.source.rows import CLUSTER_TIME_TYPE

MIRROR_TABLE: Final = "mirror"
MIRROR_SCHEMA: Final = pa.schema(
    [
        pa.field("db", pa.string()),
        pa.field("coll", pa.string()),
        pa.field("documentKey", pa.string()),
        pa.field("fullDocument", pa.string()),
        pa.field("_id", pa.string()),
        pa.field("clusterTime", CLUSTER_TIME_TYPE),
        pa.field("_documentId", pa.string()),
    ]
)
_DELETE: Final = "_delete"
_MERGE_SOURCE_SCHEMA: Final = MIRROR_SCHEMA.append(pa.field(_DELETE, pa.bool_()))
# The event columns the mirror reads.
EVENT_COLUMNS: Final = (
    "_id",
    "operationType",
    "clusterTime",
    "db",
    "coll",
    "documentKey",
    "fullDocument",
    "to",
    "_oplogUpdate",
    "_fragment",
)


def _quoted(name: str) -> str:
    # DataFusion folds unquoted identifiers to lower case; the columns are camelCase.
    return f'"{name}"'


_MATCH: Final = " AND ".join(
    f"t.{_quoted(name)} = s.{_quoted(name)}" for name in ("db", "coll", "_documentId")
)
_SET_ALL: Final = {_quoted(name): f"s.{_quoted(name)}" for name in MIRROR_SCHEMA.names}


@dataclasses.dataclass(frozen=True, slots=True)
class PreparedBatch:
    """A batch applied to the rows it touches, not yet written.

    Attributes:
        events: events applied (those above the mirror's watermark).
        rows_read: stored rows read from the mirror.
        changes: the touched rows' final state, as applied in Python.
        plain: merge rows of the documents the batch only sets or deletes (``mirror_plain``).
    """

    events: int
    rows_read: int
    changes: MirrorChanges
    plain: pa.Table | None = None


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
    """The mirror table under a lakehouse root (its only writer while an ingest runs)."""

    def __init__(self, root: str | Path, *, strict: bool = True) -> None:
        self.path = Path(root) / MIRROR_TABLE
        self.strict = strict
        table = open_table(self.path)
        self._watermark: str | None = committed_watermark(table)
        # After a snapshot, an update read before its end may find its document gone.
        read_end = (snapshot_times(table) or (None, None))[1]
        self._snapshot_read_end = None if read_end is None else (read_end.time, read_end.inc)

    @property
    def watermark(self) -> str | None:
        """The ``_id`` of the last event applied (None: none yet)."""
        return self._watermark

    def committed(self, commit: BatchCommit) -> bool:
        """Whether the table already holds this batch (Spark replayed it)."""
        return already_committed(open_table(self.path), commit, MIRROR_TABLE)

    def prepare(self, events: pa.Table) -> PreparedBatch:
        """Apply a batch (token order) to the rows it touches; nothing is written yet."""
        fresh = newer_than(events, self._watermark).select(list(EVENT_COLUMNS))
        split = split_plain(fresh)  # documents only set or deleted: no row objects
        rows = split.events.to_pylist()
        stored = self._load(batch_needs(rows))
        changes = apply_batch(
            rows, stored, strict=self.strict, snapshot_read_end=self._snapshot_read_end
        )
        return PreparedBatch(fresh.num_rows, len(stored), changes, split.plain)

    def write(self, prepared: PreparedBatch, commit: BatchCommit) -> MirrorWrite:
        """Write a prepared batch in one commit carrying the batch markers."""
        changes = prepared.changes
        source = _merge_source(changes.rows)
        deleted = sum(1 for row in changes.rows.values() if row is None)
        if prepared.plain is not None and prepared.plain.num_rows:
            plain = prepared.plain.cast(_MERGE_SOURCE_SCHEMA)
            deleted += pc.sum(plain[_DELETE]).as_py() or 0
            source = pa.concat_tables([source, plain]).sort_by(
                [(name, "ascending") for name in ("db", "coll", "_documentId")]
            )
        table = self._table()
        if source.num_rows:
            (
                table.merge(
                    source,
                    _MATCH,
                    source_alias="s",
                    target_alias="t",
                    commit_properties=commit.properties(MIRROR_TABLE, self._watermark),
                )
                .when_matched_delete(predicate=f"s.{_quoted(_DELETE)}")
                .when_matched_update(updates=_SET_ALL, predicate=f"NOT s.{_quoted(_DELETE)}")
                .when_not_matched_insert(updates=_SET_ALL, predicate=f"NOT s.{_quoted(_DELETE)}")
                .execute()
            )
        else:
            # A MERGE of nothing writes no commit; the markers still must be recorded.
            write_deltalake(
                table,
                MIRROR_SCHEMA.empty_table(),
                mode="append",
                commit_properties=commit.properties(MIRROR_TABLE, self._watermark),
            )
        self._watermark = commit.advanced(self._watermark)
        return MirrorWrite(
            events=prepared.events,
            rows_read=prepared.rows_read,
            rows_written=source.num_rows - deleted,
            rows_deleted=deleted,
            unknown_updates=changes.unknown_updates,
        )

    def read_all(self) -> pa.Table:
        """The whole mirror (for checks and small tables)."""
        table = open_table(self.path)
        return table.to_pyarrow_table() if table else MIRROR_SCHEMA.empty_table()

    def _table(self) -> DeltaTable:
        table = open_table(self.path)
        if table is None:
            table = DeltaTable.create(str(self.path), MIRROR_SCHEMA, mode="ignore")
        return table

    def _load(self, needs: BatchNeeds) -> list[MirrorRow]:
        table = open_table(self.path)
        condition = _condition(needs)
        if table is None or condition is None:
            return []
        # DataFusion SQL rather than a pyarrow dataset filter: MERGE writes string_view
        # columns, which pyarrow's Parquet filter cannot compare (pyarrow 26); DataFusion
        # also prunes files and row groups by their statistics.
        query = f"SELECT * FROM mirror WHERE {condition}"
        found = pa.table(QueryBuilder().register("mirror", table).execute(query))
        return [_row(stored) for stored in found.cast(MIRROR_SCHEMA).to_pylist()]


def _condition(needs: BatchNeeds) -> str | None:
    """A SQL predicate selecting exactly the rows ``needs`` names."""
    by_namespace: defaultdict[tuple[str, str], list[str]] = defaultdict(list)
    for db, coll, document_id in needs.keys:
        by_namespace[db, coll].append(document_id)
    db, coll, document_id = (_quoted(name) for name in ("db", "coll", "_documentId"))
    clauses = [
        f"({db} = {_literal(name[0])} AND {coll} = {_literal(name[1])} AND {document_id} IN "
        f"({', '.join(_literal(i) for i in sorted(ids))}))"
        for name, ids in sorted(by_namespace.items())
    ]
    clauses += [
        f"({db} = {_literal(name[0])} AND {coll} = {_literal(name[1])})"
        for name in sorted(needs.namespaces)
    ]
    clauses += [f"{db} = {_literal(name)}" for name in sorted(needs.databases)]
    return " OR ".join(clauses) if clauses else None


def _literal(text: str) -> str:
    # Standard SQL string literal: quotes doubled, backslashes are plain characters.
    return "'" + text.replace("'", "''") + "'"


def _row(stored: dict[str, Any]) -> MirrorRow:
    return MirrorRow(
        db=stored["db"],
        coll=stored["coll"],
        document_id=stored["_documentId"],
        document_key=stored["documentKey"],
        token=stored["_id"],
        cluster_time=stored["clusterTime"],
        _text=stored["fullDocument"],
    )


def _merge_source(rows: dict[RowKey, MirrorRow | None]) -> pa.Table:
    """The MERGE's source: one row per touched key, sorted by key; deletions flagged.

    Built column by column: ``Table.from_pylist`` over per-row dicts took a third of a
    large batch's mirror time.
    """
    keys = sorted(rows)
    found = [rows[key] for key in keys]
    columns = {
        "db": [key[0] for key in keys],
        "coll": [key[1] for key in keys],
        "documentKey": [row.document_key if row else None for row in found],
        "fullDocument": [row.full_document() if row else None for row in found],
        "_id": [row.token if row else None for row in found],
        "clusterTime": [dict(row.cluster_time) if row else None for row in found],
        "_documentId": [key[2] for key in keys],
        _DELETE: [row is None for row in found],
    }
    return pa.Table.from_pydict(columns, schema=_MERGE_SOURCE_SCHEMA)
