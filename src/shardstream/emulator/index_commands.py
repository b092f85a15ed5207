"""Emulator: ``createIndexes`` and ``dropIndexes``, logged as mongod 7.0 logs them.

Each new index is one ``{createIndexes: coll, v, key, name, ...}`` entry on ``<db>.$cmd``
(after the collection's ``create`` when the command created it), even on a non-empty
collection, where mongod would log a two-phase build (``startIndexBuild`` /
``commitIndexBuild``). Each dropped index is one ``{dropIndexes: coll, index: name}`` entry
with the dropped spec in ``o2``, which a change stream's ``operationDescription`` reads.
A build is all or nothing: a unique index over duplicate values (11000) adds no index.

See also src/mongo/db/commands/create_indexes_cmd.cpp and drop_indexes_cmd.cpp.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shardstream.emulator.ddl_commands import not_found, outside_transactions
from shardstream.emulator.document_store import Collection, same_bson
from shardstream.emulator.faults import CommandError
from shardstream.emulator.index_keys import index_options, index_spec
from shardstream.emulator.write_oplog import command
from shardstream.emulator.write_path import WritePath, namespace

Body = dict[str, Any]
Handler = Callable[[Body], Body]


class IndexCommands:
    """The index handlers of one replica-set member."""

    def __init__(self, path: WritePath) -> None:
        """Answer through ``path`` (the node's store and oplog)."""
        self._path = path
        self._store = path.store

    def register(self, commands: dict[str, Handler]) -> None:
        """Add the handlers to a node's command table (lower-case names)."""
        commands["createindexes"] = outside_transactions(self.create_indexes)
        commands["dropindexes"] = outside_transactions(self.drop_indexes)

    def _log(self, ns: str, coll: Collection, o: Body, o2: Any = None) -> None:
        self._path.log(command(ns, coll.ui, o, o2), None)

    def create_indexes(self, body: Body) -> Body:
        """Answer ``createIndexes``; log one ``createIndexes`` entry per new index."""
        ns = namespace(body, "createIndexes")
        raw = body.get("indexes")
        if not isinstance(raw, list) or not raw:
            raise CommandError(9, "FailedToParse", "createIndexes needs a non-empty 'indexes' list")
        specs = [index_spec(spec) for spec in raw]
        with self._store.lock:
            coll = self._store.get(ns)
            created = coll is None
            before = len(coll.indexes) if coll is not None else 1
            new = [spec for spec in specs if self._is_new(coll, spec)]
            if not new:
                return {
                    "numIndexesBefore": before,
                    "numIndexesAfter": before,
                    "note": "all indexes already exist",
                    "ok": 1.0,
                }
            if coll is None:
                coll = self._path.create(ns, {})
            added: list[str] = []
            try:
                for spec in new:
                    coll.add_index(spec)
                    added.append(spec["name"])
            except CommandError:
                for name in added:  # the build is all or nothing, as on mongod
                    coll.drop_index(name)
                raise
            for spec in new:
                self._log(ns, coll, {"createIndexes": ns.partition(".")[2], **spec})
            after = len(coll.indexes)
        return {
            "createdCollectionAutomatically": created,
            "numIndexesBefore": before,
            "numIndexesAfter": after,
            "ok": 1.0,
        }

    @staticmethod
    def _is_new(coll: Collection | None, spec: Body) -> bool:
        existing = coll.indexes if coll is not None else []
        same_name = coll.index(spec["name"]) if coll is not None else None
        if same_name is not None:
            if not same_bson(same_name["key"], spec["key"]):
                raise CommandError(
                    86,
                    "IndexKeySpecsConflict",
                    f"An existing index has the same name as the requested index but a "
                    f"different key: {same_name}",
                )
            if not same_bson(index_options(same_name), index_options(spec)):
                raise CommandError(
                    85,
                    "IndexOptionsConflict",
                    f"Index with name: {spec['name']} already exists with different options",
                )
            return False
        for other in existing:
            if same_bson(other["key"], spec["key"]) and same_bson(
                other.get("partialFilterExpression"), spec.get("partialFilterExpression")
            ):
                raise CommandError(
                    85,
                    "IndexOptionsConflict",
                    f"Index already exists with a different name: {other['name']}",
                )
        return True

    def drop_indexes(self, body: Body) -> Body:
        """Answer ``dropIndexes`` (``index``: a name, a key pattern, names, or ``"*"``)."""
        ns = namespace(body, "dropIndexes")
        which = body.get("index")
        with self._store.lock:
            coll = self._store.get(ns)
            if coll is None:
                raise not_found(ns)
            was = len(coll.indexes)
            names = self._index_names(coll, which)
            for name in names:
                spec = coll.drop_index(name)
                self._log(ns, coll, {"dropIndexes": ns.partition(".")[2], "index": name}, spec)
        reply: Body = {"nIndexesWas": was}
        if which == "*":
            reply["msg"] = "non-_id indexes dropped for collection"
        reply["ok"] = 1.0
        return reply

    @staticmethod
    def _index_names(coll: Collection, which: Any) -> list[str]:
        if which == "*":
            return [spec["name"] for spec in coll.indexes if spec["name"] != "_id_"]
        if isinstance(which, dict):
            found = coll.index_by_key(which)
            if found is None:
                raise CommandError(27, "IndexNotFound", f"can't find index with key: {which}")
            names = [found["name"]]
        elif isinstance(which, str):
            names = [which]
        elif isinstance(which, list) and all(isinstance(name, str) for name in which):
            names = list(which)
        else:
            raise CommandError(9, "FailedToParse", f"invalid 'index' to drop: {which!r}")
        for name in names:
            if name == "_id_":
                raise CommandError(72, "InvalidOptions", "cannot drop _id index")
            if coll.index(name) is None:
                raise CommandError(27, "IndexNotFound", f"index not found with name [{name}]")
        return names
