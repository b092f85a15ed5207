"""A target collection its owner sharded on a key the source's ``documentKey`` lacks: the
copy's and the stream's upserts carry the target's key (the emulated 7.0 mongos refuses
them otherwise, as a real one before 7.1 does), a changed key value leaves no stale copy,
and a collection sharded on the target while the sync runs is picked up.

The emulated target keeps every document on its first shard, so a stale copy would make
the next upsert fail on its ``_id`` there (where a real cluster may hold both copies on two
shards): a target holding each document once, equal to the source, is the check.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.errors import WriteError
from pymongo.operations import DeleteOne, ReplaceOne

import shardstream
from shardstream.cluster_sync import SyncOptions
from shardstream.cluster_sync.apply_rules import CrudWrite, plan_event
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.target_shard_key import TargetShardKeys, addressed_models
from shardstream.emulator import EmulatedCluster
from shardstream.emulator.upsert_targeting import SHARD_KEY_NOT_FOUND
from tests.cluster_sync.conftest import (
    RunningSync,
    applied_through,
    checkpoint,
    stop_in_the_copy,
)
from tests.cluster_sync.static_source import contents, settle, static_source
from tests.sync_thread import wait_for

REGION = {"region": 1}


@pytest.fixture
def source() -> Iterator[EmulatedCluster]:
    """``shop.orders``, unsharded: its events' ``documentKey`` is ``{_id}`` alone."""
    with static_source() as cluster:
        cluster.shards[0].load_collection(
            "shop.orders", [{"_id": i, "region": "eu", "n": i} for i in range(10)]
        )
        yield cluster


@pytest.fixture
def target() -> Iterator[EmulatedCluster]:
    """A 7.0 cluster whose owner sharded ``shop.orders`` on ``region`` before the sync."""
    with EmulatedCluster(shards=2, max_wire_version=21) as cluster:
        cluster.shard_collection("shop.orders", REGION)
        yield cluster


def _each_once(client: MongoClient[Any]) -> list[Any]:
    return sorted(doc["_id"] for doc in client.shop.orders.find({}, {"_id": 1}))


def _stream_changes(on_source: MongoClient[Any]) -> None:
    orders = on_source.shop.orders
    orders.insert_one({"_id": 20, "region": "us", "n": 20})
    orders.replace_one({"_id": 1}, {"_id": 1, "region": "ap", "n": 100})  # the key moves
    orders.update_one({"_id": 20}, {"$inc": {"n": 1}})
    orders.insert_one({"_id": 21, "n": 21})  # no key field: its shard key value is null
    orders.replace_one({"_id": 21}, {"_id": 21, "region": "eu"})
    orders.delete_one({"_id": 2})


def test_the_stream_addresses_upserts_by_the_target_shard_key(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    on_source: MongoClient[Any] = MongoClient(source.uri)
    on_target: MongoClient[Any] = MongoClient(target.uri)
    with on_source, on_target:
        running = RunningSync(SyncOptions(source=source.uri, target=target.uri))
        wait_for(
            lambda: (checkpoint(on_target) or {}).get("phase") == "stream" or running.error,
            "the copy",
        )
        _stream_changes(on_source)
        end = settle(source)
        wait_for(lambda: applied_through(on_target, end) or running.error, "the stream")
        running.finish()
        assert contents(on_target, "shop", "orders") == contents(on_source, "shop", "orders")
        assert _each_once(on_target) == [0, 1, *range(3, 10), 20, 21]
        # What the sync wrote is what this target takes: by _id alone it refuses.
        with pytest.raises(WriteError) as refused:
            on_target.shop.orders.replace_one({"_id": 21}, {"_id": 21}, upsert=True)
        assert refused.value.code == SHARD_KEY_NOT_FOUND


def test_a_collection_sharded_on_the_target_meanwhile_is_picked_up(
    source: EmulatedCluster,
) -> None:
    on_source: MongoClient[Any] = MongoClient(source.uri)
    with EmulatedCluster(shards=2, max_wire_version=21) as target:
        on_target: MongoClient[Any] = MongoClient(target.uri)
        with on_source, on_target:
            running = RunningSync(SyncOptions(source=source.uri, target=target.uri))
            wait_for(
                lambda: (checkpoint(on_target) or {}).get("phase") == "stream" or running.error,
                "the copy",
            )
            on_source.shop.orders.insert_one({"_id": 30, "region": "eu"})
            end = settle(source)
            wait_for(lambda: applied_through(on_target, end) or running.error, "the insert")
            # Its owner shards it now: no event says so, the first refused upsert does,
            # here in a transaction, which the sync then applies again as one.
            target.shard_collection("shop.orders", REGION)
            with on_source.start_session() as session, session.start_transaction():
                on_source.shop.orders.insert_one({"_id": 31, "region": "us"}, session=session)
                on_source.shop.orders.delete_one({"_id": 30}, session=session)
            _stream_changes(on_source)
            end = settle(source)
            wait_for(lambda: applied_through(on_target, end) or running.error, "the stream")
            running.finish()
            assert contents(on_target, "shop", "orders") == contents(on_source, "shop", "orders")
            assert _each_once(on_target) == [0, 1, *range(3, 10), 20, 21, 31]
            assert "aborttransaction" in target.mongos.commands_seen


def test_a_resumed_copy_upserts_by_the_target_shard_key(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    on_source: MongoClient[Any] = MongoClient(source.uri)
    on_target: MongoClient[Any] = MongoClient(target.uri)
    with on_source, on_target:
        stop_in_the_copy(source, target, copy_batch=4)
        assert (checkpoint(on_target) or {}).get("phase") == "copy"
        assert 0 < len(contents(on_target, "shop", "orders")) < 10
        result = shardstream.sync(
            source.uri, target.uri, copy_batch=4, copy_readers=1, idle_exit_s=1
        )
        assert result.copied == 10
        assert contents(on_target, "shop", "orders") == contents(on_source, "shop", "orders")


def test_each_write_is_addressed_and_its_models_traced_back_to_it(
    target: EmulatedCluster,
) -> None:
    ns = {"db": "shop", "coll": "orders"}
    events: list[dict[str, Any]] = [
        {"operationType": "delete", "documentKey": {"_id": 1}},
        {
            "operationType": "insert",
            "documentKey": {"_id": 2},
            "fullDocument": {"_id": 2, "region": "eu"},
        },
        {
            "operationType": "insert",
            "documentKey": {"_id": 3, "region": "us"},
            "fullDocument": {"_id": 3},
        },
    ]
    crud = [plan_event({**e, "ns": ns, "_id": {}}, NamespaceMap()) for e in events]
    assert all(isinstance(w, CrudWrite) for w in crud)
    writes = [w for w in crud if isinstance(w, CrudWrite)]
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        keys = TargetShardKeys(client)
        keys.refresh()
        assert keys.fields(("shop", "orders")) == ("region",)
        assert keys.fields(("shop", "other")) == ()
    models, owners = addressed_models(writes, ("region",))
    assert owners == [0, 1, 1, 2]
    assert models == [
        DeleteOne({"_id": 1}),
        DeleteOne({"_id": 2, "$or": [{"region": {"$ne": "eu"}}]}),
        ReplaceOne({"_id": 2, "region": "eu"}, {"_id": 2, "region": "eu"}, upsert=True),
        writes[2].model,  # its documentKey holds the target's key already
    ]
    assert addressed_models(writes, ()) == ([w.model for w in writes], [0, 1, 2])
