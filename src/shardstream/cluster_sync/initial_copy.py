"""Sync phase 1: copy every namespace in scope as of T0, then let the stream converge it.

T0 is the operation time of a majority read on the source's mongos: every write at or
before T0 is majority-committed, so the copy, read afterwards with read concern
majority, sees it, and the stream, started at T0, carries everything after it.  A
document the copy reads in a newer state than T0 gets the stream's events since T0
replayed on top; because the sync's writes are idempotent (replace by key, the diff's
absolute values, delete by key) it ends in the source's state.

The documents are read **through mongos**, not from the shards: a shard also holds
orphans (chunks a migration left behind, not yet deleted) and mongos filters them with
the shard versioning protocol, where reading the shards would mean fetching the chunk map
at T0 and filtering by ownership ourselves.  ``readers`` threads copy pieces at once: a
collection of at least twice ``range_docs`` documents is split into ``_id`` ranges
(:mod:`~shardstream.cluster_sync.copy_ranges`), a smaller one is one piece; each piece is
read in large raw batches written as unordered bulk inserts.  Non-unique indexes are
built before the documents arrive, unique ones after (a duplicate then fails once, with
its key, instead of per batch), all before phase 2.  A collection sharded on the source is
sharded alike on the target before its documents arrive with ``shard_target``, else
reported as landing unsharded (:mod:`~shardstream.cluster_sync.shard_target`).
The batches are written by :mod:`~shardstream.cluster_sync.copy_writes`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Final

from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.collection import Collection
from pymongo.write_concern import WriteConcern

from shardstream.cluster_sync.conflict_log import ConflictLog
from shardstream.cluster_sync.copy_ranges import id_ranges
from shardstream.cluster_sync.copy_writes import holds_documents, movable, retried_insert
from shardstream.cluster_sync.namespace_map import Namespace, NamespaceMap
from shardstream.cluster_sync.shard_target import (
    ShardedCollection,
    sharded_collections,
    unsharded_notice,
)
from shardstream.cluster_sync.source_catalog import (
    RAW_DOCUMENTS,
    SourceCollection,
    majority_reader,
    read_batches,
    source_collections,
)
from shardstream.cluster_sync.target_catalog import (
    create_indexes,
    create_like_source,
    shard_like_source,
)
from shardstream.cluster_sync.target_retry import DEFAULT_RETRY_FOR_S, retrying
from shardstream.cluster_sync.target_shard_key import target_shard_keys

COPY_BATCH: Final = 1000
# A collection is split once it holds two ranges of this many documents (the estimate).
COPY_RANGE_DOCS: Final = 50_000
# Ranges per reader at most: more than one, so a reader that drew a small range takes
# another while a big one is still read.
RANGES_PER_READER: Final = 4


@dataclasses.dataclass
class CopyProgress:
    """Documents copied so far, against the sources' estimated counts (thread-safe adds)."""

    copied: int = 0
    total: int = 0
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def add(self, count: int) -> None:
        """Count ``count`` more copied documents."""
        with self.lock:
            self.copied += count


def copy_collections(
    source: MongoClient[Any],
    target: MongoClient[Any],
    namespaces: NamespaceMap,
    *,
    readers: int,
    on_conflict: str,
    progress: CopyProgress,
    stopping: Callable[[], bool] = lambda: False,
    batch: int = COPY_BATCH,
    range_docs: int = COPY_RANGE_DOCS,
    shard_target: bool = False,
    report: Callable[[str], None] | None = None,
    at: Timestamp | None = None,
    retry_for_s: float = DEFAULT_RETRY_FOR_S,
    conflicts: ConflictLog | None = None,
) -> list[SourceCollection]:
    """Create, fill and index every target collection in scope; return what was copied.

    Args:
        at: T0; every read waits until the shard's majority snapshot reaches it.
        readers: pieces (collections or ``_id`` ranges) copied at once.
        range_docs: the documents of one ``_id`` range, at least (see module docstring).
        shard_target: shard what is sharded on the source alike on the target first.
        report: receives the notice for each sharded collection landing unsharded.
        retry_for_s: how long a batch's insert is retried while the target is away
            (inserting a batch again is harmless: a document already there is replaced).
        conflicts: where documents skipped or overwritten under ``on_conflict`` are
            recorded.

    Raises:
        SyncConflict: a unique index refuses a document (and ``on_conflict`` is
            ``fail``). Whether a new sync's target is empty is checked before, by
            :func:`~shardstream.cluster_sync.target_catalog.refuse_targets_holding_data`.
        ShardingRefused: with ``shard_target``, the target would not shard a collection.
    """
    collections = source_collections(source, namespaces)
    sharded = sharded_collections(source, namespaces)
    counts = {
        c.ns: source[c.ns[0]][c.ns[1]].estimated_document_count()
        for c in collections
        if c.kind == "collection"
    }
    progress.total += sum(counts.values())
    for collection in collections:
        create_like_source(target, namespaces, collection)
        placement = sharded.get(collection.ns)
        if placement is not None and shard_target:
            shard_like_source(target, namespaces, collection, placement)
    target_keys = _landing_keys(target, namespaces, sharded, shard_target, retry_for_s)
    for collection in collections:
        placement = sharded.get(collection.ns)
        landed = namespaces.target(*collection.ns)
        if placement is not None and landed not in target_keys and report is not None:
            report(unsharded_notice(placement, landed))
    most = readers * RANGES_PER_READER if readers > 1 else 1

    def split(collection: SourceCollection) -> list[tuple[SourceCollection, dict[str, Any]]]:
        pieces = min(most, counts[collection.ns] // max(1, range_docs))
        reader = majority_reader(source, collection.ns)
        ranges = id_ranges(reader, pieces, options=collection.options)
        return [(collection, f) for f in ranges]

    copied = [c for c in collections if c.kind == "collection"]
    keys = {c.ns: target_keys.get(namespaces.target(*c.ns), ()) for c in copied}
    # Decided before this run writes anything: only an earlier run's documents (or data
    # copied into under --on-conflict) can hold an old shard key value.
    moved = {
        ns
        for ns, key in keys.items()
        if movable(key) and holds_documents(target, namespaces.target(*ns))
    }
    with ThreadPoolExecutor(max(1, readers), thread_name_prefix="shardstream-copy") as pool:
        pieces = [piece for plan in pool.map(split, copied) for piece in plan]
        tasks = [
            pool.submit(
                _copy_documents,
                majority_reader(source, c.ns),
                target,
                namespaces,
                c,
                piece,
                progress,
                stopping,
                batch,
                partial(
                    retried_insert,
                    on_conflict=on_conflict,
                    retry_for_s=retry_for_s,
                    shard_key=keys[c.ns],
                    remove_moved=c.ns in moved,
                    conflicts=conflicts,
                ),
                at,
            )
            for c, piece in pieces
        ]
        for task in tasks:
            task.result()
    for collection in collections:
        unique = [spec for spec in collection.indexes if spec.get("unique")]
        if unique:
            create_indexes(target, namespaces.target(*collection.ns), unique)
    return collections


def _copy_documents(
    reader: Collection[RawBSONDocument],
    target: MongoClient[Any],
    namespaces: NamespaceMap,
    collection: SourceCollection,
    piece: Mapping[str, Any],
    progress: CopyProgress,
    stopping: Callable[[], bool],
    size: int,
    insert: Callable[[Any, list[RawBSONDocument]], None],
    at: Timestamp | None,
) -> None:
    if stopping():
        return
    target_db, target_name = namespaces.target(*collection.ns)
    writer = target[target_db].get_collection(
        target_name, codec_options=RAW_DOCUMENTS, write_concern=WriteConcern("majority")
    )
    with contextlib.closing(read_batches(reader, piece, at=at, size=size)) as batches:
        for batch in batches:
            insert(writer, batch)
            progress.add(len(batch))
            if stopping():
                return


def _landing_keys(
    target: MongoClient[Any],
    namespaces: NamespaceMap,
    sharded: Mapping[Namespace, ShardedCollection],
    shard_target: bool,
    retry_for_s: float,
) -> dict[Namespace, tuple[str, ...]]:
    """The target collections' shard keys, which address the copy's upserts (on every
    version: the whole key is never refused): the source's with ``shard_target``, whatever
    the owner chose without; for a user who may not read the target's catalog, the
    source's with ``shard_target``, else none."""
    keys = retrying(partial(target_shard_keys, target), retry_for_s)
    if keys is not None:
        return keys
    chosen = sharded.items() if shard_target else ()
    return {namespaces.target(*ns): tuple(placement.key) for ns, placement in chosen}
