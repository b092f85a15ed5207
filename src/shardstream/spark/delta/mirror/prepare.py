"""Sink: a mirror batch read and applied, up to the MERGE's source (nothing written).

:func:`prepare_events` is the mirror's work on one batch before its write: split off the
documents the batch only sets or deletes (:mod:`shardstream.spark.delta.mirror.plain`), read
only the stored rows the rest can touch (one scan of the namespaces involved, matched in
Arrow: the keys its updates read, plus whole collections or databases a drop or rename acts
on), apply those events in token order
(:mod:`shardstream.spark.delta.mirror.state`), and return every touched row's final state as
the MERGE's source.  It runs in the driver (:class:`~shardstream.spark.delta.mirror.table.
DeltaMirror`) or in worker processes, a part of the batch each
(:mod:`shardstream.spark.delta.mirror.workers`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import QueryBuilder

from shardstream.spark.delta.commits import open_table
from shardstream.spark.delta.mirror.keys import RowKey
from shardstream.spark.delta.mirror.plain import split_plain
from shardstream.spark.delta.mirror.state import (
    BatchNeeds,
    MirrorChanges,
    MirrorRow,
    Version,
    apply_batch,
    batch_needs,
)
from shardstream.spark.source.rows import CLUSTER_TIME_TYPE

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
DELETE: Final = "_delete"  # the MERGE source's flag: the row is gone
MERGE_SOURCE_SCHEMA: Final = MIRROR_SCHEMA.append(pa.field(DELETE, pa.bool_()))
# Above this many namespaces and databases in one batch, the scan lists none of them in its
# SQL and reads every row: an OR chain of 10,000 clauses overflowed DataFusion's stack, and
# this keeps far below any such length (256 was checked to run).
_MAX_SQL_NAMESPACES: Final = 256
MERGE_KEY_ORDER: Final = [(name, "ascending") for name in ("db", "coll", "_documentId")]
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


def quoted(name: str) -> str:
    """A column name quoted for DataFusion SQL, which folds unquoted ones to lower case."""
    return f'"{name}"'


@dataclasses.dataclass(frozen=True, slots=True)
class PreparedBatch:
    """A batch applied to the rows it touches, not yet written.

    Attributes:
        events: events applied (those above the mirror's watermark).
        rows_read: stored rows read from the mirror.
        source: the MERGE's source: the final state of every touched row (the mirror's
            columns and ``_delete``), one per key, sorted by key.
        unknown_updates: updates of documents the mirror never held (lenient mode).
        parts: the processes that prepared it (1: the driver alone; ``mirror_workers``).
        versions: when asked for, the document each update left and each document a rename
            moved (:data:`VERSION_SCHEMA`, token order; ``state.apply_batch``).
    """

    events: int
    rows_read: int
    source: pa.Table
    unknown_updates: int = 0
    parts: int = 1
    versions: pa.Table | None = None


VERSION_SCHEMA: Final = pa.schema(
    [
        pa.field("_id", pa.string()),
        pa.field("db", pa.string()),
        pa.field("coll", pa.string()),
        pa.field("_documentId", pa.string()),
        pa.field("operationType", pa.string()),
        pa.field("fullDocument", pa.string()),
    ]
)


def prepare_events(
    path: Path,
    fresh: pa.Table,
    *,
    strict: bool,
    snapshot_read_end: tuple[int, int] | None,
    record_versions: bool = False,
) -> PreparedBatch:
    """Apply events above the watermark (token order, :data:`EVENT_COLUMNS`) to the rows of
    the mirror at ``path`` they touch: the work of :meth:`DeltaMirror.prepare`, in whichever
    process runs it."""
    return prepare_with(
        lambda needs: load_rows(path, needs),
        fresh,
        strict=strict,
        snapshot_read_end=snapshot_read_end,
        record_versions=record_versions,
    )


def prepare_with(
    load: Callable[[BatchNeeds], list[MirrorRow]],
    fresh: pa.Table,
    *,
    strict: bool,
    snapshot_read_end: tuple[int, int] | None,
    record_versions: bool = False,
) -> PreparedBatch:
    """:func:`prepare_events` with the stored rows a batch needs given by ``load`` (a keyed
    read of the table, or a selection from a bucket already in memory)."""
    split = split_plain(fresh)  # documents only set or deleted: no row objects
    rows = split.events.to_pylist()
    stored = load(batch_needs(rows))
    recorded: list[Version] | None = [] if record_versions else None
    changes = apply_batch(
        rows, stored, strict=strict, snapshot_read_end=snapshot_read_end, versions=recorded
    )
    source = joined_source(changes, split.plain)
    return PreparedBatch(
        fresh.num_rows,
        len(stored),
        source,
        changes.unknown_updates,
        versions=None if recorded is None else versions_table(recorded),
    )


def versions_table(versions: list[Version]) -> pa.Table:
    """Recorded versions as a :data:`VERSION_SCHEMA` table."""
    return pa.Table.from_pydict(
        {
            "_id": [token for token, _, _, _ in versions],
            "db": [key[0] for _, key, _, _ in versions],
            "coll": [key[1] for _, key, _, _ in versions],
            "_documentId": [key[2] for _, key, _, _ in versions],
            "operationType": [operation for _, _, operation, _ in versions],
            "fullDocument": [text for _, _, _, text in versions],
        },
        schema=VERSION_SCHEMA,
    )


def joined_source(changes: MirrorChanges, plain: pa.Table | None) -> pa.Table:
    """The MERGE's source: the rows applied in Python and the plain ones, sorted by key."""
    source = merge_source(changes.rows)
    if plain is None or not plain.num_rows:
        return source
    return pa.concat_tables([source, plain.cast(MERGE_SOURCE_SCHEMA)]).sort_by(MERGE_KEY_ORDER)


def load_rows(path: Path, needs: BatchNeeds) -> list[MirrorRow]:
    """The mirror's rows ``needs`` names (one scan, filtered by namespace in DataFusion and
    by document in Arrow)."""
    table = open_table(path)
    if table is None or not (needs.keys or needs.namespaces or needs.databases):
        return []
    # Only namespace equalities go into the SQL (DataFusion prunes files and row groups by
    # them): with one literal per document, DataFusion (delta-rs 1.6) overflowed its stack
    # and crashed the process from about 10,000 literals, a batch's worth of updates; and a
    # scan matched by a hash of the ids in Arrow was faster than the literal list at every
    # size measured (benchmarks/README.md).
    condition = _namespace_condition(needs)
    query = "SELECT * FROM mirror" + (f" WHERE {condition}" if condition else "")
    wanted = _wanted(needs)
    found = [
        _selected(pa.record_batch(batch).cast(MIRROR_SCHEMA), wanted)
        for batch in QueryBuilder().register("mirror", table).execute(query)
    ]
    rows = pa.Table.from_batches(found, MIRROR_SCHEMA)
    return [_row(stored) for stored in rows.to_pylist()]


def select_rows(stored: pa.Table, needs: BatchNeeds) -> list[MirrorRow]:
    """The rows of ``stored`` (:data:`MIRROR_SCHEMA`) that ``needs`` names."""
    if not (needs.keys or needs.namespaces or needs.databases):
        return []
    wanted = _wanted(needs)
    found = [_selected(batch, wanted) for batch in stored.to_batches()]
    rows = pa.Table.from_batches(found, MIRROR_SCHEMA)
    return [_row(row) for row in rows.to_pylist()]


def _namespace_condition(needs: BatchNeeds) -> str | None:
    """A SQL predicate selecting the namespaces and databases ``needs`` touches (None: too
    many to list safely; the scan then reads every row and Arrow selects)."""
    namespaces = {(db, coll) for db, coll, _ in needs.keys} | needs.namespaces
    if len(namespaces) + len(needs.databases) > _MAX_SQL_NAMESPACES:
        return None
    db, coll = quoted("db"), quoted("coll")
    clauses = [
        f"({db} = {sql_literal(name[0])} AND {coll} = {sql_literal(name[1])})"
        for name in sorted(namespaces)
    ]
    clauses += [f"{db} = {sql_literal(name)}" for name in sorted(needs.databases)]
    return " OR ".join(clauses)


@dataclasses.dataclass(frozen=True, slots=True)
class _Wanted:
    """What a batch reads, as Arrow value sets of keys joined by NUL (no namespace and no
    Extended JSON text holds one): ``db coll _documentId``, ``db coll``, ``db``."""

    documents: pa.Array
    namespaces: pa.Array
    databases: pa.Array


def _wanted(needs: BatchNeeds) -> _Wanted:
    return _Wanted(
        pa.array(sorted(f"{db}\0{coll}\0{i}" for db, coll, i in needs.keys), pa.string()),
        pa.array(sorted(f"{db}\0{coll}" for db, coll in needs.namespaces), pa.string()),
        pa.array(sorted(needs.databases), pa.string()),
    )


def _selected(batch: pa.RecordBatch, wanted: _Wanted) -> pa.RecordBatch:
    """The rows of ``batch`` that ``wanted`` names, exactly: one hash lookup per row and
    kind, however many namespaces (a null field selects nothing)."""
    namespace = pc.binary_join_element_wise(batch["db"], batch["coll"], "\0")
    document = pc.binary_join_element_wise(namespace, batch["_documentId"], "\0")
    mask = pc.or_kleene(
        pc.or_kleene(pc.is_in(document, wanted.documents), pc.is_in(namespace, wanted.namespaces)),
        pc.is_in(batch["db"], wanted.databases),
    )
    return batch.filter(mask)


def sql_literal(text: str) -> str:
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


def merge_source(rows: Mapping[RowKey, MirrorRow | None]) -> pa.Table:
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
        DELETE: [row is None for row in found],
    }
    return pa.Table.from_pydict(columns, schema=MERGE_SOURCE_SCHEMA)
