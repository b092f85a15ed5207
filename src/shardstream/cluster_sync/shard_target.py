"""Sync: the source's sharded collections, and ``--shard-target`` sharding them alike.

At T0 the copy reads which source collections are sharded, on what key, from
``config.collections`` through mongos (``_id`` the namespace, ``key``, ``unique``).  Skipped:
a ``dropped: true`` entry, which servers before 5.0 leave behind, and an ``unsplittable:
true`` one, an *unsharded* collection 8.0 tracks there (after ``moveCollection``), as
``$listClusterCatalog`` itself reads it.  That catalog has the same shape on every server
the sync targets (5.0 to 8.0); ``listCollections`` does not say whether a collection is
sharded, and ``$listClusterCatalog`` is new in 8.0.10 and documented as unstable.

With ``--shard-target`` each one is sharded on the target with the source's key (and
``unique``) *before* its documents are copied, so the copy lands in the right chunks and
nothing has to be migrated after it: ``enableSharding`` on its database first (5.0, or a
6.0+ binary still at feature compatibility 5.0, refuses ``shardCollection`` without it;
6.0+ takes it as "create the database", a no-op for an existing one), then
``shardCollection`` with ``collation: {locale: "simple"}``, which a collection with a
default collation requires and any other accepts.  A hashed key is sent as it is: no
``numInitialChunks`` or zones.  The same steps apply a ``shardCollection`` event of the
stream.  Without the option a sharded source collection lands unsharded (the target's
topology is its owner's choice), and the copy says so once per collection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any, Final

from pymongo import MongoClient
from pymongo.errors import OperationFailure
from pymongo.read_concern import ReadConcern

from shardstream.cluster_sync.namespace_map import Namespace, NamespaceMap
from shardstream.errors import ShardstreamError

ALREADY_INITIALIZED: Final = 23
SIMPLE_COLLATION: Final = {"locale": "simple"}


class ShardingRefused(ShardstreamError):
    """The target would not shard a collection as the source has it sharded."""


@dataclasses.dataclass(frozen=True, slots=True)
class ShardedCollection:
    """A source collection that is sharded: its namespace, shard key and ``unique`` flag."""

    ns: Namespace
    key: Mapping[str, Any]
    unique: bool = False


def sharded_collections(
    source: MongoClient[Any], namespaces: NamespaceMap
) -> dict[Namespace, ShardedCollection]:
    """The sharded collections in scope on ``source`` (a mongos), by namespace.

    A replica-set source has no ``config.collections`` and gives none.
    """
    return {c.ns: c for c in catalog_collections(source) if namespaces.in_scope(*c.ns)}


def catalog_collections(client: MongoClient[Any]) -> Iterator[ShardedCollection]:
    """Every sharded collection ``config.collections`` of ``client`` (a mongos) lists."""
    catalog = client.config.get_collection("collections", read_concern=ReadConcern("majority"))
    for entry in catalog.find({"dropped": {"$ne": True}, "unsplittable": {"$ne": True}}):
        db, _, name = str(entry["_id"]).partition(".")
        if name:
            yield ShardedCollection(
                (db, name), dict(entry["key"]), bool(entry.get("unique", False))
            )


def shard_collection(
    target: MongoClient[Any], ns: Namespace, key: Mapping[str, Any], *, unique: bool = False
) -> None:
    """Shard ``ns`` on ``target`` (a mongos) on ``key``; already so on that key is fine.

    Raises:
        ShardingRefused: the target refused, e.g. the collection is sharded on another
            key there, or holds documents without an index on the key.
    """
    db, name = ns
    try:
        try:
            target.admin.command({"enableSharding": db})
        except OperationFailure as exc:
            if exc.code != ALREADY_INITIALIZED:  # servers before 4.4 say so for a repeat
                raise
        target.admin.command(
            {
                "shardCollection": f"{db}.{name}",
                "key": dict(key),
                "unique": unique,
                "collation": dict(SIMPLE_COLLATION),
            }
        )
    except OperationFailure as exc:
        errmsg = (exc.details or {}).get("errmsg", str(exc))
        raise ShardingRefused(
            f"expected the target to shard {db}.{name} on {dict(key)!r} (unique: {unique}) "
            f"as the source is sharded, got error {exc.code} ({errmsg})"
        ) from exc


def unsharded_notice(collection: ShardedCollection, target: Namespace) -> str:
    """The line that says a sharded source collection lands unsharded."""
    source = ".".join(collection.ns)
    return (
        f"note: {source} is sharded on the source (key {dict(collection.key)!r}) and lands "
        f"unsharded on the target as {'.'.join(target)}; --shard-target shards it alike"
    )
