"""A running sync applies DDL issued on the source after its copy, so the target's catalog
(collections, their options, their indexes) and documents end up equal to the source's.

The DDL goes through the source's mongos with pymongo, so the emulator logs it as mongod
does and the sync meets it in its merged stream, as it would on a real cluster. The
source's second shard stays idle, holding the merge back until :func:`settle` writes its
no-op: what was issued before one ``settle`` is released, and applied, as one batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import ASCENDING, MongoClient

import shardstream
from shardstream.cluster_sync import SyncOptions
from shardstream.cluster_sync.checkpoint import Checkpoint, CheckpointStore
from shardstream.emulator import EmulatedCluster
from tests.cluster_sync.conftest import RunningSync, applied_through, checkpoint, wait_for
from tests.cluster_sync.static_source import contents, settle, static_source

# Databases that hold no user data (the sync's checkpoint lives in shardstream_sync).
_SYSTEM_DBS = frozenset({"admin", "config", "local", "shardstream_sync"})
Catalog = dict[str, dict[str, Any]]


def catalog(client: MongoClient[Any]) -> Catalog:
    """Every user collection as ``{"db.coll": {options, indexes, documents}}``.

    Indexes are compared whole but for ``v``: the index version is the target's choice
    (``ddl_apply`` sends specs without it), everything else (name, key, unique,
    expireAfterSeconds ...) is the index. A key pattern is a list of pairs, since its
    order is part of the index and dict equality would ignore it.
    """
    found: Catalog = {}
    for db in sorted(set(client.list_database_names()) - _SYSTEM_DBS):
        for entry in client[db].list_collections():
            name = entry["name"]
            indexes = {
                spec["name"]: {
                    **{k: v for k, v in spec.items() if k != "v"},
                    "key": list(spec["key"].items()),
                }
                for spec in client[db][name].list_indexes()
            }
            found[f"{db}.{name}"] = {
                "options": entry.get("options", {}),
                "indexes": indexes,
                "documents": contents(client, db, name),
            }
    return found


@pytest.fixture
def source() -> Iterator[EmulatedCluster]:
    """Two databases as of T0, loaded (unlogged) on the primary shard."""
    with static_source() as cluster:
        primary = cluster.shards[0]
        primary.load_collection(
            "shop.orders",
            [{"_id": i, "sku": f"sku-{i}", "region": "eu", "qty": i} for i in range(10)],
            indexes=[{"key": {"region": 1}, "name": "by_region"}],
        )
        primary.load_collection("shop.staging", [{"_id": i, "state": "new"} for i in range(5)])
        primary.load_collection(
            "shop.archive",
            [{"_id": i, "state": "old"} for i in range(3)],
            indexes=[{"key": {"state": 1}, "name": "by_state"}],
        )
        primary.load_collection("shop.scratch", [{"_id": 1}])
        primary.load_collection(
            "shop.sessions",
            [{"_id": 1, "seen": 0}],
            indexes=[{"key": {"seen": 1}, "name": "ttl", "expireAfterSeconds": 3600}],
        )
        primary.load_collection("reports.daily", [{"_id": 1}])
        primary.load_collection("reports.weekly", [{"_id": 1}])
        yield cluster


@dataclasses.dataclass
class LiveSync:
    """A sync from ``source`` into ``target`` past its copy, with clients on both mongos."""

    source: EmulatedCluster
    target: EmulatedCluster
    on_source: MongoClient[Any]
    on_target: MongoClient[Any]
    running: RunningSync
    at_copy_end: dict[str, Any]  # the checkpoint stored when the copy ended

    def release(self) -> None:
        """Release everything issued on the source so far; wait until it is applied."""
        end = settle(self.source)
        wait_for(
            lambda: applied_through(self.on_target, end) or self.running.error,
            "the sync to apply what was released",
        )

    def replay_from(self, stored: dict[str, Any]) -> None:
        """Stop, put back ``stored`` as the checkpoint and sync again (public API): the
        target a kill leaves after applying everything past ``stored``."""
        self.running.finish()
        checkpoints = self.on_target.shardstream_sync.checkpoints
        checkpoints.replace_one({"_id": stored["_id"]}, stored)
        shardstream.sync(self.source.uri, self.target.uri, idle_exit_s=1)

    def replay_from_the_copy(self) -> None:
        """Stop, put back the checkpoint of the copy's end and sync again (public API):
        the target a kill leaves after applying everything but checkpointing none of it,
        so the whole stream is replayed over its own result."""
        self.running.finish()
        checkpoints = self.on_target.shardstream_sync.checkpoints
        checkpoints.replace_one({"_id": self.at_copy_end["_id"]}, self.at_copy_end)
        shardstream.sync(self.source.uri, self.target.uri, idle_exit_s=1)


@pytest.fixture
def live(source: EmulatedCluster) -> Iterator[LiveSync]:
    """A sync into an emulated 2-shard target that finished its copy (phase "stream")."""
    with EmulatedCluster(shards=2) as target:
        on_source: MongoClient[Any] = MongoClient(source.uri)
        on_target: MongoClient[Any] = MongoClient(target.uri)
        running = RunningSync(SyncOptions(source=source.uri, target=target.uri))
        stored = wait_for(
            lambda: _stream_checkpoint(on_target) or running.error, "the sync to end its copy"
        )
        assert isinstance(stored, dict), stored
        yield LiveSync(source, target, on_source, on_target, running, stored)
        if running.running:
            running.finish()
        on_source.close()
        on_target.close()


def _stream_checkpoint(target: MongoClient[Any]) -> dict[str, Any] | None:
    stored = checkpoint(target)
    return stored if (stored or {}).get("phase") == "stream" else None


def test_ddl_after_the_copy_leaves_the_target_catalog_equal_to_the_source(live: LiveSync) -> None:
    on_source = live.on_source
    shop = on_source.shop
    # Each step is released before the next, so each DDL event is a batch of its own.
    shop.orders.insert_many([{"_id": i, "sku": f"sku-{i}", "qty": i} for i in range(10, 15)])
    live.release()
    shop.orders.create_index([("sku", ASCENDING)], name="by_sku", unique=True)
    shop.orders.create_index([("qty", ASCENDING), ("sku", -1)], name="by_qty_sku")
    live.release()
    shop.orders.drop_index("by_region")
    shop.command("collMod", "orders", validator={"qty": {"$gte": 0}}, validationLevel="strict")
    shop.command("collMod", "sessions", index={"name": "ttl", "expireAfterSeconds": 60})
    shop.command("collMod", "orders", index={"name": "by_qty_sku", "hidden": True})
    # Options given at creation come only with the create event (an insert would not).
    shop.create_collection("ledger", validator={"amount": {"$type": "number"}})
    shop.ledger.insert_one({"_id": 1, "amount": 5})
    live.release()
    on_source.admin.command("renameCollection", "shop.orders", to="shop.orders_2024")
    on_source.admin.command("renameCollection", "shop.staging", to="shop.archive", dropTarget=True)
    live.release()
    shop.drop_collection("scratch")
    # As mongod does, the emulator logs a drop of each collection before dropDatabase
    # itself, so here the dropDatabase rule finds the target's database already empty.
    on_source.drop_database("reports")
    live.release()
    # CRUD on the new names reaches the renamed collections.
    shop.orders_2024.insert_one({"_id": 99, "sku": "sku-99", "qty": 1})
    shop.orders_2024.update_one({"_id": 3}, {"$set": {"qty": 30}})
    shop.archive.delete_one({"_id": 0})
    shop.archive.update_one({"_id": 4}, {"$set": {"state": "done"}})
    live.release()
    live.running.finish()

    expected = catalog(on_source)
    assert sorted(expected) == [
        "shop.archive",
        "shop.ledger",
        "shop.orders_2024",
        "shop.sessions",
    ]
    assert catalog(live.on_target) == expected


def test_ddl_and_crud_on_both_sides_of_it_in_one_batch(live: LiveSync) -> None:
    """Nothing is released until the end, so the renames, index builds and drops sit
    between the writes that must go before and after them in one batch: only the
    barrier keeps the writes to a name on the right side of the DDL that moves it."""
    on_source = live.on_source
    shop = on_source.shop
    shop.orders.insert_one({"_id": 100, "sku": "sku-100", "qty": 5})
    shop.orders.update_one({"_id": 1}, {"$set": {"qty": 11}})
    on_source.admin.command("renameCollection", "shop.orders", to="shop.orders_2024")
    shop.orders_2024.insert_one({"_id": 101, "sku": "sku-101", "qty": 6})
    shop.orders_2024.create_index([("sku", ASCENDING)], name="by_sku", unique=True)
    shop.orders_2024.delete_one({"_id": 100})
    # A new "orders" after the rename: its writes must not land in the renamed one.
    shop.orders.insert_one({"_id": 1, "sku": "reused name"})
    shop.staging.update_one({"_id": 2}, {"$set": {"state": "moved"}})
    on_source.admin.command("renameCollection", "shop.staging", to="shop.archive", dropTarget=True)
    shop.archive.insert_one({"_id": 50, "state": "after the rename"})
    shop.orders_2024.drop_index("by_region")
    # createIndexes on a missing collection creates it: create, then the index.
    shop.fresh.create_index([("at", -1)], name="by_at")
    shop.fresh.insert_one({"_id": 1, "at": 3})
    shop.scratch.insert_one({"_id": 2})
    shop.drop_collection("scratch")
    on_source.reports.daily.insert_one({"_id": 2})
    on_source.drop_database("reports")
    on_source.reports.monthly.insert_one({"_id": 1, "after": "dropDatabase"})
    live.release()
    live.running.finish()

    expected = catalog(on_source)
    assert sorted(expected) == [
        "reports.monthly",
        "shop.archive",
        "shop.fresh",
        "shop.orders",
        "shop.orders_2024",
        "shop.sessions",
    ]
    assert catalog(live.on_target) == expected


def test_a_replayed_index_build_meets_the_index_a_later_coll_mod_changed(live: LiveSync) -> None:
    """The replayed createIndexes asks for expireAfterSeconds 3600 where the target holds
    60: the target refuses it (IndexOptionsConflict), which used to stop the sync."""
    on_source = live.on_source
    shop = on_source.shop
    shop.orders.create_index([("at", ASCENDING)], name="expires", expireAfterSeconds=3600)
    live.release()
    shop.command("collMod", "orders", index={"name": "expires", "expireAfterSeconds": 60})
    shop.orders.drop_index("by_region")
    shop.orders.create_index([("sku", ASCENDING)], name="by_region")  # a name reused
    live.release()
    live.replay_from_the_copy()
    assert catalog(live.on_target) == catalog(on_source)


def test_a_kill_between_a_rename_with_drop_target_and_its_checkpoint_keeps_the_collection(
    live: LiveSync, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Writes to the old name, then the rename, in one batch. The sync stores a checkpoint
    # on each side of a DDL event; a kill right after the rename leaves the one before it,
    # after the insert. Replayed from there, the rename meets the target as the rename
    # left it (no shop.staging): had the insert been replayed first, it would recreate
    # shop.staging with one document, and the rename would drop the whole renamed
    # collection for it (the target's collection UUIDs are not the source's, so the event
    # cannot tell the two apart).
    saved: list[Any] = []
    save = CheckpointStore.save

    def recording_save(store: CheckpointStore, checkpoint: Checkpoint) -> None:
        saved.append(checkpoint.token)
        save(store, checkpoint)

    monkeypatch.setattr(CheckpointStore, "save", recording_save)
    on_source = live.on_source
    on_source.shop.staging.insert_one({"_id": 9, "state": "late"})
    on_source.admin.command("renameCollection", "shop.staging", to="shop.archive", dropTarget=True)
    live.release()
    with shardstream.watch(
        live.source.uri, start_at_operation_time=live.at_copy_end["t0"]
    ) as stream:
        insert = wait_for(stream.try_next, "the insert event")
        rename = wait_for(stream.try_next, "the rename event")
    assert (insert["ns"], rename["operationType"]) == ({"db": "shop", "coll": "staging"}, "rename")
    # Stored right before the rename and right after it, within their one batch.
    assert [insert["_id"], rename["_id"]] == saved[saved.index(insert["_id"]) :][:2]
    live.replay_from({**live.at_copy_end, "token": insert["_id"]})
    assert catalog(live.on_target) == catalog(on_source)
