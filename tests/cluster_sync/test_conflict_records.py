"""Writes a conflict policy skipped or overwrote are recorded in the target's
``shardstream_sync.conflicts``, in the copy and in the stream, with what they met, once
each, and counted in the result and the progress."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import MongoClient

from shardstream.cluster_sync import SyncOptions
from shardstream.cluster_sync.conflict_log import ConflictLog
from shardstream.emulator import EmulatedCluster
from tests.cluster_sync.conftest import RunningSync, checkpoint, wait_for
from tests.cluster_sync.static_source import static_source


@pytest.mark.parametrize("policy", ["skip", "overwrite"])
def test_each_conflict_is_recorded_with_the_write_and_the_document_it_met(policy: str) -> None:
    with static_source() as source, EmulatedCluster(shards=1) as target:
        src: MongoClient[Any] = MongoClient(source.uri)
        dst: MongoClient[Any] = MongoClient(target.uri)
        with src, dst:
            src.shop.users.insert_many([{"_id": 1, "qty": 5}, {"_id": 3, "qty": 7}])
            # A unique index only the target has, and documents holding two of its keys.
            dst.shop.users.create_index("qty", unique=True)
            dst.shop.users.insert_many([{"_id": "t", "qty": 5}, {"_id": "u", "qty": 6}])
            options = SyncOptions(
                source=source.uri, target=target.uri, on_conflict=policy, idle_noop_interval_s=0.2
            )
            running = RunningSync(options)
            try:
                wait_for(
                    lambda: (checkpoint(dst) or {}).get("phase") == "stream" or running.error,
                    "the stream phase",
                )
                src.shop.users.insert_one({"_id": 2, "qty": 6})
                wait_for(
                    lambda: (
                        dst.shardstream_sync.conflicts.count_documents({}) == 2 or running.error
                    ),
                    "two conflict records",
                )
                # Each is counted right after it is stored: the count may trail by a moment.
                wait_for(
                    lambda: running.job.progress()["conflicts"] == 2 or running.error,
                    "the progress to count both",
                )
                assert running.job.progress()["conflicts"] == 2
            finally:
                result = running.finish()
            assert result.conflicts == 2
            records = {r["phase"]: r for r in dst.shardstream_sync.conflicts.find()}
            copy, stream = records["copy"], records["stream"]
            assert (copy["ns"], copy["key"], copy["policy"], copy["token"]) == (
                "shop.users",
                {"qty": 5},
                policy,
                None,
            )
            assert copy["write"] == {
                "op": "copy",
                "documentKey": {"_id": 1},
                "document": {"_id": 1, "qty": 5},
            }
            assert copy["met"] == {"_id": "t", "qty": 5}
            assert (stream["ns"], stream["key"], stream["policy"]) == (
                "shop.users",
                {"qty": 6},
                policy,
            )
            assert stream["token"]["_data"]
            assert stream["write"]["op"] == "replace"
            assert stream["write"]["document"] == {"_id": 2, "qty": 6}
            assert stream["met"] == {"_id": "u", "qty": 6}
            held = sorted(dst.shop.users.find(), key=lambda d: str(d["_id"]))
            if policy == "skip":
                expected = [{"_id": 3, "qty": 7}, {"_id": "t", "qty": 5}, {"_id": "u", "qty": 6}]
            else:  # the holders replaced by the source's documents
                expected = [{"_id": 1, "qty": 5}, {"_id": 2, "qty": 6}, {"_id": 3, "qty": 7}]
            assert held == expected


def test_a_conflict_replayed_after_a_restart_is_recorded_once() -> None:
    with EmulatedCluster(shards=1) as target:
        client: MongoClient[Any] = MongoClient(target.uri)
        with client:
            log = ConflictLog(client, "default", "skip")
            write = {"op": "replace", "documentKey": {"_id": 2}, "document": {"_id": 2}}
            for _ in range(2):  # the same event's write, refused again on replay
                log.record(
                    ("shop", "users"),
                    {"qty": 6},
                    token={"_data": "8264"},
                    write=write,
                    met={"_id": "u", "qty": 6},
                )
            assert client.shardstream_sync.conflicts.count_documents({}) == 1
