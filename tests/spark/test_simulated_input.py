"""SimulatedShardOplog: a simulated run's shard, positioned at the start by bisection."""

from __future__ import annotations

import pytest
from bson.timestamp import Timestamp

from shardstream.errors import ChangeStreamHistoryLost
from shardstream.sim import SimulationConfig
from shardstream.spark.source.simulated_input import SimulatedShardOplog, simulated_run

CONFIG = SimulationConfig(seed=5, shards=2, operations=120)


def _read_all(source: SimulatedShardOplog) -> list[Timestamp]:
    times: list[Timestamp] = []
    while True:
        batch = source.next_batch(7)
        times += [entry["ts"] for entry in batch.entries]
        if batch.entries:
            assert batch.promise == batch.entries[-1]["ts"]
        if batch.exhausted:
            return times


def test_it_reads_from_the_start_on_and_fetches_older_entries() -> None:
    oplog = simulated_run(CONFIG).oplogs["shard1"]
    middle = oplog[len(oplog) // 2]["ts"]
    assert _read_all(SimulatedShardOplog(CONFIG, "shard1", None)) == [e["ts"] for e in oplog]
    later = [e["ts"] for e in oplog if e["ts"] >= middle]
    source = SimulatedShardOplog(CONFIG, "shard1", middle)
    assert _read_all(source) == later
    assert source.fetch_entry(oplog[1]["ts"]) is oplog[1]
    assert source.fetch_entry(Timestamp(1, 1)) is None


def test_a_start_before_the_first_entry_is_history_lost() -> None:
    first = simulated_run(CONFIG).oplogs["shard0"][0]["ts"]
    source = SimulatedShardOplog(CONFIG, "shard0", Timestamp(first.time - 1, 0))
    with pytest.raises(ChangeStreamHistoryLost, match="shard 'shard0' starts at"):
        source.next_batch(10)
