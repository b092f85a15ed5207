"""Each change event's write on the target, the scope and mapping rules, and retries."""

from __future__ import annotations

from typing import Any

import pytest
from bson.int64 import Int64
from pymongo import MongoClient
from pymongo.errors import AutoReconnect, ServerSelectionTimeoutError
from pymongo.operations import DeleteOne, ReplaceOne, UpdateOne

from shardstream.cluster_sync.apply_rules import CrudWrite, DdlChange, plan_event
from shardstream.cluster_sync.batch_applier import BatchApplier
from shardstream.cluster_sync.namespace_map import NamespaceMap, parse_map_rule
from shardstream.errors import ConfigurationError, OplogError

TOKEN = {"_data": "82AA"}


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"_id": TOKEN, "operationType": kind, "ns": {"db": "shop", "coll": "orders"}, **fields}


def test_inserts_and_replaces_upsert_the_whole_document_by_its_key() -> None:
    key = {"region": "eu", "_id": 7}
    for kind in ("insert", "replace"):
        write = plan_event(
            _event(kind, documentKey=key, fullDocument={"_id": 7, "a": 1}), NamespaceMap()
        )
        assert isinstance(write, CrudWrite)
        assert write.model == ReplaceOne(key, {"_id": 7, "a": 1}, upsert=True)
        assert write.target == ("shop", "orders")
        assert write.transaction is None


def test_an_update_replays_the_oplog_diff_without_upsert() -> None:
    raw = {"$v": 2, "diff": {"u": {"a": 2}}}
    write = plan_event(
        _event("update", documentKey={"_id": 7}, rawUpdateDescription=raw), NamespaceMap()
    )
    assert isinstance(write, CrudWrite)
    assert isinstance(write.model, UpdateOne)
    assert write.model._upsert is False
    assert isinstance(write.model._doc, list)  # a pipeline


def test_a_legacy_modifier_update_is_sent_as_its_modifiers() -> None:
    raw = {"$v": 1, "$set": {"a": 2}}
    write = plan_event(
        _event("update", documentKey={"_id": 7}, rawUpdateDescription=raw), NamespaceMap()
    )
    assert isinstance(write, CrudWrite)
    assert write.model == UpdateOne({"_id": 7}, {"$set": {"a": 2}}, upsert=False)


def test_an_update_without_its_raw_diff_is_refused_by_name() -> None:
    event = _event("update", documentKey={"_id": 7}, updateDescription={"updatedFields": {}})
    with pytest.raises(OplogError, match="rawUpdateDescription"):
        plan_event(event, NamespaceMap())


def test_a_delete_deletes_by_key_and_a_transaction_is_named() -> None:
    event = _event("delete", documentKey={"_id": 7}, lsid={"id": b"x"}, txnNumber=Int64(3))
    write = plan_event(event, NamespaceMap())
    assert isinstance(write, CrudWrite)
    assert write.model == DeleteOne({"_id": 7})
    assert write.transaction is not None
    assert write.transaction[1] == 3


def test_ddl_is_a_barrier_placement_events_are_skipped_and_unknown_types_refused() -> None:
    assert isinstance(plan_event(_event("createIndexes"), NamespaceMap()), DdlChange)
    assert plan_event(_event("migrateLastChunkFromShard"), NamespaceMap()) is None
    with pytest.raises(OplogError, match="'invalidate'"):
        plan_event(_event("invalidate"), NamespaceMap())


def test_scope_leaves_out_other_namespaces_and_the_servers_own() -> None:
    scoped = NamespaceMap(db="shop", coll="orders")
    assert plan_event({**_event("drop"), "ns": {"db": "shop", "coll": "users"}}, scoped) is None
    assert (
        plan_event({**_event("drop"), "ns": {"db": "config", "coll": "x"}}, NamespaceMap()) is None
    )
    assert not NamespaceMap().in_scope("shardstream_sync", "checkpoints")
    assert not NamespaceMap().in_scope("shop", "system.views")


def test_map_rules_rename_databases_and_collections_most_specific_first() -> None:
    rules = NamespaceMap.from_options(rules=["shop=shop2", "shop.orders=archive.old_orders"])
    assert rules.target("shop", "orders") == ("archive", "old_orders")
    assert rules.target("shop", "users") == ("shop2", "users")
    assert rules.target("crm", "people") == ("crm", "people")


@pytest.mark.parametrize("rule", ["shop", "shop=", "=x", "shop=db.coll", "a.b=c"])
def test_malformed_map_rules_say_what_was_expected(rule: str) -> None:
    with pytest.raises(ConfigurationError, match="expected --map"):
        parse_map_rule(rule)


def test_a_lost_connection_is_retried_and_a_refused_login_is_not() -> None:
    client: MongoClient[Any] = MongoClient("mongodb://127.0.0.1:1/", connect=False)
    applier = BatchApplier(client, NamespaceMap(), writers=1, retry_for_s=5.0)
    try:
        failures = [AutoReconnect("connection reset")]

        def flaky() -> str:
            if failures:
                raise failures.pop()
            return "written"

        assert applier._retrying(flaky) == "written"
        calls = []

        def refused() -> None:
            calls.append(1)
            raise ServerSelectionTimeoutError("127.0.0.1:1: AuthenticationFailed")

        with pytest.raises(ServerSelectionTimeoutError):
            applier._retrying(refused)
        assert len(calls) == 1  # a refused login never heals by waiting
    finally:
        applier.close()
        client.close()
