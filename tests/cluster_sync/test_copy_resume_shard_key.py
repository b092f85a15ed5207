"""A copy stopped and resumed on a sharded target, after a copied document's shard key
value changed on the source: the resumed copy's version replaces the old copy, wherever
that lives, instead of failing on its ``_id`` or leaving a second document beside it.

The emulated target keeps every document on its first shard, so the old copy always sits
where the new version lands (the same shard); a stale copy on another shard cannot be
built here, so what mongos receives for it (a delete by ``_id`` alone) is checked instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

import shardstream
from shardstream.emulator import EmulatedCluster
from tests.cluster_sync.conftest import checkpoint, stop_in_the_copy
from tests.cluster_sync.static_source import contents, settle, static_source

DOCUMENTS = 12
BATCH = 4


@pytest.fixture
def source() -> Iterator[EmulatedCluster]:
    """``shop.orders`` sharded on ``region``, loaded (unlogged) on the primary shard."""
    with static_source() as cluster:
        cluster.shards[0].load_collection(
            "shop.orders",
            [{"_id": i, "region": "eu", "n": i} for i in range(DOCUMENTS)],
            indexes=[{"key": {"region": 1}, "name": "region_1"}],
        )
        cluster.shard_collection("shop.orders", {"region": 1})
        yield cluster


@pytest.fixture
def target() -> Iterator[EmulatedCluster]:
    with EmulatedCluster(shards=2) as cluster:
        yield cluster


def test_a_resumed_copy_replaces_a_document_whose_shard_key_value_changed(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    on_source: MongoClient[Any] = MongoClient(source.uri)
    on_target: MongoClient[Any] = MongoClient(target.uri)
    with on_source, on_target:
        stop_in_the_copy(source, target, shard_target=True, copy_batch=BATCH)
        assert (checkpoint(on_target) or {}).get("phase") == "copy"
        copied = on_target.shop.orders.find_one({"_id": 1})
        assert copied is not None
        assert copied["region"] == "eu"
        assert len(contents(on_target, "shop", "orders")) < DOCUMENTS
        # After T0 and the first copy: the stream from T0 carries it too.
        on_source.shop.orders.update_one(
            {"_id": 1, "region": "eu"}, {"$set": {"region": "us", "n": 100}}
        )
        settle(source)
        seen = len(target.mongos.commands_seen)
        result = shardstream.sync(
            source.uri,
            target.uri,
            shard_target=True,
            copy_batch=BATCH,
            copy_readers=1,
            idle_exit_s=1,
        )
        assert result.copied == DOCUMENTS
        assert contents(on_target, "shop", "orders") == contents(on_source, "shop", "orders")
        assert list(on_target.shop.orders.find({"_id": 1})) == [
            {"_id": 1, "region": "us", "n": 100}
        ]
        # Only the copy whose key value changed was removed, before the insert, and by _id
        # alone: mongos sends such a multi delete to every shard, where the stale copy
        # may live (an insert or an upsert by the new value reaches one chunk only).
        resumed = target.mongos.commands_seen[seen:]
        assert resumed.count("delete") == 1
        assert resumed.index("delete") < resumed.index("insert")
        deletes = target.mongos.last_bodies["delete"]["deletes"]
        assert deletes == [{"q": {"_id": {"$in": [1]}}, "limit": 0}]
