"""A sync with one idle source shard: held back without nudging, applied with it.

The merge may release a busy shard's events only once every shard has promised nothing
earlier. The emulated shards write no periodic no-op, so an idle shard never promises
anything by itself: without ``idle_noop_interval_s`` the busy shard's inserts stay held
at the merge for good; with it the sync writes ``appendOplogNote`` to the idle shard and
they are applied.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from pymongo import MongoClient

from shardstream.cluster_sync import SyncOptions
from shardstream.emulator import EmulatedCluster
from shardstream.errors import OplogError
from tests.cluster_sync.conftest import RunningSync, checkpoint, wait_for
from tests.cluster_sync.static_source import settle, static_source

HELD_FOR_S = 1.5  # how long the unnudged run is watched holding the inserts back


@pytest.mark.parametrize("interval", [None, 0.2], ids=["no-nudge", "nudged"])
def test_an_idle_shard_holds_the_stream_back_until_the_sync_nudges_it(
    interval: float | None,
) -> None:
    with static_source() as source, EmulatedCluster(shards=1) as target:
        idle = source.shards[1]  # the emulated mongos puts collections on the first
        options = SyncOptions(source=source.uri, target=target.uri, idle_noop_interval_s=interval)
        target_client: MongoClient[Any] = MongoClient(target.uri)
        source_client: MongoClient[Any] = MongoClient(source.uri)
        with target_client, source_client:
            running = RunningSync(options)
            try:
                wait_for(
                    lambda: (
                        (checkpoint(target_client) or {}).get("phase") == "stream" or running.error
                    ),
                    "the sync to start its stream",
                )
                source_client.shop.orders.insert_many([{"_id": n} for n in range(20)])

                def applied() -> bool:
                    return len(list(target_client.shop.orders.find())) == 20

                if interval is None:
                    time.sleep(HELD_FOR_S)
                    assert not applied()  # held: the idle shard promised nothing
                    assert [e["o"]["msg"] for e in idle.oplog.entries()] == ["initiating set"]
                    settle(source)  # the server's own periodic no-op: held, not lost
                    wait_for(lambda: applied() or running.error, "the inserts after a no-op")
                else:
                    wait_for(lambda: applied() or running.error, "the nudged inserts")
                    notes = [e for e in idle.oplog.entries() if e["op"] == "n"]
                    assert any(
                        n["o"].get("msg") == "shardstream sync idle shard no-op" for n in notes
                    )
            finally:
                running.finish()


def test_a_shard_refusing_the_nudge_stops_the_sync_naming_the_role_it_needs() -> None:
    # The nudges go out from the batch reader's thread; a refused one still ends the run.
    with static_source() as source, EmulatedCluster(shards=1) as target:
        idle = source.shards[1]
        idle.fail_next("appendOplogNote", 13, "Unauthorized")
        options = SyncOptions(source=source.uri, target=target.uri, idle_noop_interval_s=0.2)
        running = RunningSync(options)
        try:
            wait_for(lambda: running.error, "the refused nudge to stop the sync")
        finally:
            with pytest.raises(OplogError, match=r"clusterManager.*Unauthorized"):
                running.finish()
        assert [e["o"]["msg"] for e in idle.oplog.entries()] == ["initiating set"]
