"""A source transaction that creates a collection (its first insert into it) reaches the
target as one transaction: the ``create`` event it holds is applied before it, not as a
barrier that cuts it in two."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

from shardstream.cluster_sync import SyncOptions
from shardstream.cluster_sync.apply_rules import plan_event
from shardstream.cluster_sync.batch_segments import Barrier, batch_steps
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.emulator import EmulatedCluster
from tests.cluster_sync.conftest import RunningSync, applied_through, checkpoint
from tests.cluster_sync.static_source import contents, settle, static_source
from tests.sync_thread import wait_for


@pytest.fixture
def source() -> Iterator[EmulatedCluster]:
    with static_source() as cluster:
        cluster.shards[0].load_collection("shop.orders", [{"_id": 1}])
        yield cluster


def _applied_transactions(target: EmulatedCluster) -> list[list[tuple[str, Any]]]:
    """(namespace, _id) of each write of each ``applyOps`` in the target's oplogs."""
    return [
        [(op["ns"], (op.get("o2") or op["o"]).get("_id")) for op in entry["o"]["applyOps"]]
        for shard in target.shards
        for entry in shard.oplog.entries()
        if entry["op"] == "c" and "applyOps" in entry["o"]
    ]


@pytest.mark.parametrize("transactions", [True, False], ids=["as-transactions", "single"])
def test_a_transaction_creating_a_collection_stays_one_transaction(
    source: EmulatedCluster, transactions: bool
) -> None:
    on_source: MongoClient[Any] = MongoClient(source.uri)
    with EmulatedCluster(shards=2) as target:
        on_target: MongoClient[Any] = MongoClient(target.uri)
        with on_source, on_target:
            options = SyncOptions(source=source.uri, target=target.uri, transactions=transactions)
            running = RunningSync(options)
            wait_for(
                lambda: (checkpoint(on_target) or {}).get("phase") == "stream" or running.error,
                "the copy",
            )
            with on_source.start_session() as session, session.start_transaction():
                on_source.shop.orders.insert_one({"_id": 2}, session=session)
                on_source.shop.fresh.insert_one({"_id": 1}, session=session)  # creates it
                on_source.shop.orders.insert_one({"_id": 3}, session=session)
            end = settle(source)
            wait_for(lambda: applied_through(on_target, end) or running.error, "the stream")
            running.finish()
            for name in ("orders", "fresh"):
                assert contents(on_target, "shop", name) == contents(on_source, "shop", name)
            # One applyOps holding all three (grouped per namespace: only each document's
            # own writes keep their order), or none with --no-transactions.
            applied = [sorted(writes) for writes in _applied_transactions(target)]
            expected = [[("shop.fresh", 1), ("shop.orders", 2), ("shop.orders", 3)]]
            assert applied == (expected if transactions else [])


def _planned(kind: str, token: str, doc: int | None = None, *, txn: bool = True) -> Any:
    """A ``shop.fresh`` event (in transaction 4 of one session, or none) as planned."""
    event: dict[str, Any] = {
        "_id": {"_data": token},
        "operationType": kind,
        "ns": {"db": "shop", "coll": "fresh"},
    }
    if doc is not None:
        event |= {"documentKey": {"_id": doc}, "fullDocument": {"_id": doc}}
    if txn:
        event |= {"lsid": {"id": 1}, "txnNumber": 4}
    return plan_event(event, NamespaceMap())


def test_the_ddl_of_a_transaction_goes_ahead_of_its_writes_with_no_checkpoint_after() -> None:
    before = _planned("insert", "t0", 9, txn=False)
    inside = [_planned("insert", "t1", 1), _planned("create", "t2"), _planned("insert", "t3", 2)]
    items = [before, *inside]
    steps = list(batch_steps(items, transactions=True))
    assert [type(s).__name__ for s in steps] == ["list", "Barrier", "list"]
    barrier = steps[1]
    assert isinstance(barrier, Barrier)
    assert barrier.ddl is inside[1]
    assert barrier.before == {"_data": "t0"}
    assert barrier.floor == {"_data": "t1"}  # the transaction's first event
    assert not barrier.settles
    assert steps[2] == [[inside[0], inside[2]]]  # one transaction, whole
    split = list(batch_steps(items, transactions=False))  # --no-transactions: cut there
    assert [type(s).__name__ for s in split] == ["list", "Barrier", "list"]
    assert isinstance(split[1], Barrier)
    assert split[1].settles
