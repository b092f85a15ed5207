"""Emulator: the collections a node holds: options, UUID, indexes and documents.

Documents are plain dicts as :data:`~shardstream.emulator.wire.CODEC_OPTIONS` decodes them,
so each re-encodes to the bytes that were written (field order and BSON types). They are
kept in insertion order (a real collection scan's RecordId order: an update keeps a
document's place) and keyed by the BSON bytes of ``{"_id": value}``. A stored dict is
never changed in place: writers replace it, so a snapshot (a cursor's batch, a
transaction's undo log) stays valid without copying documents. Each document also has a
record id, its place in that order, so an aborted delete puts it back where it was.

Uniqueness (``_id`` and every ``unique: true`` index) compares the BSON encoding of the
indexed values, a missing field counting as null; so ``1`` and ``1.0`` are different keys
here, where a real index would call them equal.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Mapping
from typing import Any, Final

import bson
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.objectid import ObjectId

from shardstream.emulator.cursors import MISSING, matches
from shardstream.emulator.faults import CommandError, WriteError
from shardstream.emulator.index_keys import ID_INDEX, index_key, render_key

Body = dict[str, Any]
# Collection UUIDs are derived from the namespace and a creation number, so emulated
# oplogs are reproducible run to run while a re-created collection still gets a new one.
_UUID_NAMESPACE: Final = uuid.UUID("5eb5a5e1-0000-4000-8000-000000000000")


def id_key(value: Any) -> bytes:
    """The store key of the document whose ``_id`` is ``value``."""
    return bson.encode({"_id": value})


def same_bson(a: Any, b: Any) -> bool:
    """Whether two values have the same BSON encoding (type and field order count)."""
    return bson.encode({"": a}) == bson.encode({"": b})


class Collection:
    """One collection: its catalog entry (options, UUID, indexes) and its documents."""

    def __init__(self, ns: str, ui: Binary, options: Mapping[str, Any]) -> None:
        """Create an empty collection with only the ``_id`` index."""
        self.ns = ns
        self.ui = ui
        self.options: Body = dict(options)
        self.indexes: list[Body] = [dict(ID_INDEX)]
        self._docs: dict[bytes, Body] = {}
        self._record_ids: dict[bytes, int] = {}  # store key -> place in insertion order
        self._next_record_id = 0
        self._unique: dict[str, dict[bytes, bytes]] = {}  # index name -> key -> store key
        # How many _ids may equal a plain int under another encoding (1.0, Int64(1), ...):
        # with none, an int _id missing from _docs is missing (no O(n) scan per upsert).
        self._loose_ids = 0

    def count(self) -> int:
        """How many documents the collection holds."""
        return len(self._docs)

    def documents(self) -> list[Body]:
        """The documents in insertion order (a snapshot of the list)."""
        return list(self._docs.values())

    def get(self, key: bytes) -> Body | None:
        """The document stored under ``key`` (see :func:`id_key`)."""
        return self._docs.get(key)

    def find(self, query: Mapping[str, Any], limit: int | None = None) -> list[Body]:
        """The documents matching ``query`` (the ``find`` subset), in insertion order.

        Complexity: O(1) for an ``_id`` equality (a sync's usual write), else O(n), or up
        to the ``limit``-th match.
        """
        wanted = query.get("_id", MISSING)
        if isinstance(wanted, Mapping) and list(wanted) == ["$eq"]:
            wanted = wanted["$eq"]
        operator = isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted)
        if wanted is not MISSING and not operator:
            doc = self._docs.get(id_key(wanted))
            if doc is not None:
                return [doc] if matches(doc, query) else []
            # A number also equals the same number of another type (1 == 1.0): scan.
            if not isinstance(wanted, int | float | Decimal128):
                return []
            if type(wanted) is int and not self._loose_ids:
                return []
        matching = (doc for doc in self._docs.values() if matches(doc, query))
        return list(itertools.islice(matching, limit))

    def data_size(self) -> int:
        """The BSON size of all documents, in bytes."""
        return sum(len(bson.encode(doc)) for doc in self._docs.values())

    # -- writes ------------------------------------------------------------------------

    def insert(self, doc: Body) -> bytes:
        """Add ``doc`` (which has an ``_id``); return its key.

        Raises:
            WriteError: ``DuplicateKey`` (11000) on ``_id`` or a unique index.
        """
        key = id_key(doc["_id"])
        if key in self._docs:
            self._duplicate(ID_INDEX, {"_id": doc["_id"]})
        claims = self._claims(doc, key)
        self._docs[key] = doc
        self._loose_ids += _loose(doc["_id"])
        self._record_ids[key] = self._next_record_id
        self._next_record_id += 1
        for name, claimed in claims:
            self._unique[name][claimed] = key
        return key

    def record_id(self, key: bytes) -> int:
        """The place of the document under ``key`` in insertion order."""
        return self._record_ids[key]

    def restore(self, key: bytes, doc: Body, record_id: int) -> None:
        """Put back a deleted document at its old place (undo of a delete).

        Complexity: O(1) when nothing was inserted after it, else O(n log n), as the
        order is rebuilt; only an aborted transaction's delete comes here.
        """
        newest = self._record_ids[next(reversed(self._docs))] if self._docs else -1
        self.insert(doc)
        self._record_ids[key] = record_id
        if record_id < newest:
            order = sorted(self._docs, key=self._record_ids.__getitem__)
            self._docs = {k: self._docs[k] for k in order}

    def replace(self, key: bytes, doc: Body) -> None:
        """Store ``doc`` in place of the document under ``key`` (same ``_id``).

        Raises:
            WriteError: ``DuplicateKey`` on a unique index held by another document.
        """
        claims = self._claims(doc, key)
        self._release(self._docs[key])
        self._docs[key] = doc
        for name, claimed in claims:
            self._unique[name][claimed] = key

    def delete(self, key: bytes) -> Body:
        """Remove and return the document under ``key``."""
        doc = self._docs.pop(key)
        self._loose_ids -= _loose(doc["_id"])
        del self._record_ids[key]
        self._release(doc)
        return doc

    # -- indexes -----------------------------------------------------------------------

    def index(self, name: str) -> Body | None:
        """The index spec called ``name``."""
        return next((spec for spec in self.indexes if spec["name"] == name), None)

    def index_by_key(self, pattern: Any) -> Body | None:
        """The first index spec whose key pattern is ``pattern`` (same BSON)."""
        return next((spec for spec in self.indexes if same_bson(spec["key"], pattern)), None)

    def add_index(self, spec: Body) -> None:
        """Add index ``spec`` (a new name); build its unique keys over the documents.

        Raises:
            WriteError: ``DuplicateKey`` if a unique index finds two equal keys.
        """
        if spec.get("unique"):
            keys: dict[bytes, bytes] = {}
            for key, doc in self._docs.items():
                value = index_key(spec, doc)
                if value is None:
                    continue
                encoded = bson.encode(value)
                if encoded in keys:
                    self._duplicate(spec, value)
                keys[encoded] = key
            self._unique[spec["name"]] = keys
        self.indexes.append(spec)

    def drop_index(self, name: str) -> Body:
        """Remove and return the index called ``name`` (which exists)."""
        spec = self.index(name)
        assert spec is not None, f"drop_index of a missing index {name!r}"
        self.indexes.remove(spec)
        self._unique.pop(name, None)
        return spec

    def _claims(self, doc: Body, key: bytes) -> list[tuple[str, bytes]]:
        # Check every unique index before changing any, so a failed write leaves no trace.
        claims: list[tuple[str, bytes]] = []
        for spec in self.indexes:
            name = spec["name"]
            if name not in self._unique:
                continue
            value = index_key(spec, doc)
            if value is None:
                continue
            encoded = bson.encode(value)
            holder = self._unique[name].get(encoded)
            if holder is not None and holder != key:
                self._duplicate(spec, value)
            claims.append((name, encoded))
        return claims

    def _release(self, doc: Body) -> None:
        for spec in self.indexes:
            keys = self._unique.get(spec["name"])
            value = index_key(spec, doc) if keys is not None else None
            if keys is not None and value is not None:
                keys.pop(bson.encode(value), None)

    def _duplicate(self, spec: Mapping[str, Any], value: Body) -> None:
        raise WriteError(
            11000,
            "DuplicateKey",
            f"E11000 duplicate key error collection: {self.ns} index: {spec['name']} "
            f"dup key: {render_key(value)}",
            {"keyPattern": dict(spec["key"]), "keyValue": value},
        )


def _loose(value: Any) -> bool:
    # Python ints encode by size (int32, else int64), so two equal plain ints share bytes;
    # a bool is kept with the others, as the scan compares with Python's == (True == 1).
    return isinstance(value, bool | float | Decimal128 | Int64)


def id_first(doc: Body) -> Body:
    """``doc`` with ``_id`` as its first field (a new ObjectId if it has none)."""
    if next(iter(doc), None) == "_id":
        return doc
    _id = doc["_id"] if "_id" in doc else ObjectId()
    return {"_id": _id, **{k: v for k, v in doc.items() if k != "_id"}}


class DocumentStore:
    """Every collection of one node, by namespace ``db.coll``; ``lock`` guards them all."""

    def __init__(self) -> None:
        """Create an empty store."""
        self.lock = threading.RLock()
        self._collections: dict[str, Collection] = {}
        self._created = itertools.count(1)

    def get(self, ns: str) -> Collection | None:
        """The collection ``ns``, if it exists."""
        with self.lock:
            return self._collections.get(ns)

    def namespaces(self) -> list[str]:
        """Every namespace, in creation order."""
        with self.lock:
            return list(self._collections)

    def documents(self, ns: str) -> list[Body]:
        """The documents of ``ns`` in insertion order (empty when it does not exist)."""
        with self.lock:
            coll = self._collections.get(ns)
            return coll.documents() if coll is not None else []

    def create(self, ns: str, options: Mapping[str, Any] | None = None) -> Collection:
        """Create the empty collection ``ns`` with a new UUID.

        Raises:
            CommandError: ``NamespaceExists`` (48) if it exists.
        """
        with self.lock:
            if ns in self._collections:
                raise CommandError(48, "NamespaceExists", f"Collection {ns} already exists.")
            ui = Binary(uuid.uuid5(_UUID_NAMESPACE, f"{ns}#{next(self._created)}").bytes, 4)
            coll = self._collections[ns] = Collection(ns, ui, options or {})
            return coll

    def put(self, ns: str, coll: Collection | None) -> None:
        """Make ``coll`` the collection ``ns`` (None: remove it); for undo and rename."""
        with self.lock:
            if coll is None:
                self._collections.pop(ns, None)
            else:
                coll.ns = ns
                self._collections[ns] = coll
