"""Emulator: filling a node's collections without logging, for test fixtures.

Documents are normalised as a write would store them (decoded from their BSON with the
wire codec options, ``_id`` first), so ``find`` returns what a client would have read back
after inserting them; nothing is logged, so the oplog holds only what a test appends or a
client writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import bson

from shardstream.emulator.document_store import Body, Collection, DocumentStore, id_first
from shardstream.emulator.index_keys import index_spec
from shardstream.emulator.wire import CODEC_OPTIONS


def normalize(doc: Mapping[str, Any]) -> Body:
    """``doc`` as it would be stored: decoded from its BSON, ``_id`` first (added if absent).

    mongod moves ``_id`` to the front of an inserted document and generates an ObjectId
    when it is missing; a client (pymongo) normally does both already.
    """
    raw = getattr(doc, "raw", None)
    decoded = bson.decode(raw if isinstance(raw, bytes) else bson.encode(doc), CODEC_OPTIONS)
    return id_first(decoded)


def load(
    store: DocumentStore,
    ns: str,
    docs: Iterable[Mapping[str, Any]],
    *,
    options: Mapping[str, Any] | None = None,
    indexes: Iterable[Mapping[str, Any]] = (),
) -> Collection:
    """Add ``docs`` to ``ns`` in ``store`` (created with ``options`` and ``indexes`` if missing).

    Raises:
        CommandError: ``DuplicateKey`` (11000) if a document breaks a unique index.
    """
    with store.lock:
        coll = store.get(ns)
        if coll is None:
            coll = store.create(ns, options)
        for spec in indexes:
            if coll.index(spec["name"]) is None:
                coll.add_index(index_spec(spec))
        for doc in docs:
            coll.insert(normalize(doc))
        return coll


class LoadMethods:
    """Test helpers that fill a node's store without logging, mixed into every node."""

    store: DocumentStore

    def insert(self, ns: str, doc: Mapping[str, Any]) -> None:
        """Add ``doc`` to collection ``ns`` ("db.coll"), created if missing; log nothing.

        Raises:
            CommandError: ``DuplicateKey`` (11000) if its ``_id`` or a unique key is taken.
        """
        load(self.store, ns, [doc])

    def load_collection(
        self,
        ns: str,
        docs: Iterable[Mapping[str, Any]],
        *,
        options: Mapping[str, Any] | None = None,
        indexes: Iterable[Mapping[str, Any]] | None = None,
    ) -> None:
        """Make ``ns`` a new collection (replacing any, new UUID) holding ``docs``; log nothing.

        Args:
            ns: "db.coll".
            docs: The documents, in order (``_id`` is moved first, or generated).
            options: The collection options, as ``create`` would store them.
            indexes: Index specs besides ``_id_`` (``{key, name, unique?, ...}``).

        Raises:
            CommandError: ``DuplicateKey`` (11000) if two documents share a unique key.
        """
        with self.store.lock:
            self.store.put(ns, None)
            load(self.store, ns, docs, options=options, indexes=indexes or ())
