"""Ingest: ``--snapshot``: the source's documents as of T0, loaded before the stream starts.

As the sync's initial copy (:mod:`shardstream.cluster_sync.initial_copy`) does: T0 is the
operation time of a majority read on the source, and every collection in the stream's
scope (``--db`` / ``--coll``, ``--include`` / ``--exclude``) is then read **through mongos**
(which filters orphans) with read concern majority after cluster time T0, so the read sees
every write at or before T0.
Its documents go into the change log as ``read`` rows and into the mirror
(:mod:`shardstream.spark.delta.snapshot.tables`), and the stream then starts at T0: the
table watermarks are the high-water-mark token at T0, which the restart rules resume from.

A document may be read in any state between T0 and the end of the read; the stream's
events since T0 are applied on top of it, which converges because the mirror applies them
as a secondary applies the oplog on top of an initial sync's clone: inserts and replaces
set the whole document, updates apply the oplog's diff (which writes absolute values),
deletes remove it; an update of a document the read found already deleted is skipped up
to the read's end (``snapshot_read_end`` in the mirror).  Renaming a collection in scope
while the snapshot reads is not supported, as Debezium asks for no schema changes during
its snapshot.

Exactly once: the documents are staged in ``<table>/_snapshot/`` (Parquet, streamed, so a
snapshot need not fit in memory), then each table takes them in one commit that records
T0.  A run killed before the change log's commit leaves no snapshot and reads again; one
killed after it completes the mirror from the change log; a later run skips the snapshot.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final, TextIO

import pyarrow as pa
import pyarrow.parquet as pq
from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.source_catalog import (
    majority_reader,
    majority_time,
    read_batches,
    source_collections,
)
from shardstream.errors import ConfigurationError
from shardstream.resume_token import encode_token, high_water_mark
from shardstream.spark.delta.changelog.table import CHANGELOG_SCHEMA
from shardstream.spark.delta.mirror.table import MIRROR_TABLE
from shardstream.spark.delta.snapshot.marks import SnapshotMarks
from shardstream.spark.delta.snapshot.tables import (
    check_no_tables,
    complete_mirror,
    load_changelog,
    read_rows,
    snapshot_in_changelog,
)
from shardstream.spark.source.options import (
    START_OPTION_FLAGS,
    SourceKind,
    SourceSpec,
    parse_options,
)

STAGING_DIR: Final = "_snapshot"
READ_BATCH: Final = 2000  # documents per staged row group
_NOT_LIVE: Final = {SourceKind.OPLOG: "oplog files", SourceKind.SIMULATE: "a simulated cluster"}


def check_snapshot_options(source_options: Mapping[str, str]) -> SourceSpec:
    """The parsed options; refuse a snapshot of anything but a live cluster, or with a
    start of its own (with a snapshot, the stream starts at its T0).

    Raises:
        ConfigurationError: the source is not a live cluster, or a start option is given.
    """
    spec = parse_options(source_options)
    kind = spec.kind
    if kind is not SourceKind.LIVE:
        raise ConfigurationError(
            f"expected --snapshot with a live cluster (--uri), got {_NOT_LIVE[kind]}: a "
            "snapshot reads the documents through mongos, and there is no cluster to read "
            "(the input's changes from its start are the whole history: ingest without "
            "--snapshot)"
        )
    keys = {key.lower() for key in source_options}  # options are case-insensitive
    given = [flag for key, flag in START_OPTION_FLAGS.items() if key in keys]
    if given:
        raise ConfigurationError(
            f"expected no start option with --snapshot (the stream starts at the "
            f"snapshot's time T0), got {', '.join(given)}"
        )
    return spec


def load_snapshot(
    root: Path, source_options: Mapping[str, str], out: TextIO, *, table: str = MIRROR_TABLE
) -> int | None:
    """Load the snapshot into the tables under ``root`` unless they hold it already.

    Args:
        root: the lakehouse root.
        source_options: the stream's data-source options (``uri``, ``db``, ``coll`` ...).
        out: where the progress lines go.
        table: the documents' table (``mirror``, or the per-collection layout's state).

    Returns:
        The documents loaded, or None when the tables held the snapshot already.

    Raises:
        ConfigurationError: see :func:`check_snapshot_options`.
        SinkError: the tables exist without a snapshot.
        OplogError: the source gave no majority time (not a cluster or replica set).
    """
    spec = check_snapshot_options(source_options)
    held = snapshot_in_changelog(root)
    if held is not None:
        complete_mirror(root, table)
        out.write(f"ingest: snapshot as of {_text(held[0])} already loaded; not read again\n")
        return None
    check_no_tables(root)
    stream = spec.stream
    scope = NamespaceMap(stream.db, stream.coll, include=stream.include, exclude=stream.exclude)
    staging = root / STAGING_DIR
    shutil.rmtree(staging, ignore_errors=True)  # what a killed run left
    staging.mkdir(parents=True)
    client: MongoClient[Any] = MongoClient(spec.uri)
    try:
        start = majority_time(client)
        out.write(f"ingest: snapshot as of {_text(start)}: reading the collections in scope\n")
        token = encode_token(high_water_mark(start, spec.stream.default_token_version)).data
        _stage(client, scope, staging, token=token, start=start)
        marks = SnapshotMarks(start=start, read_end=majority_time(client), token=token)
    finally:
        client.close()
    loaded = load_changelog(root, _staged_batches(staging), marks)
    complete_mirror(root, table)
    shutil.rmtree(staging)
    out.write(
        f"ingest: snapshot loaded: {loaded} documents as of {_text(start)} (read until "
        f"{_text(marks.read_end)}); the stream starts there\n"
    )
    return loaded


def _stage(
    client: MongoClient[Any], scope: NamespaceMap, staging: Path, *, token: str, start: Timestamp
) -> None:
    """Read every collection in scope into Parquet files under ``staging``."""
    collections = [c for c in source_collections(client, scope) if c.kind == "collection"]
    # afterClusterTime T0: each shard waits until its majority snapshot reaches T0, so the
    # read sees every write at or before T0 (the stream carries the later ones).
    for number, collection in enumerate(collections):
        db, name = collection.ns
        batches = read_batches(
            majority_reader(client, collection.ns), {}, at=start, size=READ_BATCH
        )
        with pq.ParquetWriter(staging / f"{number:06d}.parquet", CHANGELOG_SCHEMA) as writer:
            for batch in batches:
                raw = [bytes(document.raw) for document in batch]  # bytes already
                writer.write_batch(read_rows(raw, db, name, token=token, start=start))


def _staged_batches(staging: Path) -> Iterator[pa.RecordBatch]:
    for path in sorted(staging.glob("*.parquet")):
        for batch in pq.ParquetFile(path).iter_batches():
            yield batch.cast(CHANGELOG_SCHEMA)  # the schema as the change log declares it


def _text(time: Timestamp) -> str:
    return f"{time.time},{time.inc}"
