"""Sync: the target's collections made like the source's before the copy fills them.

Each collection is created with the source's options and its non-unique indexes (the
unique ones come after the documents, :mod:`~shardstream.cluster_sync.initial_copy`);
with ``--shard-target`` a sharded one is sharded on the source's key first.  A new sync
expects its target namespaces empty, checked before anything is written or stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pymongo import MongoClient
from pymongo.errors import OperationFailure

from shardstream.cluster_sync.ddl_apply import NAMESPACE_EXISTS
from shardstream.cluster_sync.namespace_map import Namespace, NamespaceMap
from shardstream.cluster_sync.refused_writes import SyncConflict
from shardstream.cluster_sync.shard_target import ShardedCollection, shard_collection
from shardstream.cluster_sync.source_catalog import SourceCollection, source_collections
from shardstream.cluster_sync.view_mapping import mapped_view_options


def refuse_targets_holding_data(
    source: MongoClient[Any], target: MongoClient[Any], namespaces: NamespaceMap
) -> None:
    """Before a new sync writes anything: every target namespace in scope must be empty.

    Checked before the copy's checkpoint is stored: refused later, a rerun of the same
    command would find that checkpoint and resume "its" copy over the old data.

    Raises:
        SyncConflict: naming the first target namespace that holds a document.
    """
    for collection in source_collections(source, namespaces):
        if collection.kind == "collection":
            _refuse_if_held(target, *namespaces.target(*collection.ns))


def _refuse_if_held(target: MongoClient[Any], db: str, name: str) -> None:
    if target[db][name].find_one() is not None:
        raise SyncConflict(
            f"the target namespace {db}.{name} already holds data; a new sync expects "
            "it empty (pass --on-conflict overwrite or skip to copy into it anyway)"
        )


def create_like_source(
    target: MongoClient[Any], namespaces: NamespaceMap, collection: SourceCollection
) -> None:
    """Create ``collection``'s target with its options and non-unique indexes.

    One that exists already is kept: a resumed copy's own, or one a new sync found empty
    (:func:`refuse_targets_holding_data`) or was told to copy into (``--on-conflict``).
    """
    db, name = namespaces.target(*collection.ns)
    options = mapped_view_options(namespaces, *collection.ns, collection.options)
    try:
        target[db].command({"create": name, **options})
    except OperationFailure as exc:
        if exc.code != NAMESPACE_EXISTS:
            raise
    plain = [spec for spec in collection.indexes if not spec.get("unique")]
    if collection.kind == "collection" and plain:
        create_indexes(target, (db, name), plain)


def create_indexes(target: MongoClient[Any], ns: Namespace, specs: list[Mapping[str, Any]]) -> None:
    target[ns[0]].command({"createIndexes": ns[1], "indexes": [dict(s) for s in specs]})


def shard_like_source(
    target: MongoClient[Any],
    namespaces: NamespaceMap,
    collection: SourceCollection,
    placement: ShardedCollection,
) -> None:
    ns = namespaces.target(*collection.ns)
    # A unique index on the key itself goes first: shardCollection would otherwise build
    # one under its own name, and the source's (built after the copy) would then clash.
    key = list(placement.key.items())
    on_key = [s for s in collection.indexes if s.get("unique") and list(s["key"].items()) == key]
    if on_key:
        create_indexes(target, ns, on_key)
    shard_collection(target, ns, placement.key, unique=placement.unique)
