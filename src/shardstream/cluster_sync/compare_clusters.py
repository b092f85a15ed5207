"""``shardstream verify``: are the target's collections the source's, document for document?

Per namespace in scope: the document count and an order-independent hash (the sum, mod
2**128, of each document's SHA-256 over its BSON bytes, so field order and types count
but the order documents come back in does not), on both sides; where they differ, the
``_id``s that are missing on the target, extra on it, or different.  Both sides are read
as raw BSON through their routers, so nothing is decoded or re-encoded on the way.

The target is listed too: a non-empty collection there that lies in the image of the scope
(a name the scope and its ``--map`` rules would write to) but that no source collection
maps onto is a difference, "only on the target".  Without this, a stray collection a sync
should have dropped (or never created) would leave ``verify`` saying equal.  Target
collections outside that image, and the server's and the sync's own databases, are not
looked at.

Compare at a quiet point (no writes to the source), or with the sync stopped after it
applied everything up to a common cluster time: a moving source shows the lag as
differences.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from typing import Any, Final

import bson
from pymongo import MongoClient

from shardstream.cluster_sync.namespace_map import Namespace, NamespaceMap
from shardstream.cluster_sync.source_catalog import majority_reader

SAMPLE_IDS: Final = 5
_MOD: Final = 2**128


@dataclasses.dataclass(frozen=True, slots=True)
class NamespaceComparison:
    """One source namespace against its target.

    Attributes:
        source / target: the namespaces compared.
        source_count / target_count: documents on each side.
        source_hash / target_hash: the order-independent hashes, as hex.
        missing / extra / different: sample ``_id``s (at most ``SAMPLE_IDS`` each) and,
            in ``*_count``, how many there are in all.
        only_on_target: ``target`` is a non-empty collection in the scope's image with no
            source collection; ``source`` is the source name that would map onto it.
    """

    source: Namespace
    target: Namespace
    source_count: int
    target_count: int
    source_hash: str
    target_hash: str
    missing: tuple[Any, ...]
    extra: tuple[Any, ...]
    different: tuple[Any, ...]
    missing_count: int
    extra_count: int
    different_count: int
    only_on_target: bool = False

    @property
    def equal(self) -> bool:
        """Same documents on both sides."""
        return self.source_hash == self.target_hash and self.source_count == self.target_count


@dataclasses.dataclass(frozen=True, slots=True)
class VerifyReport:
    """Every namespace compared; ``equal`` only when all of them are."""

    namespaces: tuple[NamespaceComparison, ...]

    @property
    def equal(self) -> bool:
        """True when every namespace matched."""
        return all(item.equal for item in self.namespaces)

    def lines(self) -> Iterator[str]:
        """A human summary: one line per namespace, then the sample ids of differences."""
        for item in self.namespaces:
            mark = "equal" if item.equal else "DIFFERENT"
            source, target = ".".join(item.source), ".".join(item.target)
            if item.only_on_target:
                yield (
                    f"{mark:9} {target}: only on the target (no source {source}), "
                    f"{item.target_count} documents, hash {item.target_hash[:16]}"
                )
                yield (
                    f"          only on target: {item.extra_count} "
                    f"(e.g. _id {', '.join(map(repr, item.extra))})"
                )
                continue
            yield (
                f"{mark:9} {source} -> {target}: {item.source_count} / {item.target_count} "
                f"documents, hash {item.source_hash[:16]} / {item.target_hash[:16]}"
            )
            for label, ids, count in (
                ("missing on target", item.missing, item.missing_count),
                ("extra on target", item.extra, item.extra_count),
                ("different", item.different, item.different_count),
            ):
                if count:
                    yield f"          {label}: {count} (e.g. _id {', '.join(map(repr, ids))})"
        yield "verify: equal" if self.equal else "verify: DIFFERENT"


def verify(
    source: MongoClient[Any], target: MongoClient[Any], namespaces: NamespaceMap
) -> VerifyReport:
    """Compare every collection in scope on ``source`` with its mapped target.

    Then every non-empty target collection in the scope's image that no source collection
    mapped onto is added as a difference (``only_on_target``).
    """
    compared: list[NamespaceComparison] = []
    for db in sorted(source.list_database_names()):
        if not namespaces.in_scope(db):
            continue
        for name in sorted(source[db].list_collection_names(filter={"type": "collection"})):
            if namespaces.in_scope(db, name):
                compared.append(_compare(source, target, (db, name), namespaces.target(db, name)))
    mapped_onto = {item.target for item in compared}
    compared.extend(_only_on_target(target, namespaces, mapped_onto))
    return VerifyReport(tuple(compared))


def _only_on_target(
    target: MongoClient[Any], namespaces: NamespaceMap, mapped_onto: set[Namespace]
) -> Iterator[NamespaceComparison]:
    """The target's non-empty collections in the scope's image outside ``mapped_onto``."""
    for db in sorted(target.list_database_names()):
        if not namespaces.may_hold_image(db):
            continue
        for name in sorted(target[db].list_collection_names(filter={"type": "collection"})):
            origin = namespaces.source_of(db, name)
            if origin is None or (db, name) in mapped_onto:
                continue
            digests = _digests(target, (db, name))
            # An empty collection holds no document the source lacks: not a difference.
            if digests:
                yield compare_namespace(origin, (db, name), {}, digests, only_on_target=True)


def _digests(client: MongoClient[Any], ns: Namespace) -> dict[bytes, bytes]:
    collection = majority_reader(client, ns)
    out: dict[bytes, bytes] = {}
    for document in collection.find({}, batch_size=1000):
        key = bson.encode({"_id": document["_id"]})
        out[key] = hashlib.sha256(document.raw).digest()
    return out


def _compare(
    source: MongoClient[Any], target: MongoClient[Any], ns: Namespace, mapped: Namespace
) -> NamespaceComparison:
    return compare_namespace(ns, mapped, _digests(source, ns), _digests(target, mapped))


def compare_namespace(
    ns: Namespace,
    mapped: Namespace,
    left: dict[bytes, bytes],
    right: dict[bytes, bytes],
    *,
    only_on_target: bool = False,
) -> NamespaceComparison:
    """Compare one namespace's documents (key -> digest) on each side; with whole
    documents as values the counts hold, the hashes do not (they read a digest's first
    16 bytes)."""
    missing = [key for key in left if key not in right]
    extra = [key for key in right if key not in left]
    different = [key for key in left if key in right and left[key] != right[key]]
    return NamespaceComparison(
        source=ns,
        target=mapped,
        source_count=len(left),
        target_count=len(right),
        source_hash=_hash(left.values()),
        target_hash=_hash(right.values()),
        missing=_sample(missing),
        extra=_sample(extra),
        different=_sample(different),
        missing_count=len(missing),
        extra_count=len(extra),
        different_count=len(different),
        only_on_target=only_on_target,
    )


def _hash(digests: Any) -> str:
    total = sum(int.from_bytes(digest[:16], "big") for digest in digests) % _MOD
    return f"{total:032x}"


def _sample(keys: list[bytes]) -> tuple[Any, ...]:
    return tuple(bson.decode(key)["_id"] for key in keys[:SAMPLE_IDS])
