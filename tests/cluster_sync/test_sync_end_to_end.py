"""Simulated source -> ``shardstream sync`` -> emulated target: the target ends equal to the
simulator's true final data, byte for byte, through chunk migrations, multi-shard and
large transactions, DDL, and a copy that reads documents newer than T0."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import MongoClient

from shardstream.cluster_sync import SyncOptions, source_catalog, sync_job, verify
from shardstream.emulator import EmulatedCluster, EmulatedReplicaSet
from shardstream.sim.apply_events import encoded_state
from shardstream.sim.emulated_source import SimulatedSource, cluster_state
from tests.cluster_sync.conftest import (
    RunningSync,
    applied_through,
    checkpoint,
    sync_to_the_end,
    wait_for,
)


def _sync_to_the_end(source: SimulatedSource, target: EmulatedCluster, **options: Any) -> Any:
    running = sync_to_the_end(source, target, **options)
    result = running.finish()
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        return result, cluster_state(client), running.lines


@pytest.mark.parametrize("transactions", [True, False], ids=["transactions", "single-writes"])
def test_the_target_ends_with_the_sources_true_final_data(
    source: SimulatedSource, target: EmulatedCluster, transactions: bool
) -> None:
    result, contents, lines = _sync_to_the_end(source, target, transactions=transactions)
    counters = source.result.counters
    assert counters.migrations
    assert counters.multi_shard_transactions
    assert counters.collmods
    assert result.copied == sum(len(docs) for docs in source.state_at_cut.values()) > 0
    assert result.applied > 0
    assert contents == encoded_state(source.result.final_state)
    assert any(line.startswith("sync stream:") and "lag" in line for line in lines)
    # The copy's reads wait for T0 on every shard (afterClusterTime), not only majority.
    copy_read = source.cluster.mongos.last_bodies["find"]
    assert copy_read["readConcern"] == {"level": "majority", "afterClusterTime": result.t0}


def test_shards_tailed_by_child_processes_sync_the_same_final_data(
    source: SimulatedSource, target: EmulatedCluster
) -> None:
    result, contents, _ = _sync_to_the_end(source, target, tailer="process")
    assert result.applied > 0
    assert contents == encoded_state(source.result.final_state)


def test_verify_finds_the_synced_target_equal_and_names_a_difference(
    source: SimulatedSource, target: EmulatedCluster
) -> None:
    _sync_to_the_end(source, target, writers=3)
    report = verify(source.cluster.uri, target.uri)
    assert report.equal
    assert len(report.namespaces) == len(source.result.final_state)
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        (db, coll), documents = next(iter(source.result.final_state.items()))
        victim = next(iter(documents.values()))
        client[db][coll].delete_one({"_id": victim["_id"]})
    report = verify(source.cluster.uri, target.uri)
    assert not report.equal
    different = [item for item in report.namespaces if not item.equal]
    assert [(item.source, item.missing_count, item.missing) for item in different] == [
        ((db, coll), 1, (victim["_id"],))
    ]


def test_a_restarted_sync_resumes_from_its_checkpoint(
    source: SimulatedSource, target: EmulatedCluster
) -> None:
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        options = SyncOptions(source=source.cluster.uri, target=target.uri, batch_size=50)
        first = RunningSync(options)
        wait_for(lambda: checkpoint(client) or first.error, "the sync to take T0")
        end = source.feed_rest()
        # Stop part-way through the stream, then start a second sync with the same id.
        wait_for(lambda: (checkpoint(client) or {}).get("token") or first.error, "a first batch")
        first.finish()
        stored = checkpoint(client)
        assert stored is not None
        assert stored["phase"] == "stream"
        second = RunningSync(options)
        wait_for(lambda: applied_through(client, end) or second.error, "the end")
        result = second.finish()
        assert result.copied == 0  # the copy was done: the second run only streams
        assert cluster_state(client) == encoded_state(source.result.final_state)


def test_a_copy_reading_documents_newer_than_t0_converges_through_the_stream(
    source: SimulatedSource, target: EmulatedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The source's rest is written right after T0 is taken, before a document is read: the
    # copy reads every collection as it is at the end (documents updated, deleted, inserted
    # since T0, options changed), and the stream then replays every event since T0 over
    # that. Only idempotent rules converge: an insert of a document the copy already
    # holds, an update's absolute values, a delete of one already gone, DDL already done.
    taken: list[Any] = []

    def t0_then_the_rest(client: MongoClient[Any]) -> Any:
        t0 = source_catalog.majority_time(client)
        if not taken:
            taken.append(source.feed_rest())
        return t0

    monkeypatch.setattr(sync_job, "majority_time", t0_then_the_rest)
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        running = RunningSync(SyncOptions(source=source.cluster.uri, target=target.uri))
        wait_for(lambda: taken or running.error, "T0 and the rest written")
        wait_for(lambda: applied_through(client, taken[0]) or running.error, "the end")
        result = running.finish()
        assert result.copied == sum(len(docs) for docs in source.result.final_state.values())
        assert result.applied >= source.events_after_cut  # replayed over the newer copy
        assert cluster_state(client) == encoded_state(source.result.final_state)
    assert verify(source.cluster.uri, target.uri).equal


def test_a_replica_set_target_ends_with_the_sources_true_final_data(
    source: SimulatedSource,
) -> None:
    # The target need not be sharded: the sync writes through any primary.
    with EmulatedReplicaSet("target") as replica_set:
        result = sync_to_the_end(source, replica_set).finish()
        client: MongoClient[Any] = MongoClient(replica_set.uri)
        with client:
            assert cluster_state(client) == encoded_state(source.result.final_state)
    assert result.applied > 0


def test_a_verify_once_caught_up_after_the_copy_finds_the_copy_equal(
    source: SimulatedSource, target: EmulatedCluster
) -> None:
    # The source holds still from the cut until the feed, and after it: whenever the
    # stream first finds nothing ready after the copy, the target must equal the source.
    running = sync_to_the_end(source, target, verify_after_copy=True)
    # Everything is applied: the stream goes quiet, which runs the verify. Stopped before
    # that (a loaded machine), the run would end without it.
    wait_for(
        lambda: (
            any(line.startswith("verify, caught up") for line in running.lines) or running.error
        ),
        "the verify once the stream is quiet",
    )
    result = running.finish()
    assert result.copy_verify is not None
    assert result.copy_verify.equal
    lines = [line for line in running.lines if line.startswith("verify, caught up")]
    assert lines
    assert lines[-1] == "verify, caught up after the copy: verify: equal"
