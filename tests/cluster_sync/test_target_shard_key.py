"""A target collection its owner sharded on a key the source's ``documentKey`` lacks: the
copy's and the stream's upserts carry the target's key (the emulated 7.0 mongos refuses
them otherwise, as a real one before 7.1 does), a changed key value leaves no stale copy,
an update that changes it goes again with the document's current key values (the emulated
7.0 shard refuses it by ``_id`` alone), and a collection sharded on the target while the
sync runs is picked up.

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
from shardstream.cluster_sync.batch_applier import BatchApplier
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.refused_writes import SyncConflict
from shardstream.cluster_sync.target_shard_key import TargetShardKeys, addressed_models
from shardstream.emulator import EmulatedCluster
from shardstream.emulator.update_targeting import SHARD_KEY_NOT_FOUND, exact_shard_key
from tests.cluster_sync.conftest import (
    RunningSync,
    applied_through,
    checkpoint,
    stop_in_the_copy,
)
from tests.cluster_sync.static_source import contents, settle, static_source
from tests.sync_thread import wait_for

REGION = {"region": 1}
MONITORING = ("ismaster", "hello", "ping")  # pymongo's heartbeats, at any time


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
    orders.update_one({"_id": 3}, {"$set": {"region": "us"}})  # an update moves the key
    orders.insert_one({"_id": 21, "n": 21})  # no key field: its shard key value is null
    orders.replace_one({"_id": 21}, {"_id": 21, "region": "eu"})
    orders.delete_one({"_id": 2})


def _streaming(
    source: EmulatedCluster, target: EmulatedCluster, on_target: MongoClient[Any]
) -> RunningSync:
    """A sync from ``source`` to ``target``, running, past its copy."""
    running = RunningSync(SyncOptions(source=source.uri, target=target.uri))
    wait_for(
        lambda: (checkpoint(on_target) or {}).get("phase") == "stream" or running.error,
        "the copy",
    )
    return running


def _applied(source: EmulatedCluster, on_target: MongoClient[Any], running: RunningSync) -> None:
    """Wait until the sync applied everything written to ``source`` so far."""
    end = settle(source)
    wait_for(lambda: applied_through(on_target, end) or running.error, "the stream")


def test_the_stream_addresses_upserts_by_the_target_shard_key(
    source: EmulatedCluster, target: EmulatedCluster
) -> None:
    on_source: MongoClient[Any] = MongoClient(source.uri)
    on_target: MongoClient[Any] = MongoClient(target.uri)
    with on_source, on_target:
        running = _streaming(source, target, on_target)
        _stream_changes(on_source)
        _applied(source, on_target, running)
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
            running = _streaming(source, target, on_target)
            on_source.shop.orders.insert_one({"_id": 30, "region": "eu"})
            _applied(source, on_target, running)
            # Its owner shards it now: no event says so, the first refused upsert does,
            # here in a transaction, which the sync then applies again as one.
            target.shard_collection("shop.orders", REGION)
            with on_source.start_session() as session, session.start_transaction():
                on_source.shop.orders.insert_one({"_id": 31, "region": "us"}, session=session)
                on_source.shop.orders.delete_one({"_id": 30}, session=session)
                # Key changes of one document twice, and of one inserted just before:
                # each read in the transaction, after the writes before it.
                for region in ("ap", "us"):
                    on_source.shop.orders.update_one(
                        {"_id": 4}, {"$set": {"region": region}}, session=session
                    )
                on_source.shop.orders.update_one(
                    {"_id": 31}, {"$set": {"region": "eu"}}, session=session
                )
            _stream_changes(on_source)
            _applied(source, on_target, running)
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


def _planned(*events: dict[str, Any]) -> list[CrudWrite]:
    """CRUD events on ``shop.orders`` (tokens ``t0``, ``t1`` ... in order) as planned writes."""
    ns = {"db": "shop", "coll": "orders"}
    planned = [
        plan_event({**e, "ns": ns, "_id": {"_data": f"t{n}"}}, NamespaceMap())
        for n, e in enumerate(events)
    ]
    writes = [w for w in planned if isinstance(w, CrudWrite)]
    assert len(writes) == len(events)
    return writes


def _insert(document: dict[str, Any], **key: Any) -> dict[str, Any]:
    key = {"_id": document["_id"], **key}
    return {"operationType": "insert", "documentKey": key, "fullDocument": document}


def test_each_write_is_addressed_and_its_models_traced_back_to_it(
    target: EmulatedCluster,
) -> None:
    writes = _planned(
        {"operationType": "delete", "documentKey": {"_id": 1}},
        _insert({"_id": 2, "region": "eu"}),
        _insert({"_id": 3}, region="us"),  # its documentKey holds the target's key already
        {"operationType": "replace", **_insert({"_id": 2, "region": "us"})},
    )
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        keys = TargetShardKeys(client)
        keys.refresh()  # nothing to read before the target refused a write
        assert not keys.strict
        assert keys.fields(("shop", "orders")) == ()
        keys.tighten()
        assert keys.fields(("shop", "orders")) == ("region",)
        assert keys.fields(("shop", "other")) == ()
    models, owners = addressed_models(writes, ("region",))
    # The first run's delete goes ahead of it; _id 2 again starts a second run.
    assert models == [
        DeleteOne({"_id": 2, "region": {"$ne": "eu"}}),
        DeleteOne({"_id": 1}),
        ReplaceOne({"_id": 2, "region": {"$eq": "eu"}}, {"_id": 2, "region": "eu"}, upsert=True),
        writes[2].model,
        DeleteOne({"_id": 2, "region": {"$ne": "us"}}),
        ReplaceOne({"_id": 2, "region": {"$eq": "us"}}, {"_id": 2, "region": "us"}, upsert=True),
    ]
    assert owners == [0, 0, 1, 2, 3, 3]
    assert addressed_models(writes, ()) == ([w.model for w in writes], [0, 1, 2, 3])


def test_a_target_key_is_addressed_by_its_own_paths_alone() -> None:
    # Source sharded on a.b, target on a: the source's dotted field stays out of the query
    # (mongos finds no shard key in a query with both a and a.b).
    (write,) = _planned(_insert({"_id": 1, "a": {"b": 5, "c": 1}}, **{"a.b": 5}))
    models, _ = addressed_models([write], ("a",))
    assert models[1] == ReplaceOne(
        {"_id": 1, "a": {"$eq": {"b": 5, "c": 1}}}, {"_id": 1, "a": {"b": 5, "c": 1}}, upsert=True
    )
    assert exact_shard_key(models[1]._filter, {"a": 1})


def test_an_8_0_target_takes_the_document_key_and_nothing_more() -> None:
    # From 7.1 mongos finds the document itself: no refusal, so no key read, no deletes.
    with EmulatedCluster(shards=2, max_wire_version=25) as cluster:
        cluster.shard_collection("shop.orders", REGION)
        client: MongoClient[Any] = MongoClient(cluster.uri)
        with client:
            client.shop.orders.insert_one({"_id": 1, "region": "eu", "n": 1})
            applier = BatchApplier(client, NamespaceMap(), writers=1)
            seen = len(cluster.mongos.commands_seen)
            try:
                applier.apply(
                    _planned(
                        _insert({"_id": 5, "region": "us"}),
                        {"operationType": "replace", **_insert({"_id": 1, "region": "ap"})},
                    )
                )
            finally:
                applier.close()
            sent = [c for c in cluster.mongos.commands_seen[seen:] if c not in MONITORING]
            assert sent == ["update"]
            assert _each_once(client) == [1, 5]
            assert client.shop.orders.find_one({"_id": 1}) == {"_id": 1, "region": "ap"}


def test_a_conflict_among_addressed_writes_names_its_own_event(target: EmulatedCluster) -> None:
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        client.shop.orders.create_index("email", unique=True)
        client.shop.orders.insert_one({"_id": 99, "region": "eu", "email": "x"})
        writes = _planned(
            _insert({"_id": 1, "region": "eu", "email": "a"}),
            _insert({"_id": 2, "region": "us", "email": "x"}),  # email taken by _id 99
            _insert({"_id": 3, "region": "ap", "email": "c"}),
        )
        failing = BatchApplier(client, NamespaceMap(), writers=1)
        try:
            with pytest.raises(SyncConflict, match="'_data': 't1'"):
                failing.apply(writes)
        finally:
            failing.close()
        overwriting = BatchApplier(client, NamespaceMap(), writers=1, on_conflict="overwrite")
        try:
            overwriting.apply(writes)
        finally:
            overwriting.close()
        assert overwriting.conflicts == 1
        assert _each_once(client) == [1, 2, 3]


def test_a_refused_run_goes_on_from_its_refused_write() -> None:
    # Sharded once the sync wrote to it: the first write of the run is taken, the second
    # refused (code 61), and the run goes on from it, addressed by region.
    with EmulatedCluster(shards=2, max_wire_version=21) as later:
        on_later: MongoClient[Any] = MongoClient(later.uri)
        with on_later:
            applier = BatchApplier(on_later, NamespaceMap(), writers=1)
            try:
                applier.apply(_planned(_insert({"_id": 1, "region": "eu"}, region="eu")))
                later.shard_collection("shop.orders", REGION)
                seen = len(later.mongos.commands_seen)
                applier.apply(
                    _planned(
                        {"operationType": "delete", "documentKey": {"_id": 1, "region": "eu"}},
                        _insert({"_id": 5, "region": "us"}),
                        _insert({"_id": 6, "region": "ap"}),
                    )
                )
            finally:
                applier.close()
            assert _each_once(on_later) == [5, 6]
            # delete, the refused update, then the deletes ahead and the addressed upserts.
            assert later.mongos.commands_seen[seen:].count("update") == 2


def test_a_refusal_without_readable_keys_is_named(
    target: EmulatedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A target user who may not read config: the keys come back unknown (None), so the
    # refused upsert cannot be addressed and the error says why.
    from shardstream.cluster_sync import target_shard_key

    monkeypatch.setattr(target_shard_key, "target_shard_keys", lambda client: None)
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        applier = BatchApplier(client, NamespaceMap(), writers=1)
        try:
            with pytest.raises(SyncConflict, match="names no shard key for it") as refused:
                applier.apply(_planned(_insert({"_id": 1, "region": "eu"})))
        finally:
            applier.close()
    assert "error 61" in str(refused.value)
    assert "'_data': 't0'" in str(refused.value)
