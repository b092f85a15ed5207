"""Cluster sync: DTS-style replication of a sharded cluster into another cluster.

Phase 1 copies every namespace in scope as of T0 (through mongos, so orphans are never
copied); phase 2 applies the merged change stream from T0 with idempotent writes through
N parallel writers, checkpointing the stream's resume token in the target after every
acknowledged batch.  ``verify`` compares source and target document for document::

    result = shardstream.sync("mongodb://src-mongos/", "mongodb://dst-mongos/", idle_exit_s=5)
    report = shardstream.verify("mongodb://src-mongos/", "mongodb://dst-mongos/")
    assert report.equal
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from shardstream.cluster_sync.cluster_identity import ClusterUnreachable, SyncRefused, open_cluster
from shardstream.cluster_sync.compare_clusters import NamespaceComparison, VerifyReport
from shardstream.cluster_sync.compare_clusters import verify as _verify
from shardstream.cluster_sync.copy_ranges import id_ranges
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.refused_writes import SyncConflict
from shardstream.cluster_sync.shard_target import ShardingRefused
from shardstream.cluster_sync.sync_job import SyncJob
from shardstream.cluster_sync.sync_options import DEFAULT_CONNECT_TIMEOUT_S, SyncOptions, SyncResult

__all__ = [
    "ClusterUnreachable",
    "NamespaceComparison",
    "NamespaceMap",
    "ShardingRefused",
    "SyncConflict",
    "SyncJob",
    "SyncOptions",
    "SyncRefused",
    "SyncResult",
    "VerifyReport",
    "id_ranges",
    "sync",
    "verify",
]


def sync(
    source: str,
    target: str,
    *,
    db: str | None = None,
    coll: str | None = None,
    maps: Iterable[str] = (),
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    report: Callable[[str], None] | None = None,
    **options: Any,
) -> SyncResult:
    """Copy ``source`` into ``target``, then apply its changes until idle or stopped.

    Args:
        source / target: mongos (or replica-set) URIs.
        db / coll: the scope, as for ``watch()``.
        maps: ``"SRC=DST"`` renaming rules (``db=db2`` or ``db.coll=db2.coll2``).
        include / exclude: ``DB.COLL`` patterns with ``*`` wildcards, as for ``watch()``
            (an exclude wins; ``include`` and ``db`` are exclusive): what is neither
            copied, streamed nor verified. A rename into the scope from outside it stops
            the sync (docs/filters.md).
        report: receives the progress lines.
        options: the other :class:`SyncOptions` fields (``writers``, ``transactions``,
            ``on_conflict``, ``shard_target``, ``copy_readers``, ``sync_id``,
            ``idle_exit_s``, ``connect_timeout_s`` ...).

    Returns:
        How the run ended; ``caught_up`` says whether the target had everything the
        source had committed when it stopped.
    """
    namespaces = NamespaceMap.from_options(db, coll, maps, include, exclude)
    job = SyncJob(
        SyncOptions(source=source, target=target, namespaces=namespaces, **options), report=report
    )
    return job.run()


def verify(
    source: str,
    target: str,
    *,
    db: str | None = None,
    coll: str | None = None,
    maps: Iterable[str] = (),
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> VerifyReport:
    """Compare every collection in scope on ``source`` with its mapped one on ``target``.

    The scope is the sync's (``db`` / ``coll`` or ``include`` / ``exclude``, and ``maps``):
    an excluded collection is compared on neither side.

    Raises:
        ClusterUnreachable: either cluster did not answer within ``connect_timeout_s``.
    """
    namespaces = NamespaceMap.from_options(db, coll, maps, include, exclude)
    source_client = open_cluster(source, "source", connect_timeout_s)
    try:
        target_client = open_cluster(target, "target", connect_timeout_s)
    except BaseException:
        source_client.close()
        raise
    try:
        return _verify(source_client, target_client, namespaces)
    finally:
        source_client.close()
        target_client.close()
