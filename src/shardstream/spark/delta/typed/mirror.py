"""A collection's typed mirror, ``<root>/mirror/<db>/<coll>``: its current documents.

Columns: ``_id`` (typed), one typed column per top-level field
(:mod:`shardstream.spark.delta.typed.rows`), then ``_rescued`` (relaxed Extended JSON of the
fields no column holds; null when all fit), ``_doc`` (the document's exact BSON), ``_token``
(the ``_data`` of the last change's resume token), ``_clusterTime``, ``_documentId`` (the
``_id`` as canonical Extended JSON: the MERGE key, which tells ``1`` from ``1.0``) and
``_bucket``, the table's partition column (:mod:`~shardstream.spark.delta.typed.buckets`):
a batch's MERGE reads and rewrites the files of the buckets it touches only.

A batch writes the final state of every document it touched with one MERGE (delete, update,
insert) carrying the batch's markers, as the one-table mirror does; the table's change data
feed (``delta.enableChangeDataFeed``) then holds each batch's inserts, update pre- and
post-images and deletes.  A drop or dropDatabase empties the table (its rows are deleted, the
table and its schema stay: the change feed shows the deletes); a rename deletes the rows here
and inserts them into the new name's table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, NamedTuple

import pyarrow as pa

from shardstream.spark.delta.commits import (
    BatchCommit,
    already_committed,
    committed_watermark,
    open_table,
)
from shardstream.spark.delta.mirror.prepare import quoted
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

TOKEN: Final = "_token"
_DELETE: Final = "_delete"
MIRROR_KIND: Final = TableKind(
    (
        pa.field(RESCUED, pa.string()),
        pa.field(DOC, pa.binary()),
        pa.field(TOKEN, pa.string()),
        pa.field(CLUSTER_TIME, CLUSTER_TIME_TYPE),
        pa.field(DOCUMENT_ID, pa.string()),
        BUCKET_FIELD,
    ),
    "mirror",
    partition_by=(BUCKET,),
)
_MATCH: Final = f"t.{quoted(DOCUMENT_ID)} = s.{quoted(DOCUMENT_ID)}"


class FinalRow(NamedTuple):
    """A document's state after a batch (a tuple: a batch makes one per document, and a
    frozen dataclass costs several times as much to build).

    Attributes:
        document_id: its ``_id`` as canonical Extended JSON.
        text: the document as canonical Extended JSON (None: deleted); the typing
            decodes it only where the compiled columns leave a value to Python.
        token: the ``_data`` of the last change to it.
        cluster_time: that change's cluster time (``{"t", "i"}``).
    """

    document_id: str
    text: str | None
    token: str
    cluster_time: Mapping[str, int] | None


def write_mirror(
    path: Path,
    name: str,
    rows: Sequence[FinalRow],
    versions: Sequence[str],
    commit: BatchCommit,
    max_columns: int,
    *,
    title: str,
    buckets: int,
    typing: BatchTyping | None = None,
) -> int | None:
    """Merge a batch's final rows of one collection into its mirror at ``path``.

    Args:
        name: the table's name in its commit markers (``paths.table_name``).
        title: the collection's ``<db>.<coll>`` (``paths.full_name``).
        typing: the batch's typing work shared with the collection's history.
        versions: every document version of the batch (its text), in stream order: the
            columns are inferred from all of them, so a batch's cut never changes a
            column's type.
        max_columns: the most field columns the table gets.
        buckets: the bucket count of the table if this creates it (a table keeps its own).

    Returns:
        The rows merged, or None when the table already has the batch (a replay).

    Raises:
        SinkError: a table without buckets (written by an earlier shardstream).
    """
    stored = open_table(path)
    if already_committed(stored, commit, name):
        return None
    if stored is not None:
        buckets = table_buckets(stored, path)
    # A stream restarted below this table's watermark (its checkpoint lost after a crash
    # that left the table ahead) gives it final rows it holds already. A deletion carries
    # no token: deleting a row again deletes nothing.
    mark = committed_watermark(stored)
    rows = [row for row in rows if mark is None or not row.token or row.token > mark]
    if not rows:
        return 0
    # A collection whose documents the batch inserted and deleted still gets its (empty)
    # table, as it would had the batch been cut between the two: tables never depend on cuts.
    shared = typing or BatchTyping()
    table, columns = evolved_table(
        path, MIRROR_KIND, versions, max_columns, title, shared, stored=stored, buckets=buckets
    )
    documents = [row.text for row in rows]
    arrays = shared.project(columns, documents)
    arrays[DOC] = shared.encoded(documents)
    arrays[TOKEN] = pa.array([row.token for row in rows], pa.string())
    arrays[CLUSTER_TIME] = pa.array([row.cluster_time for row in rows], CLUSTER_TIME_TYPE)
    arrays[DOCUMENT_ID] = pa.array([row.document_id for row in rows], pa.string())
    arrays[BUCKET] = document_buckets((row.document_id for row in rows), buckets)
    arrays[_DELETE] = pa.array([row.text is None for row in rows], pa.bool_())
    source = pa.table(arrays)
    updates = merge_columns(table, source.column_names)
    properties = commit.properties(name, mark)  # a schema commit carries none
    (
        table.merge(
            source,
            f"{bucket_literals(arrays[BUCKET])} AND {_MATCH}",
            source_alias="s",
            target_alias="t",
            commit_properties=properties,
        )
        .when_matched_delete(predicate=f"s.{quoted(_DELETE)}")
        .when_matched_update(updates=updates, predicate=f"NOT s.{quoted(_DELETE)}")
        .when_not_matched_insert(updates=updates, predicate=f"NOT s.{quoted(_DELETE)}")
        .execute()
    )
    return int(source.num_rows)
