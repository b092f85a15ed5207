"""Sync: what the copy reads from the source: T0 and the collections in scope.

T0 is the operation time of a majority read on the source's mongos (the config server
answers it): every write at or before it is majority-committed.  The collections come
with their ``create`` options and index specs (without ``v`` and ``ns``, which the target
chooses), views with their definitions.  The lakehouse snapshot
(:mod:`shardstream.spark.ingest.snapshot`) reads the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.cluster_sync.namespace_map import Namespace, NamespaceMap
from shardstream.errors import OplogError


@dataclasses.dataclass(frozen=True, slots=True)
class SourceCollection:
    """One source collection to copy: its namespace, ``create`` options and indexes."""

    ns: Namespace
    kind: str  # "collection" or "view"
    options: Mapping[str, Any]
    indexes: tuple[Mapping[str, Any], ...]


def majority_time(source: MongoClient[Any]) -> Timestamp:
    """T0: the operation time of a majority read on the source (its majority point)."""
    reply = source.config.command(
        {"find": "shards", "limit": 1, "readConcern": {"level": "majority"}}
    )
    t0 = reply.get("operationTime")
    if not isinstance(t0, Timestamp):
        raise OplogError(
            f"expected the source's reply to a majority read to carry an operationTime "
            f"(a sharded cluster or replica set), got {t0!r}"
        )
    return t0


def source_collections(
    source: MongoClient[Any], namespaces: NamespaceMap
) -> list[SourceCollection]:
    """The collections and views in scope, with their options and indexes."""
    found: list[SourceCollection] = []
    for db in sorted(source.list_database_names()):
        if not namespaces.in_scope(db):
            continue
        for info in source[db].list_collections():
            name, kind = info["name"], info.get("type", "collection")
            if kind not in ("collection", "view") or not namespaces.in_scope(db, name):
                continue
            indexes: tuple[Mapping[str, Any], ...] = ()
            if kind == "collection":
                indexes = tuple(
                    {k: v for k, v in spec.items() if k not in ("v", "ns")}
                    for spec in source[db][name].list_indexes()
                    if spec.get("name") != "_id_"
                )
            found.append(SourceCollection((db, name), kind, dict(info.get("options", {})), indexes))
    return found
