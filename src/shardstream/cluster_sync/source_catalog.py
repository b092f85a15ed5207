"""Sync: what the copy reads from the source: T0 and the collections in scope.

T0 is the operation time of a majority read on the source's mongos (the config server
answers it): every write at or before it is majority-committed.  The collections come
with their ``create`` options and index specs (without ``v`` and ``ns``, which the target
chooses), views with their definitions.  The lakehouse snapshot
(:mod:`shardstream.spark.ingest.snapshot`) reads the same way, and its documents with
:func:`read_batches`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Mapping
from typing import Any, Final

from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.collection import Collection
from pymongo.read_concern import ReadConcern

from shardstream.cluster_sync.namespace_map import Namespace, NamespaceMap
from shardstream.errors import OplogError

RAW_DOCUMENTS: Final = CodecOptions(document_class=RawBSONDocument)


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


def majority_reader(client: MongoClient[Any], ns: Namespace) -> Collection[RawBSONDocument]:
    """``ns`` read as raw BSON with read concern majority."""
    return client[ns[0]].get_collection(
        ns[1], codec_options=RAW_DOCUMENTS, read_concern=ReadConcern("majority")
    )


def read_batches(
    reader: Collection[RawBSONDocument],
    query: Mapping[str, Any],
    *,
    at: Timestamp | None,
    size: int,
) -> Generator[list[RawBSONDocument], None, None]:
    """The documents ``query`` finds, in lists of ``size``, read after cluster time ``at``.

    afterClusterTime ``at`` (T0, from the config server): a shard's majority point may
    still be behind it, and a plain majority read there could miss writes at or before
    T0, which a stream from T0 on would never bring again.
    """
    with reader.database.client.start_session(causal_consistency=True) as session:
        if at is not None:
            session.advance_operation_time(at)
        batch: list[RawBSONDocument] = []
        for document in reader.find(query, batch_size=size, session=session):
            batch.append(document)
            if len(batch) >= size:
                yield batch
                batch = []
        if batch:
            yield batch
