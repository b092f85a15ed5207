"""Emulator: the DDL commands a replica-set member answers, logged as mongod 7.0 logs them.

``create``, ``drop``, ``dropDatabase``, ``renameCollection`` and ``collMod`` (the index
commands are in :mod:`~shardstream.emulator.index_commands`). Each change is one
``op: "c"`` entry on ``<db>.$cmd`` (``dropDatabase`` first drops each collection, one entry
each); ``drop`` and a rename over an existing target carry ``o2: {numRecords}``, and
``collMod`` the old options in ``o2``, which a change stream's ``stateBeforeChange`` reads.

Views are :mod:`~shardstream.emulator.views`' (``create`` with ``viewOn``, ``drop``).
Refused: DDL inside a transaction (263), renaming across databases (20), and
``collMod`` options other than validation, pre-images and an index's ``hidden`` /
``expireAfterSeconds`` (``InvalidOptions``, 72).

See also src/mongo/db/op_observer/op_observer_impl.cpp.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from bson.int64 import Int64

from shardstream.emulator.document_store import Collection
from shardstream.emulator.faults import CommandError, require_admin
from shardstream.emulator.views import create_view, drop_view
from shardstream.emulator.write_oplog import command
from shardstream.emulator.write_path import WritePath, arguments, namespace

Body = dict[str, Any]
Handler = Callable[[Body], Body]
_COLL_MOD_OPTIONS: Final = frozenset(
    {"validator", "validationLevel", "validationAction", "changeStreamPreAndPostImages", "index"}
)
_INDEX_MOD_OPTIONS: Final = ("hidden", "expireAfterSeconds")


def not_found(ns: str) -> CommandError:
    """The ``NamespaceNotFound`` (26) error for a missing collection ``ns``."""
    return CommandError(26, "NamespaceNotFound", f"ns does not exist: {ns}")


def outside_transactions(handler: Handler) -> Handler:
    """Wrap a DDL handler so that it refuses to run inside a transaction."""

    def run(body: Body) -> Body:
        if body.get("autocommit") is False:
            raise CommandError(
                263,
                "OperationNotSupportedInTransaction",
                f"Cannot run '{next(iter(body))}' in a multi-document transaction (emulator)",
            )
        return handler(body)

    return run


class DdlCommands:
    """The DDL handlers of one replica-set member."""

    def __init__(self, path: WritePath) -> None:
        """Answer through ``path`` (the node's store, oplog and transactions)."""
        self._path = path
        self._store = path.store

    def register(self, commands: dict[str, Handler]) -> None:
        """Add the handlers to a node's command table (lower-case names)."""
        for name, handler in (
            ("create", self.create),
            ("drop", self.drop),
            ("dropdatabase", self.drop_database),
            ("renamecollection", self.rename_collection),
            ("collmod", self.coll_mod),
        ):
            commands[name] = outside_transactions(handler)

    def _log(self, ns: str, coll: Collection | None, o: Body, o2: Any = None) -> None:
        self._path.log(command(ns, coll.ui if coll is not None else None, o, o2), None)

    def create(self, body: Body) -> Body:
        """Answer ``create``: store the options and log ``{create, ...options, idIndex}``."""
        ns = namespace(body, "create")
        options = arguments(body, "create")
        with self._store.lock:
            if "viewOn" in options:
                create_view(self._path, ns, options)
            else:
                self._path.create(ns, options)
        return {"ok": 1.0}

    def _drop(self, ns: str, coll: Collection) -> None:
        self._store.put(ns, None)
        o2 = {"numRecords": Int64(coll.count())}
        self._log(ns, coll, {"drop": ns.partition(".")[2]}, o2)

    def drop(self, body: Body) -> Body:
        """Answer ``drop`` (a missing collection is not an error, as since mongod 7.0)."""
        ns = namespace(body, "drop")
        with self._store.lock:
            coll = self._store.get(ns)
            if coll is None:
                drop_view(self._path, ns)
                return {"ok": 1.0}
            self._drop(ns, coll)
        return {"nIndexesWas": len(coll.indexes), "ns": ns, "ok": 1.0}

    def drop_database(self, body: Body) -> Body:
        """Answer ``dropDatabase``: drop each collection, then log ``{dropDatabase: 1}``."""
        db = body.get("$db")
        with self._store.lock:
            names = [ns for ns in self._store.namespaces() if ns.partition(".")[0] == db]
            for ns in names:
                coll = self._store.get(ns)
                if coll is not None:
                    self._drop(ns, coll)
            if not names:
                return {"ok": 1.0}
            self._log(f"{db}.$cmd", None, {"dropDatabase": 1})
        return {"dropped": db, "ok": 1.0}

    def rename_collection(self, body: Body) -> Body:
        """Answer ``renameCollection`` (admin) within one database."""
        require_admin(body, "renameCollection")
        source, target = body.get("renameCollection"), body.get("to")
        if not isinstance(source, str) or not isinstance(target, str) or "." not in target:
            raise CommandError(73, "InvalidNamespace", f"Invalid target namespace: {target}")
        if source.partition(".")[0] != target.partition(".")[0]:
            raise CommandError(20, "IllegalOperation", "emulator renames within a database only")
        if source == target:
            raise CommandError(20, "IllegalOperation", "Can't rename a collection to itself")
        with self._store.lock:
            coll, existing = self._store.get(source), self._store.get(target)
            if coll is None:
                raise CommandError(
                    26, "NamespaceNotFound", f"Source collection {source} does not exist"
                )
            if existing is not None and not body.get("dropTarget"):
                raise CommandError(48, "NamespaceExists", f"target namespace exists: {target}")
            o: Body = {"renameCollection": source, "to": target, "stayTemp": False}
            o2 = None
            if existing is not None:  # the dropped target is named by UUID, its size in o2
                o["dropTarget"] = existing.ui
                o2 = {"numRecords": Int64(existing.count())}
            self._store.put(source, None)
            self._store.put(target, coll)
            self._log(source, coll, o, o2)
        return {"ok": 1.0}

    def coll_mod(self, body: Body) -> Body:
        """Answer ``collMod``: merge collection options, or change one index's options."""
        ns = namespace(body, "collMod")
        changes = arguments(body, "collMod")
        unknown = set(changes) - _COLL_MOD_OPTIONS
        if unknown:
            raise CommandError(72, "InvalidOptions", f"unknown option to collMod: {min(unknown)}")
        reply: Body = {}
        with self._store.lock:
            coll = self._store.get(ns)
            if coll is None:
                raise not_found(ns)
            o2: Body = {"collectionOptions_old": {"uuid": coll.ui, **coll.options}}
            if "index" in changes:
                changes["index"], o2["indexOptions_old"] = self._modify_index(
                    coll, changes["index"], reply
                )
            coll.options.update({k: v for k, v in changes.items() if k != "index"})
            self._log(ns, coll, {"collMod": ns.partition(".")[2], **changes}, o2)
        reply["ok"] = 1.0
        return reply

    def _modify_index(self, coll: Collection, change: Any, reply: Body) -> tuple[Body, Body]:
        if not isinstance(change, dict):
            raise CommandError(9, "FailedToParse", "collMod 'index' must be a document")
        if "name" in change:
            spec = coll.index(change["name"])
        else:
            spec = coll.index_by_key(change.get("keyPattern"))
        if spec is None:
            raise CommandError(
                27, "IndexNotFound", f"cannot find index {change!r} for ns {coll.ns}"
            )
        unsupported = set(change) - {"name", "keyPattern", *_INDEX_MOD_OPTIONS}
        if unsupported:
            raise CommandError(72, "InvalidOptions", f"emulator cannot collMod {min(unsupported)}")
        logged: Body = {"name": spec["name"]}
        old: Body = {}
        for option in _INDEX_MOD_OPTIONS:
            if option not in change:
                continue
            old[option] = spec.get(option, False if option == "hidden" else None)
            reply[f"{option}_old"], reply[f"{option}_new"] = old[option], change[option]
            logged[option] = change[option]
            if option == "hidden" and not change[option]:
                spec.pop("hidden", None)  # an index that is not hidden has no such field
            else:
                spec[option] = change[option]
        return logged, old
