"""A target that goes away mid-sync: its writes are retried, nothing is lost or reordered.

The target's mongos hangs up on writes in both phases (the copy's inserts, the stream's
bulk writes and transactions, the checkpoint saves): each hang-up is a connection lost
before the command ran. pymongo retries a retryable write once by itself, so every fault
is queued at least twice in a row, which reaches the sync's own retry with backoff.
"""

from __future__ import annotations

from typing import Any

from pymongo import MongoClient

from shardstream.emulator import EmulatedCluster
from shardstream.sim.apply_events import encoded_state
from shardstream.sim.emulated_source import SimulatedSource, cluster_state
from tests.cluster_sync.conftest import (
    sync_to_the_end,
)

# Commands of the sync's writes: inserts (the copy), updates (replace-upserts, update
# pipelines, checkpoint saves), deletes, and the commits of source transactions.
WRITES = ("insert", "update", "delete", "commitTransaction")
STREAM_WRITES = WRITES[1:]  # the stream upserts: it sends no insert


def test_writes_the_target_dropped_are_sent_again_and_the_target_ends_equal(
    source: SimulatedSource, target: EmulatedCluster
) -> None:
    for command in WRITES:
        target.mongos.hang_up_next(command, times=3)
    running = sync_to_the_end(source, target, transactions=True)
    result = running.finish()
    assert len(target.mongos.faults) == 0  # every hang-up was met, and survived
    assert result.applied > 0
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        assert cluster_state(client) == encoded_state(source.result.final_state)


def test_hang_ups_while_streaming_are_retried_in_order(
    source: SimulatedSource, target: EmulatedCluster
) -> None:
    # Queued once the copy is done: only the stream's writes meet them, in small batches,
    # so both a batch's writes and its checkpoint save are sent again.
    def hang_ups() -> None:
        for command in STREAM_WRITES:  # pymongo's own retry meets one, the sync the rest
            target.mongos.hang_up_next(command, times=4)

    running = sync_to_the_end(source, target, before_feed=hang_ups, batch_size=20)
    running.finish()
    assert len(target.mongos.faults) == 0
    client: MongoClient[Any] = MongoClient(target.uri)
    with client:
        assert cluster_state(client) == encoded_state(source.result.final_state)
