"""The bucketed mirror's table: its schema, its bucket count, and a bucket's files.

``<root>/mirror`` holds the one-table mirror's columns
(:data:`~shardstream.spark.delta.mirror.prepare.MIRROR_SCHEMA`) plus ``bucket``, its Delta
partition column: ``pmod(xxhash64(get_json_object(documentKey, '$._id')), B)``, computed by
Spark (:mod:`shardstream.spark.ingest.task_batches`), so every event of one document, and
the document itself, fall in one bucket whatever its namespace or shard key (a rename keeps
the ``_id``, so a renamed document stays in its bucket).  ``B`` is fixed when the table is
created and kept in its Delta description (delta-rs refuses table properties it does not
know): a different ``B`` later would scatter documents over buckets that do not hold them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import pyarrow as pa
from deltalake import DeltaTable

from shardstream.errors import SinkError
from shardstream.spark.delta.commits import StoredFile, open_table
from shardstream.spark.delta.mirror.prepare import MIRROR_SCHEMA
from shardstream.spark.ingest import MAX_BUCKETS

BUCKET_COLUMN: Final = "bucket"
BUCKETED_SCHEMA: Final = MIRROR_SCHEMA.append(pa.field(BUCKET_COLUMN, pa.int32()))
_DESCRIPTION: Final = (
    "shardstream mirror in {buckets} buckets: "
    "pmod(xxhash64(get_json_object(documentKey, '$._id')), {buckets})"
)
_BUCKETS_IN: Final = re.compile(r"^shardstream mirror in (\d+) buckets: ")


def create_bucketed_mirror(path: Path, buckets: int) -> int:
    """Create the table at ``path`` with ``buckets`` buckets, unless it exists.

    Returns:
        The table's bucket count (an existing table keeps its own).

    Raises:
        SinkError: ``buckets`` out of range, or a table at ``path`` that is not bucketed.
    """
    if not 1 <= buckets <= MAX_BUCKETS:
        raise SinkError(f"expected a bucket count from 1 to {MAX_BUCKETS}, got {buckets}")
    table = open_table(path)
    if table is None:
        path.mkdir(parents=True, exist_ok=True)
        table = DeltaTable.create(
            str(path),
            BUCKETED_SCHEMA,
            mode="ignore",
            partition_by=[BUCKET_COLUMN],
            description=_DESCRIPTION.format(buckets=buckets),
        )
    return bucket_count(table, path)


def bucket_count(table: DeltaTable, path: Path) -> int:
    """The bucket count the table at ``path`` was created with.

    Raises:
        SinkError: the table is not a bucketed mirror.
    """
    metadata = table.metadata()
    found = _BUCKETS_IN.match(metadata.description or "")
    if found is None or metadata.partition_columns != [BUCKET_COLUMN]:
        raise SinkError(
            f"expected a bucketed mirror at {path} (partitioned by {BUCKET_COLUMN!r}, its "
            f"bucket count in its description), got partition columns "
            f"{metadata.partition_columns} and description {metadata.description!r:.100}"
        )
    return int(found.group(1))


def is_bucketed(path: Path) -> bool:
    """Whether ``path`` holds a table partitioned by bucket (the bucketed layout)."""
    table = open_table(path)
    return table is not None and table.metadata().partition_columns == [BUCKET_COLUMN]


def bucket_files(path: Path, version: int, buckets: Iterable[int]) -> dict[int, list[StoredFile]]:
    """The files of each of ``buckets`` in the table at ``path`` as of ``version``."""
    wanted = set(buckets)
    files: dict[int, list[StoredFile]] = {bucket: [] for bucket in wanted}
    if not wanted:
        return files
    actions = pa.table(DeltaTable(str(path), version=version).get_add_actions(flatten=True))
    partition = f"partition.{BUCKET_COLUMN}"
    for row in actions.select(["path", "size_bytes", partition]).to_pylist():
        if row[partition] in wanted:
            files[row[partition]].append(StoredFile(row["path"], row["size_bytes"]))
    return files
