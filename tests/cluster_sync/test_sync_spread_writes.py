"""A whole migration through the API's CLI wrappers with the source's writes landing on
every shard while its chunks migrate (hashed and ranged collections, cross-shard
transactions, key changes that move documents, a balancer moving a chunk every few tens of
milliseconds): copy, stream, lag 0, commit (source writes refused, target equal), reverse
(the new source's writes reach the old one), equal both ways."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.errors import WriteError

from shardstream.cli.main import main
from shardstream.cluster_sync import SyncOptions, verify
from shardstream.cluster_sync.control_api import ControlApi
from shardstream.cluster_sync.migration import Migration
from shardstream.emulator import EmulatedCluster
from shardstream.sim.emulated_source import cluster_state
from tests.cluster_sync.static_source import START, static_source
from tests.sync_thread import SyncThread, wait_for

USER_WRITES_BLOCKED = 371


def _write(client: MongoClient[Any], rounds: range) -> None:
    """CRUD, key changes and cross-shard transactions on both collections."""
    orders, items = client.shop.orders, client.shop.items
    for n in rounds:
        orders.insert_many([{"_id": f"o{n}-{i}", "qty": i} for i in range(5)])
        items.insert_many([{"_id": f"i{n}-{i}", "k": (n * 7 + i * 13) % 100} for i in range(5)])
        orders.update_one({"_id": f"o{n}-1"}, {"$inc": {"qty": 10}})
        # A key change (by the whole key, as 7.0 requires) may move the document.
        old_k = (n * 7 + 2 * 13) % 100
        items.update_one({"_id": f"i{n}-2", "k": old_k}, {"$set": {"k": (n * 31) % 100}})
        orders.delete_one({"_id": f"o{n}-3"})
        with client.start_session() as session, session.start_transaction():
            orders.insert_one({"_id": f"t{n}-a"}, session=session)
            items.insert_one({"_id": f"t{n}-b", "k": 1}, session=session)
            items.insert_one({"_id": f"t{n}-c", "k": 99}, session=session)


def _user_inserts(cluster: EmulatedCluster) -> dict[str, int]:
    """Each shard's inserts logged by clients (not by migrations)."""
    return {
        shard.name: sum(
            1
            for entry in shard.oplog.entries()
            if entry["op"] == "i" and not entry.get("fromMigrate") and entry["ts"] > START
        )
        for shard in cluster.shards
    }


def test_a_migration_under_spread_writes_and_moving_chunks_cuts_over_and_reverses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with static_source(shards=3) as source, EmulatedCluster(shards=2) as target:
        src: MongoClient[Any] = MongoClient(source.uri)
        dst: MongoClient[Any] = MongoClient(target.uri)
        with src, dst:
            src.admin.command({"shardCollection": "shop.orders", "key": {"_id": "hashed"}})
            src.admin.command({"shardCollection": "shop.items", "key": {"k": 1}})
            for middle, shard in ((33, 1), (66, 2)):
                src.admin.command({"split": "shop.items", "middle": {"k": middle}})
                to = source.shards[shard].name
                src.admin.command({"moveChunk": "shop.items", "find": {"k": middle}, "to": to})
            _write(src, range(3))  # copied
            options = SyncOptions(
                source=source.uri,
                target=target.uri,
                idle_noop_interval_s=0.2,
                shard_target=True,
                batch_size=50,
                reversible=True,
            )
            migration = Migration(options)
            api = ControlApi(migration, port=0).start()
            running = SyncThread(migration.run)
            balancer = None
            try:
                wait_for(
                    lambda: migration.control.state == "STREAMING" or running.error,
                    "the stream phase",
                )
                before = _user_inserts(source)
                balancer = source.balancer(0.03, seed=7)
                failed: list[BaseException] = []

                def writing() -> None:
                    try:
                        _write(src, range(3, 28))
                    except BaseException as exc:  # handed to the test
                        failed.append(exc)

                writer = threading.Thread(target=writing)
                writer.start()
                writer.join(timeout=120)
                assert not failed, failed
                # Migrations under the stream, however fast the writes went (they once
                # finished after only five moves).
                wait_for(lambda: balancer.moves > 5, "six chunk migrations")
                balancer.stop()
                after = _user_inserts(source)
                assert all(after[name] > before[name] for name in after)  # every shard wrote
                # The runbook, through the CLI wrappers: the lag falls to 0, then commit.

                def status() -> dict[str, Any]:
                    assert main(["sync", "status", "--api", api.url]) == 0
                    document: dict[str, Any] = json.loads(capsys.readouterr().out)
                    return document

                wait_for(lambda: status()["lagTimeSeconds"] == 0, "lag 0")
                assert main(["sync", "commit", "--api", api.url]) == 0, migration.progress()
                committed = json.loads(capsys.readouterr().out.splitlines()[-1])
                assert (committed["state"], committed["canWrite"]) == ("COMMITTED", True)
                with pytest.raises(WriteError) as refused:
                    src.shop.orders.insert_one({"_id": "after the commit"})
                assert refused.value.code == USER_WRITES_BLOCKED
                assert verify(source.uri, target.uri).equal
                assert cluster_state(dst) == cluster_state(src)
                # Fall back: the new source's writes flow back into the old one.
                assert main(["sync", "reverse", "--api", api.url]) == 0
                assert json.loads(capsys.readouterr().out)["state"] == "REVERSING"
                wait_for(lambda: status()["direction"] == "reverse", "the reverse sync")
                dst.shop.orders.insert_one({"_id": "written on the new source"})
                dst.shop.items.delete_one({"_id": "i5-0"})
                wait_for(
                    lambda: (
                        src.shop.orders.find_one({"_id": "written on the new source"})
                        and src.shop.items.find_one({"_id": "i5-0"}) is None
                    ),
                    "the new source's writes on the old one",
                )
                assert verify(target.uri, source.uri).equal
                assert verify(source.uri, target.uri).equal
            finally:
                if balancer is not None:
                    balancer.stop()
                migration.stop()
                api.stop()
            running.join(what="the migration (reversed) did not stop when asked")
            sharded = {d["_id"]: d["key"] for d in dst.config.collections.find()}
            assert sharded == {"shop.orders": {"_id": "hashed"}, "shop.items": {"k": 1}}
