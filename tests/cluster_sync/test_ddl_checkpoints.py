"""The batch applier's checkpoints on each side of a DDL event never skip it.

A checkpoint is stored after the writes before a DDL event and after the event, so a
kill replays a DDL event only onto the target as it was right before or after it. The
reader may regroup one cluster time's events (a transaction's ops together), putting a
write that sorts after the DDL event before it: then no "before" checkpoint is stored,
since resuming after that write would skip the DDL event.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import bson
from pymongo import MongoClient

from shardstream.cluster_sync.apply_rules import CrudWrite, DdlChange
from shardstream.cluster_sync.batch_applier import BatchApplier
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.write_statements import REPLACE, statement_of
from shardstream.emulator import EmulatedCluster

NS = ("shop", "orders")


def _write(doc: int, token: str) -> CrudWrite:
    statement = statement_of(REPLACE, {"_id": doc}, {"_id": doc})
    return CrudWrite(NS, bson.encode({"_id": doc}), statement, REPLACE, {"_data": token}, None)


def _create(coll: str, token: str) -> DdlChange:
    event = {"_id": {"_data": token}, "operationType": "create", "ns": {"db": "shop", "coll": coll}}
    return DdlChange(event)


def _applied(items: list[CrudWrite | DdlChange]) -> tuple[list[str], list[str]]:
    """The tokens checkpointed while applying ``items``, and the target's collections."""
    saved: list[str] = []
    with EmulatedCluster(shards=1) as target:
        client: MongoClient[Any] = MongoClient(target.uri)
        with client:
            applier = BatchApplier(client, NamespaceMap(), writers=2)
            try:
                applier.apply(items, checkpoint=lambda token: saved.append(token["_data"]))
            finally:
                applier.close()
            return saved, sorted(client.shop.list_collection_names())


def test_a_ddl_event_is_checkpointed_after_the_writes_before_it_and_after_itself() -> None:
    items = [_write(1, "8201"), _write(2, "8202"), _create("archive", "8203"), _write(3, "8204")]
    saved, collections = _applied(items)
    assert saved == ["8202", "8203"]
    assert collections == ["archive", "orders"]


def test_no_before_checkpoint_when_a_regrouped_write_sorts_after_the_ddl_event() -> None:
    # A transaction's second op (8205) regrouped before another shard's create (8204)
    # at the same cluster time: resuming after 8205 would never see the create again.
    items = [_write(1, "8203"), _write(2, "8205"), _create("archive", "8204"), _write(3, "8206")]
    saved, collections = _applied(items)
    assert saved == ["8204"]
    assert collections == ["archive", "orders"]


def _in_transaction(write: CrudWrite | DdlChange) -> CrudWrite | DdlChange:
    txn = {"lsid": {"id": 7}, "txnNumber": 3}
    if isinstance(write, DdlChange):
        return DdlChange({**write.event, **txn})
    return dataclasses.replace(write, transaction=(bson.encode(txn["lsid"]), 3))


def test_a_transactions_own_ddl_is_checkpointed_before_it_and_not_after() -> None:
    # The create inside the transaction goes ahead of its writes: the checkpoint before it
    # is the last write before the transaction, none follows it (the writes are to come).
    txn = [_write(2, "8202"), _create("archive", "8203"), _write(3, "8204")]
    items = [_write(1, "8201"), *map(_in_transaction, txn)]
    saved, collections = _applied(items)
    assert saved == ["8201"]
    assert collections == ["archive", "orders"]


def test_no_checkpoint_skips_a_regrouped_transactions_first_writes() -> None:
    # Another shard's write at the same cluster time (8203) was listed before the
    # regrouped transaction (8202 ...): saved before the create, it would skip 8202.
    txn = [_write(2, "8202"), _create("archive", "8204"), _write(3, "8205")]
    items = [_write(1, "8201"), _write(4, "8203"), *map(_in_transaction, txn)]
    saved, collections = _applied(items)
    assert saved == []
    assert collections == ["archive", "orders"]
