"""Emulator: the one way a write reaches a node's collections and oplog.

Each change to a user collection is applied to the :class:`DocumentStore` and logged with
the entry mongod writes for it: at once, or (inside a transaction) buffered for the
transaction's ``applyOps``, after noting what it replaces so an abort can undo it.
Callers hold ``store.lock`` for the whole command, so the oplog order is the order in which
changes were applied. The ``local`` database is never logged, as on a real node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from shardstream.emulator import write_oplog
from shardstream.emulator.document_store import (
    Collection,
    DocumentStore,
    id_first,
    id_key,
)
from shardstream.emulator.faults import CommandError, WriteError
from shardstream.emulator.index_keys import ID_INDEX
from shardstream.emulator.transactions import Transaction, TransactionTable
from shardstream.emulator.write_oplog import OplogWriter

Body = dict[str, Any]
# The DDL and index commands a user runs on a collection or database (mongos forwards them,
# a write block refuses them, a spread collection's reach every shard).
USER_DDL: Final = (
    "create",
    "drop",
    "dropdatabase",
    "renamecollection",
    "collmod",
    "createindexes",
    "dropindexes",
)
# Fields every command may carry that are not the command's own arguments.
GENERIC_FIELDS = frozenset(
    {
        "lsid",
        "txnNumber",
        "autocommit",
        "startTransaction",
        "writeConcern",
        "readConcern",
        "comment",
        "maxTimeMS",
        "apiVersion",
        "apiStrict",
        "apiDeprecationErrors",
        "stmtId",
        "stmtIds",
    }
)


def namespace(body: Mapping[str, Any], command: str) -> str:
    """The ``db.coll`` a command names in its first field (and ``$db``).

    Raises:
        CommandError: ``InvalidNamespace`` (73) for an empty or ``$``-holding name.
    """
    coll, db = body.get(command), body.get("$db")
    if not isinstance(coll, str) or not coll or "$" in coll or not isinstance(db, str):
        raise CommandError(73, "InvalidNamespace", f"Invalid namespace specified '{db}.{coll}'")
    return f"{db}.{coll}"


def arguments(body: Mapping[str, Any], command: str) -> Body:
    """The command's own fields: ``body`` minus its name, ``$``-fields and generic fields."""
    return {
        key: value
        for key, value in body.items()
        if key != command and not key.startswith("$") and key not in GENERIC_FIELDS
    }


class WritePath:
    """A node's store, its oplog writer and its open transactions, written together."""

    def __init__(self, store: DocumentStore, oplog: OplogWriter) -> None:
        """Write to ``store`` and log to ``oplog``."""
        self.store = store
        self.oplog = oplog
        self.transactions = TransactionTable(store, oplog)

    def log(self, body: Body, txn: Transaction | None) -> None:
        """Log ``body`` now, or buffer it for ``txn``'s commit."""
        if body["ns"].startswith("local."):
            return
        if txn is None:
            self.oplog.write(body)
        else:
            txn.ops.append(write_oplog.inner(body))

    def create(
        self, ns: str, options: Mapping[str, Any], txn: Transaction | None = None
    ) -> Collection:
        """Create ``ns`` and log its ``create`` (``NamespaceExists`` if it exists)."""
        coll = self.store.create(ns, options)
        if txn is not None:
            txn.note_created(ns)
        o = {"create": ns.partition(".")[2], **coll.options, "idIndex": dict(ID_INDEX)}
        self.log(write_oplog.command(ns, coll.ui, o), txn)
        return coll

    def collection(self, ns: str, txn: Transaction | None) -> Collection:
        """The collection ``ns``, created (and logged) first if missing, as inserts do."""
        coll = self.store.get(ns)
        return coll if coll is not None else self.create(ns, {}, txn)

    def insert(self, ns: str, doc: Body, txn: Transaction | None) -> Body:
        """Insert ``doc`` (``_id`` moved first, or generated) into ``ns``; return it.

        Raises:
            WriteError: ``DuplicateKey`` (11000); ``BadValue`` (2) for an array ``_id``.
        """
        doc = id_first(doc)
        if isinstance(doc["_id"], list):
            raise WriteError(2, "BadValue", "can't use an array for _id")
        coll = self.collection(ns, txn)
        if txn is not None:
            txn.note_write(coll, id_key(doc["_id"]))
        coll.insert(doc)
        self.log(write_oplog.crud("i", ns, coll.ui, doc, {"_id": doc["_id"]}), txn)
        return doc

    def update(
        self, coll: Collection, pre: Body, post: Body, *, replacement: bool, txn: Transaction | None
    ) -> bool:
        """Store ``post`` in place of ``pre``; return whether anything changed.

        A replacement-style update logs the whole new document; an operator or pipeline
        update logs a delta (or the whole document when a delta cannot say it).
        """
        # The delta is also the no-op check: an empty one means the same fields, values
        # and order, so the same bytes (None: the order changed).
        diff = write_oplog.delta(pre, post)
        if diff == {}:
            return False  # a no-op update logs nothing, as on mongod
        key = id_key(pre["_id"])
        if txn is not None:
            txn.note_write(coll, key)
        coll.replace(key, post)
        if replacement:
            body = write_oplog.replacement(coll.ns, coll.ui, post)
        else:
            body = write_oplog.update(coll.ns, coll.ui, post, diff)
        self.log(body, txn)
        return True

    def delete(self, coll: Collection, doc: Body, txn: Transaction | None) -> None:
        """Delete ``doc`` from ``coll``."""
        key = id_key(doc["_id"])
        if txn is not None:
            txn.note_write(coll, key)
        coll.delete(key)
        self.log(write_oplog.crud("d", coll.ns, coll.ui, {"_id": doc["_id"]}), txn)
