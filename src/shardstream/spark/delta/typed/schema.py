"""One collection's typed Delta table (a mirror or a history): its columns kept up to date.

:func:`evolved_table` opens (or creates: a mirror with the change data feed on) the table and makes
its schema hold a batch's documents: new fields become columns by ``ALTER TABLE ADD
COLUMNS`` (logged once each); a column whose type widens (int32 -> int64 -> double, a struct
gaining fields, ``_id`` turning to JSON text) cannot be altered in place by delta-rs, so the
table is rewritten once, every row projected again from its ``_doc`` (the exact BSON, so
nothing depends on the old column's values).  Both are commits of their own, before the
batch's: replaying the batch after a crash finds them done and changes nothing.

:func:`merge_columns` gives the MERGE's ``SET`` of every stored column from the source.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
from deltalake import DeltaTable, Field, write_deltalake

from shardstream.resume_token.token_json import loads
from shardstream.spark.delta.commits import table_rows
from shardstream.spark.delta.mirror.prepare import quoted
from shardstream.spark.delta.typed.batch_typing import BatchTyping
from shardstream.spark.delta.typed.buckets import description
from shardstream.spark.delta.typed.rows import ColumnSet
from shardstream.transform.raw.extended_json import bson_to_json

_log = logging.getLogger(__name__)
CDF_PROPERTY: Final = "delta.enableChangeDataFeed"
DOC: Final = "_doc"
DOCUMENT_ID: Final = "_documentId"


@dataclasses.dataclass(frozen=True, slots=True)
class TableKind:
    """What distinguishes a mirror from a history: its system columns (after the typed ones).

    Attributes:
        system: the system columns' Arrow fields (``_rescued`` first, ``_doc``, ...).
        label: the table's kind in log lines (``mirror``, ``history``).
        partition_by: the system columns the table is partitioned by.
        change_data_feed: whether the table is created with Delta's change data feed on
            (a mirror: its MERGEs write the change files; a history: its rows are its
            changes, and its commits write none).
    """

    system: tuple[pa.Field, ...]
    label: str
    partition_by: tuple[str, ...] = ()
    change_data_feed: bool = True

    @property
    def configuration(self) -> dict[str, str | None]:
        """The table properties it is created with."""
        return {CDF_PROPERTY: "true"} if self.change_data_feed else {}

    @property
    def reserved(self) -> tuple[str, ...]:
        """The names no field column may take: every collection table's system columns, so
        that a collection's mirror and history type a document alike (and share the work)."""
        return RESERVED_NAMES


CLUSTER_TIME: Final = "_clusterTime"
"""The cluster time column of both kinds (the last change's, or the version's start)."""
RESERVED_NAMES: Final = (
    "_rescued",
    "_doc",
    "_token",
    "_clusterTime",
    "_documentId",
    "__START_AT",
    "__END_AT",
    "_op",
    "_current",
    "_bucket",
)


def decode_document(raw: bytes) -> dict[str, Any]:
    """A ``_doc`` value decoded as the batches decode documents (``token_json.loads`` of its
    canonical Extended JSON: Symbol, Undefined and DBPointer kept distinct), so a rewrite
    projects every row as its batch did."""
    document: dict[str, Any] = loads(bson_to_json(raw))
    return document


def evolved_table(
    path: Path,
    kind: TableKind,
    texts: Sequence[str],
    max_columns: int,
    name: str,
    typing: BatchTyping | None = None,
    *,
    stored: DeltaTable | None,
    buckets: int,
) -> tuple[DeltaTable, ColumnSet]:
    """The table at ``path`` with columns for the documents of ``texts`` (their canonical
    Extended JSON; created if missing), and them.

    Args:
        name: the collection's ``<db>.<coll>``, the created table's metadata name.
        typing: the batch's shared typing work (None: none shared).
        stored: the table as the caller opened it to check its markers (None: it does not
            exist yet), so a batch reads each table's log once.
        buckets: a created table's bucket count (``typed.buckets``).
    """
    table = stored
    schema = _schema(table)
    before = ColumnSet.of_schema(schema, kind.reserved, max_columns)
    columns = (typing or BatchTyping()).fold(before, texts)
    wanted = [*columns.arrow_fields(), *kind.system]
    if table is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        DeltaTable.create(
            str(path),
            pa.schema(wanted),
            mode="ignore",
            partition_by=list(kind.partition_by) or None,
            name=name,
            description=description(buckets),
            configuration=kind.configuration,
        )
        _log.info("%s %s: created with %d columns", kind.label, path, len(wanted))
        return DeltaTable(str(path)), columns
    assert schema is not None
    if columns.widened_from(before):
        _rewrite(table, kind, columns)
        _log.info("%s %s: column types widened, table rewritten from _doc", kind.label, path)
        return DeltaTable(str(path)), columns
    added = [field for field in wanted if field.name not in schema.names]
    if added:
        table.alter.add_columns([Field.from_arrow(field) for field in added])
        for field in added:
            _log.info("%s %s: new column %r (%s)", kind.label, path, field.name, field.type)
        table = DeltaTable(str(path))
    return table, columns


def _schema(table: DeltaTable | None) -> pa.Schema | None:
    if table is None:
        return None
    return pa.schema(table.schema().to_arrow())


def _rewrite(table: DeltaTable, kind: TableKind, columns: ColumnSet) -> None:
    """Every row projected again from its ``_doc`` under ``columns``, in one overwrite."""
    stored = table_rows(table)
    documents = [decode_document(raw) for raw in stored[DOC].to_pylist()]
    arrays = columns.project(documents)
    for field in kind.system:
        if field.name not in arrays:
            arrays[field.name] = stored[field.name].cast(field.type)
    schema = pa.schema([*columns.arrow_fields(), *kind.system])
    rewritten = pa.Table.from_pydict({name: arrays[name] for name in schema.names}, schema=schema)
    write_deltalake(
        table,
        rewritten,
        mode="overwrite",
        schema_mode="overwrite",
        partition_by=list(kind.partition_by) or None,
        description=table.metadata().description,  # the bucket count with it
    )


def merge_columns(table: DeltaTable, source: Sequence[str]) -> dict[str, str]:
    """``{"col": "s.col"}`` for every column of ``table`` the source holds."""
    stored = _schema(table)
    names = stored.names if stored is not None else []
    return {quoted(name): f"s.{quoted(name)}" for name in names if name in source}
