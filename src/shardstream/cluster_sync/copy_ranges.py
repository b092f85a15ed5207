"""Sync phase 1: a collection split into ``_id`` ranges, so several readers copy it at once.

Parallelism across namespaces alone leaves one big collection to one reader.
:func:`id_ranges` returns find filters that together match every document of a collection
exactly once; readers run them concurrently through mongos.  The Spark snapshot may use it
for its partitions too.

**Boundaries** come from a ``$sample`` of ``_id``\\ s, sorted by the server.  Its cost is the
sample's size, not the collection's: WiredTiger samples with a random cursor (more than 100
documents, a sample under 5 % of them), and through mongos every shard samples its share.
Reading boundaries off the ``_id`` index instead (``sort({_id: 1}).skip(k).limit(1)``)
scans k keys per boundary, and on a sharded collection mongos applies the skip itself, so
every shard ships it k keys: O(shards x documents) per boundary.  The server sorts the
sample (``$sort``), so the boundaries are in the server's own order whatever their types;
a random cursor may return a document twice, so equal neighbours are dropped.

**Ranges** are ``$expr`` comparisons, not ``{_id: {$gte: a, $lt: b}}``: the match language
compares within one BSON type bracket only (``{$gte: 5}`` never matches a string), so a
range whose ends have different types would lose every ``_id`` of the types between them.
Aggregation comparisons order all of BSON as the ``_id`` index does (MinKey, null,
numbers, strings, documents, BinData, ObjectId, bool, dates, Timestamp, MaxKey), and since
5.0 the planner rewrites ``$expr`` comparisons of a field with a constant to
``$_internalExprGte`` / ``$_internalExprLt``, whose index bounds span every type
([a, MaxKey] and [MinKey, b)), so each range is one ``_id`` index scan.  Boundaries are
wrapped in ``$literal`` so that a string ``"$x"`` or a document with ``$`` keys stays a value.

Not split (one filter, ``{}``): views, time-series collections, and a collection with a
default collation, whose ``_id`` index orders strings by the collation while ``$expr``
and the sample's sort would need to agree with it exactly.

See also src/mongo/db/matcher/rewrite_expr.cpp and
src/mongo/db/query/index_bounds_builder.cpp (``INTERNAL_EXPR_GTE``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Final

import bson
from bson.codec_options import CodecOptions, DatetimeConversion
from bson.raw_bson import RawBSONDocument
from pymongo.collection import Collection

SAMPLES_PER_RANGE: Final = 10
# Decoded values re-encode to exactly the bytes read, whatever their type (dates included).
_EXACT: Final = CodecOptions(
    document_class=RawBSONDocument, datetime_conversion=DatetimeConversion.DATETIME_AUTO
)
_NOT_SPLIT: Final = ("viewOn", "timeseries")


def id_ranges(
    collection: Collection[Any],
    pieces: int,
    *,
    samples_per_range: int = SAMPLES_PER_RANGE,
    options: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Find filters that split ``collection`` into up to ``pieces`` ``_id`` ranges.

    Every document matches exactly one filter, whatever the types of the ``_id``\\ s; a
    document inserted meanwhile matches one too.  Ranges hold about equal numbers of
    documents, as far as the sample tells.

    Args:
        collection: the collection, read with its own read concern and preference.
        pieces: the most ranges wanted (1 or less: the whole collection, ``[{}]``).
        samples_per_range: ``_id``\\ s sampled per range; more give more even ranges.
        options: the collection's ``listCollections`` options, when the caller has them
            (else they are asked for).

    Returns:
        The filters in ``_id`` order; ``[{}]`` when the collection is not split.
    """
    if pieces <= 1:
        return [{}]
    if options is None:
        options = collection.options()
    collation = options.get("collation") or {"locale": "simple"}
    if any(name in options for name in _NOT_SPLIT) or collation.get("locale") != "simple":
        return [{}]
    return range_filters(sample_boundaries(collection, pieces, samples_per_range))


def sample_boundaries(
    collection: Collection[Any], pieces: int, samples_per_range: int = SAMPLES_PER_RANGE
) -> list[Any]:
    """Up to ``pieces - 1`` distinct ``_id``\\ s from a sample, in the server's order.

    Complexity: one ``$sample`` of ``pieces * samples_per_range`` documents.
    """
    pipeline = [
        {"$sample": {"size": max(1, pieces * samples_per_range)}},
        {"$project": {"_id": 1}},
        {"$sort": {"_id": 1}},
    ]
    distinct: list[Any] = []
    previous = b""
    for document in collection.with_options(codec_options=_EXACT).aggregate(pipeline):
        encoded = bson.encode({"": document["_id"]})
        if encoded != previous:  # the server sorted them: a repeat is a neighbour
            distinct.append(document["_id"])
            previous = encoded
    # The i-th boundary at the i/pieces quantile; fewer when the sample has fewer values.
    chosen = sorted({len(distinct) * i // pieces for i in range(1, pieces)} - {0})
    return [distinct[index] for index in chosen]


def range_filters(boundaries: Sequence[Any]) -> list[dict[str, Any]]:
    """The ``$expr`` filters of the ranges between ``boundaries`` (strictly increasing).

    ``[b1, b2]`` gives ``_id < b1``, ``b1 <= _id < b2`` and ``_id >= b2``, compared in
    the server's order of all BSON values; no boundaries give ``[{}]``.
    """
    if not boundaries:
        return [{}]
    ends = [{"$literal": value} for value in boundaries]
    filters: list[dict[str, Any]] = [{"$expr": {"$lt": ["$_id", ends[0]]}}]
    for low, high in itertools.pairwise(ends):
        filters.append({"$expr": {"$and": [_at_least(low), {"$lt": ["$_id", high]}]}})
    filters.append({"$expr": _at_least(ends[-1])})
    return filters


def _at_least(end: Mapping[str, Any]) -> dict[str, Any]:
    return {"$gte": ["$_id", end]}
