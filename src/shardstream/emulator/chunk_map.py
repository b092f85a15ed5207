"""Emulator: a sharded collection's chunks, and which shard owns a document.

A chunk is a half-open range ``[min, max)`` of shard key values, owned by one shard; the
chunks of a collection cover every value from ``MinKey`` to ``MaxKey``. A key value is
the tuple of the document's values at the key's paths (a missing field counts as null),
compared in the server's order of BSON values (``bson_order``); a hashed field counts by
its hash, a signed 64-bit integer, so hashed chunks split the integer range.

``shardCollection`` on a hashed key of an empty collection creates two chunks per shard,
spread round the shards, as the server's presplit does; a ranged key (or a collection that
already holds documents) gets one chunk on the primary shard. ``split`` and ``moveChunk``
(``chunk_migration``) change them later. Maps are kept by collection UUID, so a rename
keeps its chunks and a drop (a new UUID if recreated) forgets them.

The hash is the emulator's own (the MD5 of the value's BSON, its first 8 bytes as a
little-endian signed integer), not the server's exact one: only ownership depends on it.

See also src/mongo/s/chunk_manager.h and src/mongo/db/hasher.cpp.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Mapping
from typing import Any, Final

import bson
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey

from shardstream.emulator.bson_order import compare
from shardstream.emulator.cursors import MISSING, lookup
from shardstream.emulator.update_targeting import exact_shard_key

Body = dict[str, Any]
KeyValue = tuple[Any, ...]
CHUNKS_PER_SHARD: Final = 2  # the hashed presplit's default
_INT64: Final = 1 << 64


def hashed(value: Any) -> Int64:
    """A value's hash as a hashed shard key counts it."""
    digest = hashlib.md5(bson.encode({"": value}), usedforsecurity=False).digest()
    return Int64(int.from_bytes(digest[:8], "little", signed=True))


def key_value(document: Mapping[str, Any], pattern: Mapping[str, Any]) -> KeyValue:
    """The shard key value of ``document`` (or of a query's exact values)."""
    values = []
    for path, kind in pattern.items():
        value = lookup(document, path)
        value = None if value is MISSING else value
        values.append(hashed(value) if kind == "hashed" else value)
    return tuple(values)


def _compare_keys(left: KeyValue, right: KeyValue) -> int:
    for a, b in zip(left, right, strict=True):
        order = compare(a, b)
        if order:
            return order
    return 0


@dataclasses.dataclass(slots=True)
class Chunk:
    """``[low, high)`` of key values, owned by ``shard``."""

    low: KeyValue
    high: KeyValue
    shard: str

    def holds(self, value: KeyValue) -> bool:
        """Whether ``value`` falls in the chunk."""
        return _compare_keys(self.low, value) <= 0 and _compare_keys(value, self.high) < 0


class ChunkMap:
    """The chunks of one sharded collection (thread-safe)."""

    def __init__(self, pattern: Mapping[str, Any], chunks: list[Chunk]) -> None:
        self.pattern = dict(pattern)
        self._chunks = chunks
        self._lock = threading.Lock()

    @classmethod
    def initial(cls, pattern: Mapping[str, Any], shards: list[str], *, spread: bool) -> ChunkMap:
        """The chunks ``shardCollection`` creates: spread over ``shards`` (a hashed key of an
        empty collection) or one on the first (the primary shard)."""
        width = len(pattern)
        low: KeyValue = (MinKey(),) * width
        high: KeyValue = (MaxKey(),) * width
        if not spread or len(shards) < 2:
            return cls(pattern, [Chunk(low, high, shards[0])])
        count = CHUNKS_PER_SHARD * len(shards)
        # Equal slices of the signed 64-bit hash range; other key fields start at MinKey.
        cuts = [Int64(-(1 << 63) + (_INT64 * n) // count) for n in range(1, count)]
        bounds = [low, *(((cut,) + (MinKey(),) * (width - 1)) for cut in cuts), high]
        chunks = [Chunk(bounds[n], bounds[n + 1], shards[n % len(shards)]) for n in range(count)]
        return cls(pattern, chunks)

    def chunks(self) -> list[Chunk]:
        """A copy of the chunks, in key order."""
        with self._lock:
            return [dataclasses.replace(chunk) for chunk in self._chunks]

    def shards(self) -> set[str]:
        """The shards owning at least one chunk."""
        with self._lock:
            return {chunk.shard for chunk in self._chunks}

    def owner(self, document: Mapping[str, Any]) -> str:
        """The shard owning ``document``'s key value."""
        return self.owner_of(key_value(document, self.pattern))

    def owner_of(self, value: KeyValue) -> str:
        """The shard owning key ``value``."""
        with self._lock:
            return next(chunk.shard for chunk in self._chunks if chunk.holds(value))

    def owner_of_query(self, query: Mapping[str, Any]) -> str | None:
        """The one shard a query can match on (None: it names no exact key value)."""
        if not exact_shard_key(query, self.pattern):
            return None
        exact = {path: _equality(query, path) for path in self.pattern}
        return self.owner(_nested(exact))

    def chunk_holding(self, document: Mapping[str, Any]) -> Chunk:
        """The chunk holding ``document``'s key value (``moveChunk``'s ``find``)."""
        value = key_value(document, self.pattern)
        with self._lock:
            return next(chunk for chunk in self._chunks if chunk.holds(value))

    def split(self, at: KeyValue) -> None:
        """Split the chunk holding ``at`` there (nothing if ``at`` is already a bound)."""
        with self._lock:
            for index, chunk in enumerate(self._chunks):
                if chunk.holds(at) and _compare_keys(chunk.low, at) != 0:
                    self._chunks[index : index + 1] = [
                        Chunk(chunk.low, at, chunk.shard),
                        Chunk(at, chunk.high, chunk.shard),
                    ]
                    return

    def move(self, low: KeyValue, shard: str) -> None:
        """Give the chunk starting at ``low`` to ``shard``."""
        with self._lock:
            for chunk in self._chunks:
                if _compare_keys(chunk.low, low) == 0:
                    chunk.shard = shard
                    return
        raise KeyError(f"no chunk starts at {low!r}")


def _equality(query: Mapping[str, Any], path: str) -> Any:
    """The exact value ``query`` gives ``path`` (``exact_shard_key`` said there is one)."""
    for name, value in query.items():
        if name == path or path.startswith(f"{name}."):
            if isinstance(value, Mapping) and list(value) == ["$eq"]:
                value = value["$eq"]
            for part in path.split(".")[name.count(".") + 1 :]:
                value = value[part]
            return value
    raise KeyError(path)


def _nested(flat: Mapping[str, Any]) -> Body:
    """``{"a.b": 1}`` as the document ``{"a": {"b": 1}}`` (for ``key_value``'s lookup)."""
    document: Body = {}
    for path, value in flat.items():
        parts = path.split(".")
        here = document
        for part in parts[:-1]:
            here = here.setdefault(part, {})
        here[parts[-1]] = value
    return document
