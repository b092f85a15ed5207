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

The table is partitioned by ``_current`` (``__END_AT IS NULL``), then by ``_bucket`` as the
mirror (:mod:`~shardstream.spark.delta.typed.buckets`): ``WHERE _current`` reads the current
state alone, and a batch reads only the current versions of the buckets it changes, and
rewrites only the files holding a version it ends (:mod:`history_files`: no MERGE, no change
data feed; ended versions move to ``_current = false``, whose files a batch only adds to),
so its cost follows the batch, not the collection's size or the history's length.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, NamedTuple

import pyarrow as pa

from shardstream.errors import SinkError
from shardstream.spark.delta.commits import (
    BatchCommit,
    already_committed,
    committed_watermark,
    open_table,
)
from shardstream.spark.delta.typed.batch_typing import BatchTyping
from shardstream.spark.delta.typed.buckets import (
    BUCKET,
    BUCKET_FIELD,
    document_buckets,
    table_buckets,
)
from shardstream.spark.delta.typed.history_files import (
    CURRENT,
    END_AT,
    START_AT,
    HistoryBatch,
    commit_history,
)
from shardstream.spark.delta.typed.rows import RESCUED
from shardstream.spark.delta.typed.schema import (
    CDF_PROPERTY,
    CLUSTER_TIME,
    DOC,
    DOCUMENT_ID,
    TableKind,
    evolved_table,
)
from shardstream.spark.source.rows import CLUSTER_TIME_TYPE

OP: Final = "_op"
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
    change_data_feed=False,
)


class Change(NamedTuple):
    """One step of a collection's batch, in stream order (a tuple: a batch makes one per
    change, and a frozen dataclass costs several times as much to build).

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
        if stored.metadata().configuration.get(CDF_PROPERTY) == "true":
            raise SinkError(
                f"expected the history table {path} without the change data feed "
                f"({CDF_PROPERTY}), got it on: it was written by an earlier shardstream, "
                "whose commits this one's (no change files) would contradict; delete it "
                "(and the mirror's state) to ingest it anew"
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
    arrays = shared.project(columns, documents)
    arrays[DOC] = shared.encoded(documents)
    arrays[START_AT] = pa.array([change.token for change in found.rows], pa.string())
    arrays[END_AT] = pa.array(found.ends, pa.string())
    arrays[OP] = pa.array([change.operation for change in found.rows], pa.string())
    arrays[CLUSTER_TIME] = pa.array(
        [change.cluster_time for change in found.rows], CLUSTER_TIME_TYPE
    )
    arrays[DOCUMENT_ID] = pa.array(found.identities, pa.string())
    arrays[CURRENT] = pa.array([end is None for end in found.ends], pa.bool_())
    arrays[BUCKET] = document_buckets(found.identities, buckets)
    batch = HistoryBatch(pa.table(arrays), found.stored_ends, found.collection_end)
    # A schema commit carries no markers: the batch's own commit does.
    commit_history(table, path, buckets, batch, commit.properties(name, mark))
    return len(found.rows)
