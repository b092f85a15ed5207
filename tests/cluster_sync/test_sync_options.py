"""Sync scope and mapping, duplicate-key conflicts on the target, and idle-shard no-ops."""

from __future__ import annotations

import time
from typing import Any

import bson
import pytest
from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.cluster_sync import SyncConflict, SyncOptions, sync
from shardstream.cluster_sync.idle_noop import IdleShardNudger
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.emulator import EmulatedCluster
from shardstream.sim.apply_events import encoded_state
from shardstream.sim.emulated_source import SimulatedSource, cluster_state
from tests.cluster_sync.conftest import (
    RunningSync,
    sync_to_the_end,
    wait_for,
)


def test_scope_and_map_rules_decide_what_lands_where(
    source: SimulatedSource, target: EmulatedCluster, target_client: MongoClient[Any]
) -> None:
    namespaces = NamespaceMap.from_options(
        "shop", None, ["shop=mirror", "shop.orders=archive.old_orders"]
    )
    sync_to_the_end(source, target, namespaces=namespaces).finish()
    expected = {
        namespaces.target(*ns): documents
        for ns, documents in encoded_state(source.result.final_state).items()
    }
    assert ("archive", "old_orders") in expected
    assert cluster_state(target_client) == expected


def test_one_collection_in_scope_syncs_only_it(
    source: SimulatedSource, target: EmulatedCluster, target_client: MongoClient[Any]
) -> None:
    sync_to_the_end(source, target, namespaces=NamespaceMap("shop", "users")).finish()
    final = encoded_state(source.result.final_state)
    assert cluster_state(target_client) == {("shop", "users"): final[("shop", "users")]}


def test_a_unique_index_only_the_target_has_stops_the_copy_naming_namespace_and_key(
    source: SimulatedSource, target: EmulatedCluster, target_client: MongoClient[Any]
) -> None:
    target_client.shop.command(
        {"createIndexes": "users", "indexes": [{"key": {"qty": 1}, "name": "q", "unique": True}]}
    )
    running = RunningSync(SyncOptions(source=source.cluster.uri, target=target.uri))
    wait_for(lambda: running.error or not running.running, "the sync to stop")
    with pytest.raises(SyncConflict, match=r"shop\.users.*qty") as caught:
        running.finish()
    assert "--on-conflict" in str(caught.value)


@pytest.mark.parametrize("policy", ["skip", "overwrite"])
def test_a_conflict_policy_lets_the_sync_go_on(
    source: SimulatedSource,
    target: EmulatedCluster,
    target_client: MongoClient[Any],
    policy: str,
) -> None:
    target_client.shop.command(
        {"createIndexes": "users", "indexes": [{"key": {"qty": 1}, "name": "q", "unique": True}]}
    )
    result = sync_to_the_end(source, target, on_conflict=policy).finish()
    assert result.conflicts > 0
    records = list(target_client.shardstream_sync.conflicts.find())
    assert len(records) == result.conflicts  # each one recorded
    assert {(r["ns"], r["policy"]) for r in records} == {("shop.users", policy)}
    users = cluster_state(target_client)[("shop", "users")]
    quantities = [bson.decode(raw).get("qty") for raw in users.values()]
    assert len(quantities) == len(set(quantities))  # the target's unique index held
    # The other collections are untouched by the conflicts.
    final = encoded_state(source.result.final_state)
    assert cluster_state(target_client)[("shop", "orders")] == final[("shop", "orders")]


def test_a_new_sync_refuses_a_target_namespace_that_already_holds_data(
    source: SimulatedSource, target: EmulatedCluster, target_client: MongoClient[Any]
) -> None:
    target_client.shop.orders.insert_one({"_id": "already here"})
    with pytest.raises(SyncConflict, match=r"shop\.orders already holds data"):
        sync(source.cluster.uri, target.uri)


def test_an_idle_shard_is_nudged_with_an_oplog_note_once_it_stood_still() -> None:
    with EmulatedCluster(shards=2) as cluster:
        nudger = IdleShardNudger(cluster.uri, 0.05)
        try:
            busy, idle = cluster.shards
            positions = {busy.name: Timestamp(10, 1), idle.name: Timestamp(5, 1)}
            assert nudger.check(positions) == []
            time.sleep(0.06)
            positions[busy.name] = Timestamp(11, 1)
            assert nudger.check(positions) == [idle.name]
            notes = [e for e in idle.oplog.entries() if e["op"] == "n"]
            assert [note["o"]["msg"] for note in notes] == ["shardstream sync idle shard no-op"]
            assert not [e for e in busy.oplog.entries() if e["op"] == "n"]
        finally:
            nudger.close()


def test_a_nudge_promises_everything_the_newest_shard_has_logged() -> None:
    # The idle node's own clock says (wall second, 1); the busy shard logged later in
    # that second (here: far ahead). The note must come after it, or the busy shard's
    # events would still wait at the merge.
    with EmulatedCluster(shards=2) as cluster:
        busy, idle = cluster.shards
        ahead = Timestamp(int(time.time()) + 100, 40)
        busy.append({"op": "n", "ns": "", "o": {"msg": "busy"}, "ts": ahead})
        nudger = IdleShardNudger(cluster.uri, 0.01)
        try:
            positions = {busy.name: Timestamp(ahead.time, 39), idle.name: Timestamp(5, 1)}
            nudger.check(positions)
            time.sleep(0.02)
            positions[busy.name] = ahead
            assert nudger.check(positions) == [idle.name]
            (note,) = [e for e in idle.oplog.entries() if e["op"] == "n"]
            assert note["ts"] > ahead
        finally:
            nudger.close()
