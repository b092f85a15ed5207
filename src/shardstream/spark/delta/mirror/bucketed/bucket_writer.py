"""A Spark task's share of the bucketed mirror: its buckets read, their events applied, each
touched bucket written again as one new file.

The task is given every event of its buckets (Spark shuffled the batch by bucket; an event
without a documentKey, such as a drop, is given to every bucket), sorted by bucket and
token.  Per bucket it drops the events at or below the table's watermark, reads the bucket's
files as of the version the driver pinned, and applies the events exactly as the in-driver
mirror does (:func:`~shardstream.spark.delta.mirror.prepare.prepare_with`: the same plain
split, the same ``apply_batch`` and its errors), then writes the bucket's rows, those the
batch did not touch and the touched ones' final state, into one new Parquet file.  The
driver commits the new file and removes the old ones
(:mod:`~shardstream.spark.delta.mirror.bucketed.bucket_commit`); until then nothing is visible, and
a file no commit names is never read.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from shardstream.spark.delta.changelog.table import newer_than
from shardstream.spark.delta.commits import StoredFile, write_data_file
from shardstream.spark.delta.file_stats import file_statistics
from shardstream.spark.delta.mirror.bucketed.bucket_table import BUCKET_COLUMN, bucket_files
from shardstream.spark.delta.mirror.prepare import (
    DELETE,
    EVENT_COLUMNS,
    MERGE_KEY_ORDER,
    MIRROR_SCHEMA,
    PreparedBatch,
    prepare_with,
    select_rows,
)

# The column Spark adds to each event row: the bucket it was shuffled to.
EVENT_BUCKET: Final = "_bucket"


@dataclasses.dataclass(frozen=True, slots=True)
class BucketWrite:
    """What a task did to one bucket.

    Attributes:
        bucket: the bucket.
        added: the bucket's new file (None: the batch left the bucket empty, or unchanged).
        added_rows: the rows in it.
        stats: its Delta statistics (JSON; "" when no file was written).
        removed: the files it replaces (empty: the bucket is unchanged).
        events: events applied (those above the watermark).
        rows_read: stored rows the events needed (an update's base, a dropped collection's).
        rows_written: rows the batch inserted or changed.
        rows_deleted: rows the batch removed.
        unknown_updates: updates of documents the mirror never held (lenient mode).
    """

    bucket: int
    added: StoredFile | None
    added_rows: int
    stats: str
    removed: tuple[StoredFile, ...]
    events: int
    rows_read: int
    rows_written: int
    rows_deleted: int
    unknown_updates: int


@dataclasses.dataclass(frozen=True, slots=True)
class AppliedBucket:
    """A bucket's events applied: what the task wrote, and what the state's preparation
    said (the per-collection layout's tables are made from it).

    Attributes:
        write: the bucket's new file and counts.
        events: the bucket's events above the watermark (:data:`EVENT_COLUMNS`, token order).
        prepared: their preparation (with the versions when asked for).
    """

    write: BucketWrite
    events: pa.Table
    prepared: PreparedBatch


def write_buckets(
    path: Path,
    version: int,
    events: pa.Table,
    watermark: str | None,
    *,
    strict: bool,
) -> list[BucketWrite]:
    """Apply ``events`` (the mirror's event columns and :data:`EVENT_BUCKET`) to their
    buckets of the table at ``path`` as of ``version``; one :class:`BucketWrite` per bucket
    with an event above ``watermark``."""
    applied = apply_buckets(path, version, events, watermark, strict=strict)
    return [bucket.write for bucket in applied]


def apply_buckets(
    path: Path,
    version: int,
    events: pa.Table,
    watermark: str | None,
    *,
    strict: bool,
    record_versions: bool = False,
) -> list[AppliedBucket]:
    """:func:`write_buckets`, saying each bucket's events and preparation too
    (``record_versions``: with every document version, as the history needs)."""
    fresh = newer_than(events, watermark)
    if not fresh.num_rows:
        return []
    buckets = fresh[EVENT_BUCKET]
    numbers = sorted(pc.unique(buckets).to_pylist())
    files = bucket_files(path, version, numbers)
    applied = []
    for bucket in numbers:
        mine = fresh.filter(pc.equal(buckets, bucket)).select(list(EVENT_COLUMNS)).sort_by("_id")
        stored = _read(path, files[bucket])
        prepared = prepare_with(
            functools.partial(select_rows, stored),
            mine,
            strict=strict,
            snapshot_read_end=None,
            record_versions=record_versions,
        )
        write = _write_bucket(path, bucket, files[bucket], stored, prepared)
        applied.append(AppliedBucket(write, mine, prepared))
    return applied


def _write_bucket(
    path: Path,
    bucket: int,
    stored_files: list[StoredFile],
    stored: pa.Table,
    prepared: PreparedBatch,
) -> BucketWrite:
    source = prepared.source
    deleted = pc.sum(source[DELETE]).as_py() or 0
    counts = (prepared.events, prepared.rows_read, source.num_rows - deleted, deleted)
    if not source.num_rows:  # nothing touched (e.g. a drop of a collection not here)
        return BucketWrite(bucket, None, 0, "", (), *counts, prepared.unknown_updates)
    touched = _keys(source)
    kept = stored.filter(pc.invert(pc.is_in(_keys(stored), touched)))
    written = source.filter(pc.invert(source[DELETE])).drop_columns([DELETE])
    rows = pa.concat_tables([kept, written.cast(MIRROR_SCHEMA)]).sort_by(MERGE_KEY_ORDER)
    added = write_data_file(path, f"{BUCKET_COLUMN}={bucket}", rows) if rows.num_rows else None
    stats = file_statistics(rows) if added is not None else ""
    return BucketWrite(
        bucket,
        added,
        rows.num_rows,
        stats,
        tuple(stored_files),
        *counts,
        prepared.unknown_updates,
    )


def _read(path: Path, files: list[StoredFile]) -> pa.Table:
    """A bucket's rows (the partition column is in the log, not in the files)."""
    tables = [_read_file(path / stored.path) for stored in files]
    if not tables:
        return MIRROR_SCHEMA.empty_table()
    return pa.concat_tables([table.cast(MIRROR_SCHEMA) for table in tables])


def _read_file(path: Path) -> pa.Table:
    # One file's reader, not read_table's dataset (its discovery took half a small
    # file's read), and the schema's columns alone.
    with pq.ParquetFile(path) as file:
        return file.read(columns=MIRROR_SCHEMA.names)


def _keys(rows: pa.Table) -> pa.Array:
    """Each row's key joined by NUL (no namespace or Extended JSON text holds one)."""
    joined = pc.binary_join_element_wise(rows["db"], rows["coll"], rows["_documentId"], "\0")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined
