"""A collection's SCD type 2 history, ``<root>/history/<db>/<coll>``: one row per version.

Columns: the mirror's typed columns, ``_rescued`` and ``_doc``, then ``__START_AT`` and
``__END_AT`` (the ``_data`` of the resume tokens of the change that made the version and of
the one that ended it: tokens sort in stream order and are unique, unlike cluster times,
which a transaction's changes share), ``_op`` (the starting change's operationType, ``read``
for a snapshot's document), ``_clusterTime`` (the starting change's) and ``_documentId``.
``__END_AT`` is null for a document's current version; a delete ends a version and starts
none; a drop, dropDatabase or rename (away or onto this collection) ends every open version,
and a rename starts the moved documents' versions in the new name's history with ``_op``
``rename``.  Databricks' SCD2 tables (``APPLY CHANGES ... STORED AS SCD TYPE 2``) have this
shape, so their queries work unchanged, e.g. the state at a token ``T``:
``WHERE __START_AT <= T AND (__END_AT IS NULL OR __END_AT > T)``.

The table is partitioned by ``_current`` (``__END_AT IS NULL``): a batch's MERGE reads and
rewrites the current versions' files only, so its cost follows the collection's live
documents, not the history's length (unpartitioned, every batch rewrote nearly every file:
a long ingest slowed down batch after batch); ended versions move to ``_current = false``,
whose files a batch only adds to.  ``WHERE _current`` reads the current state alone.  Then
by ``_bucket``, as the mirror (:mod:`~shardstream.spark.delta.typed.buckets`): of the
current versions, a batch reads and rewrites the buckets it touches only (a batch that
ends the whole collection reads them all).

A batch is one MERGE: its new versions inserted; each document's open version from earlier
batches ended by the batch's first change to it; and, when the batch ends the whole
collection, every other open version ended by ``WHEN NOT MATCHED BY SOURCE``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import pyarrow as pa

from shardstream.errors import SinkError
from shardstream.spark.delta.commits import (
    BatchCommit,
    already_committed,
    committed_watermark,
    open_table,
)
from shardstream.spark.delta.mirror.prepare import quoted, sql_literal
from shardstream.spark.delta.typed.batch_typing import BatchTyping
from shardstream.spark.delta.typed.buckets import (
    BUCKET,
    BUCKET_FIELD,
    bucket_literals,
    document_buckets,
    table_buckets,
)
from shardstream.spark.delta.typed.rows import RESCUED
from shardstream.spark.delta.typed.schema import (
    CLUSTER_TIME,
    DOC,
    DOCUMENT_ID,
    TableKind,
    evolved_table,
    merge_columns,
)
from shardstream.spark.source.rows import CLUSTER_TIME_TYPE

START_AT: Final = "__START_AT"
END_AT: Final = "__END_AT"
OP: Final = "_op"
CURRENT: Final = "_current"
_CLOSE: Final = "_close"
HISTORY_KIND: Final = TableKind(
    (
        pa.field(RESCUED, pa.string()),
        pa.field(DOC, pa.binary()),
        pa.field(START_AT, pa.string()),
        pa.field(END_AT, pa.string()),
        pa.field(OP, pa.string()),
        pa.field(CLUSTER_TIME, CLUSTER_TIME_TYPE),
        pa.field(DOCUMENT_ID, pa.string()),
        pa.field(CURRENT, pa.bool_()),
        BUCKET_FIELD,
    ),
    "history",
    partition_by=(CURRENT, BUCKET),
)
# `t._current` first: delta-rs prunes the MERGE's target files by a partition literal.
_MATCH: Final = (
    f"t.{quoted(CURRENT)} = true AND t.{quoted(DOCUMENT_ID)} = s.{quoted(DOCUMENT_ID)} "
    f"AND t.{quoted(END_AT)} IS NULL AND s.{quoted(_CLOSE)}"
)
_ENDED: Final = {quoted(CURRENT): "false"}


@dataclasses.dataclass(frozen=True, slots=True)
class Change:
    """One step of a collection's batch, in stream order.

    Attributes:
        token: the change's resume token ``_data``.
        operation: its operationType (``insert``, ``update``, ``delete``, ``drop``, ...).
        document_id: the document's ``_id`` as canonical Extended JSON (None: a change to
            the whole collection, which ends every open version).
        text: the document after the change as canonical Extended JSON (None: none,
            e.g. deleted).
        cluster_time: the change's cluster time.
    """

    token: str
    operation: str
    document_id: str | None
    text: str | None
    cluster_time: Mapping[str, int] | None


@dataclasses.dataclass(slots=True)
class _Versions:
    """A batch's versions of one collection, before they are written."""

    rows: list[Change] = dataclasses.field(default_factory=list)
    identities: list[str] = dataclasses.field(default_factory=list)  # each row's _documentId
    ends: list[str | None] = dataclasses.field(default_factory=list)
    # Open versions stored by earlier batches: ended by the document's first change...
    stored_ends: dict[str, str] = dataclasses.field(default_factory=dict)
    # ... or, when the collection ended before it, by that.
    collection_end: str | None = None


def _versions(changes: Sequence[Change]) -> _Versions:
    found = _Versions()
    open_rows: dict[str, int] = {}  # document id -> index of its open version in this batch
    for change in changes:
        identity = change.document_id
        if identity is None:  # the collection ends
            for index in open_rows.values():
                found.ends[index] = change.token
            open_rows.clear()
            if found.collection_end is None:
                found.collection_end = change.token
            continue
        if identity in open_rows:
            found.ends[open_rows.pop(identity)] = change.token
        elif found.collection_end is None and identity not in found.stored_ends:
            found.stored_ends[identity] = change.token
        if change.text is not None:
            open_rows[identity] = len(found.rows)
            found.rows.append(change)
            found.identities.append(identity)
            found.ends.append(None)
    return found


def write_history(
    path: Path,
    name: str,
    changes: Sequence[Change],
    commit: BatchCommit,
    max_columns: int,
    *,
    title: str,
    buckets: int,
    typing: BatchTyping | None = None,
) -> int | None:
    """Write a batch's versions of one collection into its history at ``path``.

    ``name`` is the table's name in its commit markers, ``title`` the collection's
    ``<db>.<coll>`` (``paths.table_name``, ``full_name``); ``buckets`` the bucket count if
    this creates the table (a table keeps its own); ``typing`` the batch's typing work
    shared with the collection's mirror.

    Returns:
        The versions inserted, or None when the table already has the batch (a replay).

    Raises:
        SinkError: a table not partitioned as this version writes it (an earlier one's).
    """
    stored = open_table(path)
    if already_committed(stored, commit, name):
        return None
    if stored is not None:
        if CURRENT not in stored.metadata().partition_columns:
            raise SinkError(
                f"expected the history table {path} partitioned by {CURRENT!r}, got partition "
                f"columns {stored.metadata().partition_columns}: it was written by an earlier "
                "shardstream; delete it (and the mirror's state) to ingest it anew"
            )
        buckets = table_buckets(stored, path)
    # A stream restarted below this table's watermark (its checkpoint lost after a crash
    # that left the table ahead) gives it changes it holds: their versions are stored.
    mark = committed_watermark(stored)
    found = _versions([change for change in changes if mark is None or change.token > mark])
    if not found.rows and (stored is None or (not found.stored_ends and not found.collection_end)):
        return 0  # no version to add, nor a stored one to end
    documents = [change.text for change in found.rows if change.text is not None]
    shared = typing or BatchTyping()
    table, columns = evolved_table(
        path, HISTORY_KIND, documents, max_columns, title, shared, stored=stored, buckets=buckets
    )
    closing = list(found.stored_ends.items())
    rows: list[str | None] = [*documents, *(None for _ in closing)]
    arrays = shared.project(columns, rows)
    arrays[DOC] = shared.encoded(rows)
    arrays[START_AT] = pa.array([*(c.token for c in found.rows), *(None for _ in closing)])
    arrays[END_AT] = pa.array([*found.ends, *(end for _, end in closing)], pa.string())
    arrays[OP] = pa.array([*(c.operation for c in found.rows), *(None for _ in closing)])
    arrays[CLUSTER_TIME] = pa.array(
        [*(c.cluster_time for c in found.rows), *(None for _ in closing)], CLUSTER_TIME_TYPE
    )
    identities = [*found.identities, *(identity for identity, _ in closing)]
    arrays[DOCUMENT_ID] = pa.array(identities)
    arrays[CURRENT] = pa.array([*(end is None for end in found.ends), *(False for _ in closing)])
    arrays[BUCKET] = document_buckets(identities, buckets)
    arrays[_CLOSE] = pa.array([False] * len(found.rows) + [True] * len(closing))
    source = pa.table(arrays)
    properties = commit.properties(name, mark)  # a schema commit carries none
    match = _MATCH
    if found.collection_end is None:
        # Only the touched buckets' files are read. A batch that ends the collection ends
        # every open version, which the MERGE finds only if it reads every bucket.
        match = f"{bucket_literals(arrays[BUCKET])} AND {_MATCH}"
    merge = (
        table.merge(source, match, source_alias="s", target_alias="t", commit_properties=properties)
        .when_matched_update(updates={quoted(END_AT): f"s.{quoted(END_AT)}", **_ENDED})
        .when_not_matched_insert(
            updates=merge_columns(table, source.column_names), predicate=f"NOT s.{quoted(_CLOSE)}"
        )
    )
    if found.collection_end is not None:
        merge = merge.when_not_matched_by_source_update(
            updates={quoted(END_AT): sql_literal(found.collection_end), **_ENDED},
            predicate=f"t.{quoted(END_AT)} IS NULL",
        )
    merge.execute()
    return len(found.rows)
