"""The copy's ``_id`` ranges: every document in exactly one range, whatever the ``_id`` types,
and a sync that copies big collections range by range ends equal, through a stop and a
restart of its copy.

Ranges are checked against the emulator, whose order of BSON values tests/emulator checks
against ``shardstream.match.order`` (the mirror of the server's); boundaries that are not
sampled from the collection are sorted with that order here, not with the code under test.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import bson
import pytest
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from hypothesis import given, settings
from hypothesis import strategies as st
from pymongo import MongoClient

from shardstream.cluster_sync import NamespaceMap, SyncConflict, id_ranges, sync
from shardstream.cluster_sync.copy_ranges import range_filters
from shardstream.cluster_sync.initial_copy import CopyProgress, copy_collections
from shardstream.cluster_sync.target_catalog import refuse_targets_holding_data
from shardstream.emulator import EmulatedCluster
from shardstream.match.order import compare
from tests.cluster_sync.static_source import RAW, contents, static_source
from tests.strategies import DECIMALS, DOUBLES, INT32, INT64, OBJECT_IDS, TEXT, TIMESTAMPS

SCALAR_IDS: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    INT32,
    INT64,
    DOUBLES,
    DECIMALS,
    TEXT,
    OBJECT_IDS,
    st.builds(Binary, st.binary(max_size=6), st.sampled_from([0, 4, 0x80])),
    TIMESTAMPS,
    st.integers(-(2**62), 2**62).map(DatetimeMS),
    st.sampled_from([MinKey(), MaxKey()]),
)
# What a server takes as an _id: no arrays, regexes or undefined; documents of scalars.
IDS = st.one_of(
    SCALAR_IDS, st.dictionaries(st.sampled_from(["a", "b", "k"]), SCALAR_IDS, max_size=2)
)
MIXED = [
    *range(150),
    *(f"s{i:03d}" for i in range(150)),
    *(ObjectId(f"{i:024x}") for i in range(150)),
    *({"k": i} for i in range(100)),
    *(float(i) + 0.5 for i in range(-25, 25)),
]


def _distinct(values: list[Any]) -> list[Any]:
    """``values`` without repeats as the server's unique ``_id`` index sees them."""
    kept: list[Any] = []
    for value in values:
        if all(compare(value, other) != 0 for other in kept):
            kept.append(value)
    return kept


def _raw(values: list[Any]) -> list[bytes]:
    return sorted(bson.encode({"_id": value}) for value in values)


@pytest.fixture
def source() -> Iterator[EmulatedCluster]:
    with static_source() as cluster:
        yield cluster


@pytest.fixture
def target() -> Iterator[EmulatedCluster]:
    with EmulatedCluster(shards=2) as cluster:
        yield cluster


def test_sampled_ranges_hold_every_document_once_and_none_empty(source: EmulatedCluster) -> None:
    client: MongoClient[Any] = MongoClient(source.uri)
    collection = client.db.get_collection("split", codec_options=RAW)

    @given(st.lists(IDS, max_size=60), st.integers(1, 9), st.integers(1, 4))
    @settings(max_examples=80)
    def check(ids: list[Any], pieces: int, samples_per_range: int) -> None:
        documents = [{"_id": value} for value in _distinct(ids)]
        source.shards[0].load_collection("db.split", documents)
        filters = id_ranges(collection, pieces, samples_per_range=samples_per_range)
        parts = [[doc.raw for doc in collection.find(f)] for f in filters]
        assert sorted(raw for part in parts for raw in part) == _raw(_distinct(ids))
        assert 1 <= len(filters) <= pieces
        # Boundaries are sampled _ids, so no range is empty (unless the collection is).
        assert all(parts) or not documents

    with client:
        check()


def test_any_increasing_boundaries_split_a_collection_exactly(source: EmulatedCluster) -> None:
    client: MongoClient[Any] = MongoClient(source.uri)
    collection = client.db.get_collection("split", codec_options=RAW)

    @given(st.lists(IDS, max_size=40), st.lists(IDS, max_size=6))
    @settings(max_examples=80)
    def check(ids: list[Any], ends: list[Any]) -> None:
        source.shards[0].load_collection("db.split", [{"_id": v} for v in _distinct(ids)])
        boundaries = sorted(_distinct(ends), key=functools.cmp_to_key(compare))
        found = [doc.raw for f in range_filters(boundaries) for doc in collection.find(f)]
        assert sorted(found) == _raw(_distinct(ids))

    with client:
        check()


def test_a_collection_with_a_collation_or_one_piece_is_not_split(source: EmulatedCluster) -> None:
    source.shards[0].load_collection(
        "db.french", [{"_id": i} for i in range(50)], options={"collation": {"locale": "fr"}}
    )
    source.shards[0].load_collection("db.plain", [{"_id": i} for i in range(50)])
    client: MongoClient[Any] = MongoClient(source.uri)
    with client:
        assert id_ranges(client.db.french, 4) == [{}]
        assert id_ranges(client.db.plain, 1) == [{}]
        assert len(id_ranges(client.db.plain, 4)) > 1


def test_a_sync_copies_a_big_collection_in_ranges_and_ends_equal(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    source.shards[0].load_collection("shop.mixed", [{"_id": v, "n": 1} for v in MIXED])
    source.shards[0].load_collection("shop.small", [{"_id": i} for i in range(10)])
    result = sync(
        source.uri,
        target.uri,
        copy_readers=3,
        copy_range_docs=50,
        copy_batch=40,
        idle_exit_s=1,
    )
    assert result.copied == len(MIXED) + 10
    # Only the big collection was sampled for boundaries: the small one is one piece.
    assert source.mongos.commands_seen.count("aggregate") == 1
    src: MongoClient[Any] = MongoClient(source.uri)
    dst: MongoClient[Any] = MongoClient(target.uri)
    with src, dst:
        for name in ("mixed", "small"):
            assert contents(dst, "shop", name) == contents(src, "shop", name)


def test_a_copy_stopped_between_ranges_restarts_to_the_same_result(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    source.shards[0].load_collection("shop.mixed", [{"_id": v} for v in MIXED])
    scope = NamespaceMap()
    src: MongoClient[Any] = MongoClient(source.uri)
    dst: MongoClient[Any] = MongoClient(target.uri)
    with src, dst:
        first = CopyProgress()
        options: dict[str, Any] = {"readers": 3, "on_conflict": "fail", "batch": 25}
        copy_collections(
            src,
            dst,
            scope,
            **options,
            progress=first,
            stopping=lambda: first.copied >= 100,
            range_docs=60,
        )
        partial = contents(dst, "shop", "mixed")
        assert 100 <= len(partial) < len(MIXED)
        # A new sync refuses it before copying; a resumed copy writes over it.
        with pytest.raises(SyncConflict, match=r"shop\.mixed already holds data"):
            refuse_targets_holding_data(src, dst, scope)
        again = CopyProgress()
        copy_collections(src, dst, scope, **options, progress=again, range_docs=60)
        assert again.copied == len(MIXED)
        assert contents(dst, "shop", "mixed") == contents(src, "shop", "mixed")
