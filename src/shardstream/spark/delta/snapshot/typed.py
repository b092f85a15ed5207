"""Sink: a snapshot's documents into the per-collection tables, each created in one commit.

``ingest --snapshot`` in the per-collection layout loads the snapshot into the change log and
the document state (:mod:`shardstream.spark.delta.snapshot.tables`); this module then creates
each collection's typed mirror, and its history (one version per document, ``_op`` ``read``,
``__START_AT`` the high-water-mark token at T0, which sorts before every event of the stream
that starts there), from the state's rows.  Each table is created with all its rows and the
snapshot's marks in one commit, so a table either holds the snapshot or does not exist: a
crash part way leaves tables that the next run's :func:`complete_collections` finishes.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from shardstream.spark.delta.commits import committed_watermark, open_table, table_rows
from shardstream.spark.delta.snapshot.marks import SNAPSHOT_OPERATION, SnapshotMarks, snapshot_times
from shardstream.spark.delta.typed.batch_typing import BatchTyping
from shardstream.spark.delta.typed.buckets import BUCKET, description, document_buckets
from shardstream.spark.delta.typed.history import HISTORY_KIND, OP
from shardstream.spark.delta.typed.history_files import CURRENT, END_AT, START_AT
from shardstream.spark.delta.typed.mirror import MIRROR_KIND, TOKEN
from shardstream.spark.delta.typed.paths import (
    HISTORY_DIR,
    MIRROR_DIR,
    STATE_TABLE,
    full_name,
    table_path,
)
from shardstream.spark.delta.typed.rows import ColumnSet
from shardstream.spark.delta.typed.schema import (
    CLUSTER_TIME,
    DOC,
    DOCUMENT_ID,
    TableKind,
)


def complete_collections(
    root: str | Path, *, history: bool, max_columns: int, buckets: int
) -> int | None:
    """Create the collection tables of the state's snapshot that do not exist yet, each in
    ``buckets`` buckets (``typed.buckets``).

    Returns:
        The tables created, or None when there is nothing to do (no snapshot in the state,
        or the stream has moved past it: its batches create the tables from then on).
    """
    root = Path(root)
    state = open_table(root / STATE_TABLE)
    times = snapshot_times(state)
    if state is None or times is None:
        return None
    token = committed_watermark(state)
    if token is None or state.version() != 0:  # the creating commit alone: no batch yet
        return None
    marks = SnapshotMarks(start=times[0], read_end=times[1], token=token)
    rows: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in table_rows(state).to_pylist():
        rows[(row["db"], row["coll"])].append(row)
    created = 0
    for (db, coll), documents in sorted(rows.items()):
        typing = BatchTyping()  # the mirror's and the history's columns typed once
        targets = [(MIRROR_DIR, MIRROR_KIND)] + ([(HISTORY_DIR, HISTORY_KIND)] if history else [])
        for kind_dir, kind in targets:
            path = table_path(root, kind_dir, db, coll)
            if open_table(path) is not None:
                continue
            table = _snapshot_table(kind, documents, typing, max_columns, buckets)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_deltalake(
                str(path),
                table,
                mode="error",
                partition_by=list(kind.partition_by) or None,
                name=full_name(db, coll),
                description=description(buckets),
                configuration=kind.configuration,
                commit_properties=marks.properties(),
            )
            created += 1
    return created


def _snapshot_table(
    kind: TableKind,
    rows: list[dict[str, Any]],
    typing: BatchTyping,
    max_columns: int,
    buckets: int,
) -> pa.Table:
    texts = [row["fullDocument"] for row in rows]
    columns = typing.fold(ColumnSet.of_schema(None, kind.reserved, max_columns), texts)
    arrays = typing.project(columns, texts)
    arrays[DOC] = typing.encoded(texts)
    arrays[DOCUMENT_ID] = pa.array([row["_documentId"] for row in rows], pa.string())
    arrays[BUCKET] = document_buckets((row["_documentId"] for row in rows), buckets)
    tokens = pa.array([row["_id"] for row in rows], pa.string())
    times = pa.array([row["clusterTime"] for row in rows], kind_field(kind, CLUSTER_TIME).type)
    if kind is MIRROR_KIND:
        arrays[TOKEN] = tokens
        arrays[CLUSTER_TIME] = times
    else:
        arrays[START_AT] = tokens
        arrays[END_AT] = pa.nulls(len(rows), pa.string())
        arrays[OP] = pa.array([SNAPSHOT_OPERATION] * len(rows), pa.string())
        arrays[CLUSTER_TIME] = times
        arrays[CURRENT] = pa.array([True] * len(rows), pa.bool_())
    schema = pa.schema([*columns.arrow_fields(), *kind.system])
    return pa.Table.from_pydict({name: arrays[name] for name in schema.names}, schema=schema)


def kind_field(kind: TableKind, name: str) -> pa.Field:
    """The system field ``name`` of a table kind."""
    return next(field for field in kind.system if field.name == name)
