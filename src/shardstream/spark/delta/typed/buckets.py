"""The buckets of a collection's typed tables: ``_bucket``, their Delta partition column.

A document's bucket is ``crc32(_documentId) mod B``, ``_documentId`` being its ``_id`` as
canonical Extended JSON (UTF-8), so a document stays in one bucket for its whole life, in
its mirror and in its history, whichever process writes it (the driver's sink or a
collection task).  ``B`` is fixed when the table is created and kept in its Delta
description (delta-rs refuses table properties it does not know), as the bucketed
mirror's is: a different ``B`` later would look for documents in buckets that do not hold
them.

Why: delta-rs 1.6.6's MERGE rewrites only the files holding a matched row, but it reads
every file of the target unless the predicate names partition values as literals.  With
``t._bucket IN (<the batch's buckets>)`` in the MERGE's predicate, a batch reads and
rewrites the files of the buckets it touches, not the collection's whole table.  A
history, written without a MERGE (``history_files.py``), reads those buckets' files itself.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from shardstream.errors import SinkError
from shardstream.spark.delta.mirror.prepare import quoted
from shardstream.spark.ingest import MAX_BUCKETS

BUCKET: Final = "_bucket"
BUCKET_FIELD: Final = pa.field(BUCKET, pa.int32())
_DESCRIPTION: Final = (
    "shardstream collection table in {buckets} buckets: crc32(_documentId) mod {buckets}"
)
_BUCKETS_IN: Final = re.compile(r"^shardstream collection table in (\d+) buckets: ")


def description(buckets: int) -> str:
    """The description a new table carries: its bucket count, and how a bucket is found.

    Raises:
        SinkError: ``buckets`` out of range.
    """
    if not 1 <= buckets <= MAX_BUCKETS:
        raise SinkError(f"expected a bucket count from 1 to {MAX_BUCKETS}, got {buckets}")
    return _DESCRIPTION.format(buckets=buckets)


def table_buckets(table: DeltaTable, path: Path) -> int:
    """The bucket count the collection table at ``path`` was created with.

    Raises:
        SinkError: the table has none (written by an earlier shardstream).
    """
    metadata = table.metadata()
    found = _BUCKETS_IN.match(metadata.description or "")
    if found is None or BUCKET not in metadata.partition_columns:
        raise SinkError(
            f"expected the collection table {path} partitioned by {BUCKET!r}, its bucket "
            f"count in its description, got partition columns {metadata.partition_columns} "
            f"and description {metadata.description!r:.100}: it was written by an earlier "
            "shardstream; delete the lakehouse's mirror, history and _mirror_state to ingest "
            "it anew"
        )
    return int(found.group(1))


def document_buckets(document_ids: Iterable[str], buckets: int) -> pa.Array:
    """Each document's bucket (``document_ids``: their ``_documentId``), as the column."""
    return pa.array(
        [zlib.crc32(identity.encode()) % buckets for identity in document_ids], pa.int32()
    )


def bucket_literals(column: pa.Array, alias: str = "t") -> str:
    """``<alias>._bucket IN (...)`` over the buckets ``column`` holds: the predicate that
    lets a MERGE read only those buckets' files (``FALSE`` for none)."""
    present = sorted(pc.unique(column.drop_null()).to_pylist())
    if not present:
        return "FALSE"
    return f"{alias}.{quoted(BUCKET)} IN ({', '.join(str(value) for value in present)})"
