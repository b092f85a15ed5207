"""Emulator: the commands that read the catalog: ``listCollections``, ``listIndexes``,
``listDatabases`` and ``count``.

Listings are answered in one batch (cursor id 0), as mongod does for a small catalog.
``listCollections`` and ``listDatabases`` honour ``filter`` with the same filter subset as
``find`` (so an unsupported operator is refused with ``BadValue``) and ``nameOnly``. Only
collections in the document store (and the views of its ``system.views``) are listed:
``local.oplog.rs`` and the ``admin`` /
``config`` / ``local`` databases a real node always has are not.

See also src/mongo/db/commands/list_collections.cpp and list_databases.cpp.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from bson.int64 import Int64

from shardstream.emulator.cursors import matches, select
from shardstream.emulator.ddl_commands import not_found
from shardstream.emulator.document_store import DocumentStore
from shardstream.emulator.faults import require_admin
from shardstream.emulator.index_keys import ID_INDEX
from shardstream.emulator.views import view_entry, views_of
from shardstream.emulator.write_path import namespace

Body = dict[str, Any]
Handler = Callable[[Body], Body]
# A stand-in for the storage a collection or index takes on disk even when empty, so a
# database with only empty collections still reads as not empty.
_PAGE: Final = 4096


def _cursor(ns: str, batch: list[Body]) -> Body:
    return {"cursor": {"id": Int64(0), "ns": ns, "firstBatch": batch}, "ok": 1.0}


def _collection_entry(name: str, coll: Any) -> Body:
    return {
        "name": name,
        "type": "collection",
        "options": dict(coll.options),
        "info": {"readOnly": False, "uuid": coll.ui},
        "idIndex": dict(ID_INDEX),
    }


class CatalogCommands:
    """The catalog handlers of one replica-set member, reading its store."""

    def __init__(self, store: DocumentStore) -> None:
        """Read ``store``."""
        self._store = store

    def register(self, commands: dict[str, Handler]) -> None:
        """Add the handlers to a node's command table (lower-case names)."""
        commands["listcollections"] = self.list_collections
        commands["listindexes"] = self.list_indexes
        commands["listdatabases"] = database_lister(lambda: [self._store])
        commands["count"] = count_handler(self._store.documents)

    def list_collections(self, body: Body) -> Body:
        """Answer ``listCollections`` on ``$db``."""
        db = body.get("$db")
        query, names_only = body.get("filter") or {}, bool(body.get("nameOnly"))
        batch: list[Body] = []
        with self._store.lock:
            for ns in self._store.namespaces():
                coll_db, _, name = ns.partition(".")
                coll = self._store.get(ns)
                if coll_db != db or coll is None:
                    continue
                entry = _collection_entry(name, coll)
                if matches(entry, query):
                    batch.append({"name": name, "type": "collection"} if names_only else entry)
            for definition in views_of(self._store, str(db)):
                entry = view_entry(definition)
                if matches(entry, query):
                    batch.append({"name": entry["name"], "type": "view"} if names_only else entry)
        return _cursor(f"{db}.$cmd.listCollections", batch)

    def list_indexes(self, body: Body) -> Body:
        """Answer ``listIndexes`` (``NamespaceNotFound`` for a missing collection)."""
        ns = namespace(body, "listIndexes")
        with self._store.lock:
            coll = self._store.get(ns)
            if coll is None:
                raise not_found(ns)
            specs = [dict(spec) for spec in coll.indexes]
        db, _, name = ns.partition(".")
        return _cursor(f"{db}.$cmd.listIndexes.{name}", specs)


def database_lister(stores: Callable[[], Iterable[DocumentStore]]) -> Handler:
    """The ``listDatabases`` handler over ``stores()`` (one node's, or every shard's)."""

    def list_databases(body: Body) -> Body:
        require_admin(body, "listDatabases")
        sizes: dict[str, int] = {}
        for store in stores():
            with store.lock:
                for ns in store.namespaces():
                    coll = store.get(ns)
                    if coll is not None:
                        size = _PAGE * (1 + len(coll.indexes)) + coll.data_size()
                        db = ns.partition(".")[0]
                        sizes[db] = sizes.get(db, 0) + size
        query = body.get("filter") or {}
        entries: list[Body] = [
            {"name": db, "sizeOnDisk": Int64(size), "empty": size == 0}
            for db, size in sorted(sizes.items())
        ]
        entries = [entry for entry in entries if matches(entry, query)]
        if body.get("nameOnly"):
            return {"databases": [{"name": entry["name"]} for entry in entries], "ok": 1.0}
        total = sum(sizes[entry["name"]] for entry in entries)
        return {
            "databases": entries,
            "totalSize": Int64(total),
            "totalSizeMb": Int64(total // (1024 * 1024)),
            "ok": 1.0,
        }

    return list_databases


def count_handler(documents: Callable[[str], list[Any]]) -> Handler:
    """The ``count`` handler over ``documents(ns)`` (a node's, or every shard's via mongos)."""

    def count(body: Body) -> Body:
        ns = namespace(body, "count")
        query = body.get("query") or {}
        return {
            "n": len(select(documents(ns), query, body.get("skip"), body.get("limit"))),
            "ok": 1.0,
        }

    return count
