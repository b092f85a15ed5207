"""Simulator: chunk ownership, which shard owns which range of a collection's shard key.

A chunk covers a half-open range of *positions*: the value of the first shard-key
field for a range-sharded collection, or its 64-bit hash for a hashed one (a
compound key ``{region: 1, _id: 1}`` is split at ``{region: X, _id: MinKey}``
bounds).  An unsharded collection is one chunk on the primary shard that never
moves.  Each chunk also keeps the keys of the documents in it, so a workload can
pick a document a given shard owns in O(1).
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import random
from collections.abc import Iterator, Sequence
from typing import Any, Final

import bson

from shardstream.errors import ConfigurationError

REGIONS: Final = (
    "af-south",
    "ap-east",
    "ap-south",
    "ap-southeast",
    "ca-central",
    "eu-central",
    "eu-north",
    "eu-south",
    "eu-west",
    "il-central",
    "me-central",
    "me-south",
    "sa-east",
    "us-east",
    "us-south",
    "us-west",
)
_INT64_MIN: Final = -(2**63)
_INT64_SPAN: Final = 2**64


def hash_position(value: Any) -> int:
    """A signed 64-bit hash of a BSON value, deterministic across processes.

    The server hashes with MD5 too (``BSONElementHasher``); this one is not its exact
    function, only a stand-in with the same shape.

    >>> hash_position(42) == hash_position(42), hash_position(42) == hash_position(43)
    (True, False)
    """
    digest = hashlib.md5(bson.encode({"": value}), usedforsecurity=False).digest()
    return int.from_bytes(digest[:8], "little", signed=True)


class KeyBag:
    """A set of document keys (``id_key`` bytes) that hands out a random one reproducibly.

    Python's ``set`` order depends on string hashing, which changes per process;
    this keeps insertion-ordered slots instead, so a seeded pick is reproducible.
    """

    __slots__ = ("_index", "_keys")

    def __init__(self) -> None:
        self._keys: list[bytes] = []
        self._index: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[bytes]:
        return iter(list(self._keys))

    def add(self, key: bytes) -> None:
        """Add ``key`` (no-op if present). Complexity: O(1)."""
        if key not in self._index:
            self._index[key] = len(self._keys)
            self._keys.append(key)

    def remove(self, key: bytes) -> None:
        """Remove ``key``; the last key takes its slot. Complexity: O(1)."""
        slot = self._index.pop(key)
        last = self._keys.pop()
        if slot < len(self._keys):
            self._keys[slot] = last
            self._index[last] = slot

    def pick(self, rng: random.Random) -> bytes:
        """A uniformly random key (the bag must not be empty). Complexity: O(1)."""
        return self._keys[rng.randrange(len(self._keys))]


@dataclasses.dataclass(eq=False, slots=True)
class Chunk:
    """One range of positions and the shard that owns it.

    Attributes:
        lower: inclusive lower bound; None is MinKey.
        upper: exclusive upper bound; None is MaxKey.
        owner: the owning shard.
        keys: keys of the documents in the chunk (owned by ``owner``).
        migrating: a migration of this chunk is under way.
        pins: operations of open prepared transactions on its documents.
        cleaning: the previous owner has not deleted its orphaned copies yet.
    """

    lower: Any
    upper: Any
    owner: str
    keys: KeyBag = dataclasses.field(default_factory=KeyBag)
    migrating: bool = False
    pins: int = 0
    cleaning: bool = False

    def contains(self, position: Any) -> bool:
        """Whether ``position`` falls in the chunk's range."""
        return (self.lower is None or position >= self.lower) and (
            self.upper is None or position < self.upper
        )

    @property
    def movable(self) -> bool:
        """Whether a migration may start now (none running, no open transaction, no orphans)."""
        return not self.migrating and self.pins == 0 and not self.cleaning

    @property
    def writable_in_transaction(self) -> bool:
        """Whether a transaction may touch it (never while it migrates)."""
        return not self.migrating


class ChunkMap:
    """The chunks of one collection, sorted by range.

    Args:
        bounds: the split points, strictly increasing (n points give n + 1 chunks).
        owner: the shard that owns every chunk at first.
        movable: False for an unsharded collection.
    """

    __slots__ = ("_lowers", "chunks", "movable")

    def __init__(self, bounds: Sequence[Any], owner: str, *, movable: bool = True) -> None:
        if any(a >= b for a, b in itertools.pairwise(bounds)):
            raise ConfigurationError(f"expected increasing chunk bounds, got {list(bounds)!r}")
        edges = [None, *bounds, None]
        self.chunks = [Chunk(lo, hi, owner) for lo, hi in itertools.pairwise(edges)]
        self._lowers = list(bounds)
        self.movable = movable

    def chunk_at(self, position: Any) -> Chunk:
        """The chunk holding ``position``. Complexity: O(log chunks)."""
        return self.chunks[bisect.bisect_right(self._lowers, position)]

    def owned_by(self, shard: str) -> list[Chunk]:
        """The chunks ``shard`` owns, in range order."""
        return [chunk for chunk in self.chunks if chunk.owner == shard]

    def owners(self) -> list[str]:
        """The shards owning at least one chunk, in order of first appearance."""
        return list(dict.fromkeys(chunk.owner for chunk in self.chunks))


def range_bounds(count: int) -> list[str]:
    """Split points dividing :data:`REGIONS` into ``count`` chunks (fewer if too few regions)."""
    count = min(count, len(REGIONS))
    return [REGIONS[i * len(REGIONS) // count] for i in range(1, count)]


def hashed_bounds(count: int) -> list[int]:
    """Split points dividing the signed 64-bit hash space into ``count`` equal chunks."""
    return [_INT64_MIN + i * _INT64_SPAN // count for i in range(1, count)]
