"""Simulator: one collection's true contents, its chunks, and how documents route to them.

The true (logical) contents are what a client reading through mongos would see:
each document lives in exactly one chunk, on that chunk's owner.  Orphaned copies a
migration leaves on the donor are not part of it.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from typing import Any, Final

from bson.binary import Binary
from bson.objectid import ObjectId

from shardstream.sim.chunks import REGIONS, Chunk, ChunkMap, hash_position
from shardstream.sim.config import CollectionSpec
from shardstream.sim.documents import id_key, new_document

_KEY_ATTEMPTS: Final = 200  # a hashed chunk of 1/16 of the space is hit within ~50 draws


class CollectionState:
    """A collection of the simulated database.

    Args:
        spec: its definition.
        db: the database name.
        collection_uuid: the collection UUID (the same on every shard).
        chunks: its chunk map.
        id_prefix: the first 4 bytes of generated ObjectIds.
    """

    __slots__ = ("chunks", "db", "docs", "id_prefix", "sequence", "spec", "ui")

    def __init__(
        self,
        spec: CollectionSpec,
        db: str,
        collection_uuid: uuid.UUID,
        chunks: ChunkMap,
        id_prefix: bytes,
    ) -> None:
        self.spec = spec
        self.db = db
        self.ui = Binary(collection_uuid.bytes, 4)
        self.chunks = chunks
        self.docs: dict[bytes, dict[str, Any]] = {}
        self.sequence = 0
        self.id_prefix = id_prefix

    @property
    def name(self) -> str:
        """The collection name."""
        return self.spec.name

    @property
    def ns(self) -> str:
        """The namespace, ``db.coll``."""
        return f"{self.db}.{self.spec.name}"

    @property
    def protected_fields(self) -> tuple[str, ...]:
        """Fields updates never change: ``_id`` and the shard key."""
        return ("_id", *(name for name in self.spec.shard_key if name != "_id"))

    def position(self, document: Mapping[str, Any]) -> Any:
        """Where ``document`` falls in the chunk ranges."""
        if not self.spec.sharded:
            return 0
        value = document[self.spec.shard_key[0]]
        return hash_position(value) if self.spec.hashed else value

    def chunk_of(self, document: Mapping[str, Any]) -> Chunk:
        """The chunk holding ``document``."""
        if not self.spec.sharded:
            return self.chunks.chunks[0]
        return self.chunks.chunk_at(self.position(document))

    def document_key(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """The document key: shard-key fields in key order, then ``_id`` unless in the key."""
        key = {name: document[name] for name in self.spec.shard_key}
        key.setdefault("_id", document["_id"])
        return key

    def _next_id(self) -> Any:
        self.sequence += 1
        if not self.spec.sharded:
            return f"k{self.sequence:06d}"
        if self.spec.shard_key[0] == "_id":
            return ObjectId(self.id_prefix + self.sequence.to_bytes(8, "big"))
        return self.sequence

    def make_document(self, rng: random.Random, chunk: Chunk) -> dict[str, Any] | None:
        """A new document whose shard key falls in ``chunk``; None if none was found."""
        spec = self.spec
        if not spec.sharded:
            return new_document(rng, {"_id": self._next_id()})
        field = spec.shard_key[0]
        if not spec.hashed:
            regions = [region for region in REGIONS if chunk.contains(region)]
            if not regions:
                return None
            return new_document(rng, {"_id": self._next_id(), field: rng.choice(regions)})
        for _ in range(_KEY_ATTEMPTS):
            if field == "_id":
                head: dict[str, Any] = {"_id": self._next_id()}
            else:
                head = {field: rng.randrange(1, 2**40)}
            if chunk.contains(hash_position(head[field])):
                if field != "_id":
                    head = {"_id": self._next_id(), **head}
                return new_document(rng, head)
        return None

    def add(self, document: dict[str, Any]) -> None:
        """Store a new document."""
        key = id_key(document["_id"])
        self.docs[key] = document
        self.chunk_of(document).keys.add(key)

    def put(self, document: dict[str, Any]) -> None:
        """Store a new version of an existing document (same ``_id`` and shard key)."""
        self.docs[id_key(document["_id"])] = document

    def remove(self, key: bytes) -> dict[str, Any]:
        """Remove the document with id key ``key`` and return it."""
        document = self.docs.pop(key)
        self.chunk_of(document).keys.remove(key)
        return document

    def pick(self, rng: random.Random, chunk: Chunk) -> bytes | None:
        """A random document key in ``chunk``, or None if it is empty."""
        if not chunk.keys:
            return None
        return chunk.keys.pick(rng)
