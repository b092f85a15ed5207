"""A history's batch as Delta files: new versions added, ended ones moved, one commit.

A history only ever ends a stored version (its ``__END_AT`` set, once) and adds new ones,
so a batch needs no join of the whole current state: of the current versions
(``_current = true``), only the files of the buckets whose documents the batch changed are
read, and of those first their ``_documentId`` column alone; a file holding no version the
batch ends is left as it is.  A file that holds one is replaced: its open versions written
again with the batch's new open versions of that bucket, its ended ones with the batch's
ended versions into ``_current = false``.  The removes and adds are one commit carrying the
batch's markers (:mod:`~shardstream.spark.delta.commits`), so a killed task's files are
never named and a replay finds the batch done.

Why not a Delta MERGE (as the mirror): delta-rs's MERGE joins the whole target partition
in DataFusion and writes the change data feed's files beside the data, about half the
collection tasks' CPU; a history needs neither (its change feed is its rows: a version is
added once and ended once), and pyarrow reads one column and writes the few files touched.
The history's files carry Delta statistics (:mod:`~shardstream.spark.delta.file_stats`:
counts, and exact bounds of the columns that have them), so readers skip files as they did
those the MERGE wrote.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.transaction import AddAction, CommitProperties, RemoveAction

from shardstream.spark.delta.commits import StoredFile, write_data_file
from shardstream.spark.delta.file_stats import file_statistics
from shardstream.spark.delta.typed.buckets import BUCKET, document_buckets
from shardstream.spark.delta.typed.schema import DOCUMENT_ID

START_AT: Final = "__START_AT"
END_AT: Final = "__END_AT"
CURRENT: Final = "_current"
PARTITIONS: Final = (CURRENT, BUCKET)
# Threads writing a batch's files: a small machine's cores, not dozens per Spark task.
_WRITERS: Final = min(4, os.cpu_count() or 1)


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryBatch:
    """What one batch does to a history.

    Attributes:
        versions: the batch's new versions, each stored column of the table (partition
            columns included) in any order; ``_current`` true where ``__END_AT`` is null.
        ends: stored open versions the batch ends: ``_documentId`` -> the ``__END_AT``.
        collection_end: the ``__END_AT`` of every other stored open version (the batch
            ended the whole collection), or None.
    """

    versions: pa.Table
    ends: Mapping[str, str]
    collection_end: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class _CurrentFile:
    """A file of the current versions: where it is, and its bucket."""

    stored: StoredFile
    bucket: int


def commit_history(
    table: DeltaTable, path: Path, buckets: int, batch: HistoryBatch, properties: CommitProperties
) -> None:
    """Write ``batch`` into the history ``table`` at ``path`` (``buckets`` its bucket
    count) and commit it with ``properties`` (the batch's markers)."""
    schema = pa.schema(table.schema().to_arrow())
    stored_schema = pa.schema([field for field in schema if field.name not in PARTITIONS])
    # Each written file's parts, by partition: a replaced file's rows are one partition's
    # already, so only the batch's new versions are sorted (a sort of every rewritten row
    # by document, ~1/10 of the write, ordered nothing a reader uses).
    parts = _new_versions(_conformed(batch.versions, schema), stored_schema)
    files = _current_files(table, _buckets_read(batch, buckets))
    removed = _replace_ended(path, files, batch, stored_schema, parts)
    now = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = [
        RemoveAction(old.stored.path, True, now, old.stored.size, _partition(True, old.bucket))
        for old in removed
    ]
    actions += _written_files(path, parts, now)
    table.create_write_transaction(
        actions,
        mode="append",
        schema=schema,
        partition_by=list(PARTITIONS),
        commit_properties=properties,
    )


def _replace_ended(
    path: Path,
    files: list[_CurrentFile],
    batch: HistoryBatch,
    schema: pa.Schema,
    parts: dict[tuple[bool, int], list[pa.Table]],
) -> list[_CurrentFile]:
    """Of ``files``, those holding a version ``batch`` ends: their open versions added to
    ``parts`` as current, the ended ones (their ``__END_AT`` set) as not; returned, to be
    removed."""
    removed: list[_CurrentFile] = []
    # A file read by its own reader (no dataset discovery per read): its `_documentId`
    # column first, the rest only if the batch ends one of its versions, that column
    # never twice. Each reader is closed before the next opens (a bucket's current files
    # may be many before maintenance compacts them); a replaced file's reopening reuses
    # its footer.
    first = [_identities(path / file.stored.path) for file in files]
    ends = _ends(batch, [identity for identity, _ in first])
    for file, (identity, footer), ending in zip(files, first, ends, strict=True):
        if ending is None:
            continue
        with pq.ParquetFile(path / file.stored.path, metadata=footer) as reader:
            rest = [name for name in reader.schema_arrow.names if name != DOCUMENT_ID]
            rows = reader.read(columns=rest).append_column(DOCUMENT_ID, identity)
        rows = _conformed(rows, schema)
        closes = pc.is_valid(ending)
        parts.setdefault((True, file.bucket), []).append(rows.filter(pc.invert(closes)))
        closed = rows.filter(closes)
        closed = closed.set_column(
            closed.schema.get_field_index(END_AT), END_AT, ending.filter(closes)
        )
        parts.setdefault((False, file.bucket), []).append(closed)
        removed.append(file)
    return removed


def _identities(path: Path) -> tuple[pa.ChunkedArray, pq.FileMetaData]:
    """The file's ``_documentId`` column and its footer."""
    with pq.ParquetFile(path) as reader:
        return reader.read(columns=[DOCUMENT_ID])[DOCUMENT_ID], reader.metadata


def _buckets_read(batch: HistoryBatch, buckets: int) -> set[int] | None:
    """The buckets whose current files may hold a version the batch ends (None: all)."""
    if batch.collection_end is not None:
        return None
    return set(document_buckets(batch.ends, buckets).to_pylist())


def _current_files(table: DeltaTable, wanted: set[int] | None) -> list[_CurrentFile]:
    actions = pa.table(table.get_add_actions(flatten=True))
    if not actions.num_rows:
        return []
    rows = actions.select(["path", "size_bytes", f"partition.{CURRENT}", f"partition.{BUCKET}"])
    return [
        _CurrentFile(StoredFile(path, size), bucket)
        for path, size, is_current, bucket in zip(
            *(column.to_pylist() for column in rows.columns), strict=True
        )
        if is_current and (wanted is None or bucket in wanted)
    ]


def _ends(batch: HistoryBatch, files: list[pa.ChunkedArray]) -> list[pa.Array | None]:
    """Per file (its ``_documentId`` column), each stored version's ``__END_AT`` from the
    batch (null: it stays open), or None when the batch ends none of the file's versions;
    looked up in one pass over every file's column."""
    if not files:
        return []
    keys = pa.array(list(batch.ends), pa.string())
    values = pa.array(list(batch.ends.values()), pa.string())
    every = pa.chunked_array([chunk for column in files for chunk in column.chunks], pa.string())
    found = values.take(pc.index_in(every, value_set=keys))
    if batch.collection_end is not None:
        found = found.fill_null(batch.collection_end)
    if isinstance(found, pa.ChunkedArray):
        found = found.combine_chunks()
    per_file: list[pa.Array | None] = []
    start = 0
    for column in files:
        part = found.slice(start, len(column))
        start += len(column)
        per_file.append(part if part.null_count < len(part) else None)
    return per_file


def _conformed(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` with ``schema``'s columns in its order: a file written before a column was
    added lacks it (null), as Delta readers take it."""
    columns = [
        rows[field.name].cast(field.type)
        if field.name in rows.column_names
        else pa.nulls(rows.num_rows, field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _partition(current: bool, bucket: int) -> dict[str, str | None]:
    return {CURRENT: "true" if current else "false", BUCKET: str(bucket)}


def _new_versions(
    versions: pa.Table, stored_schema: pa.Schema
) -> dict[tuple[bool, int], list[pa.Table]]:
    """The batch's new versions by partition (``_current``, bucket), each part sorted by
    document and start, of the stored columns."""
    order = [(name, "ascending") for name in (*PARTITIONS, DOCUMENT_ID, START_AT)]
    versions = versions.take(pc.sort_indices(versions.select([n for n, _ in order]), order))
    currents, buckets = versions[CURRENT].to_pylist(), versions[BUCKET].to_pylist()
    stored = versions.select(stored_schema.names)
    parts: dict[tuple[bool, int], list[pa.Table]] = {}
    start = 0
    for end in range(1, len(currents) + 1):
        if end == len(currents) or (currents[end], buckets[end]) != (
            currents[start],
            buckets[start],
        ):
            parts[(currents[start], buckets[start])] = [stored.slice(start, end - start)]
            start = end
    return parts


def _written_files(
    path: Path, parts: Mapping[tuple[bool, int], list[pa.Table]], now: int
) -> list[AddAction | RemoveAction]:
    """One file per partition (``_current``, bucket) of its ``parts``, added; none for
    a partition left without rows (a replaced file whose every version the batch ended)."""

    def written(part: tuple[dict[str, str | None], pa.Table]) -> AddAction:
        partition, rows = part
        directory = f"{CURRENT}={partition[CURRENT]}/{BUCKET}={partition[BUCKET]}"
        stored = write_data_file(path, directory, rows)
        return AddAction(stored.path, stored.size, partition, now, True, file_statistics(rows))

    files = [
        (_partition(current, bucket), pa.concat_tables(tables, promote_options="none"))
        for (current, bucket), tables in sorted(parts.items())
        if any(table.num_rows for table in tables)
    ]
    # Every file's rows are in memory already, and pyarrow writes a file without the GIL:
    # several at once (the in-driver sink's wall -13 % on 2 cores; benchmarks/README.md).
    with ThreadPoolExecutor(_WRITERS, thread_name_prefix="shardstream-history") as pool:
        return list(pool.map(written, files))
