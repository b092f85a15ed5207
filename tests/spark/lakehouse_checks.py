"""Shared checks for the lakehouse tests: simulated streams and the states to compare.

A mirror is compared with the simulator's truth as BSON bytes (field order and types
count), in the shape of :func:`shardstream.sim.apply_events.encoded_state`.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from shardstream.merger import MergedStream
from shardstream.sim import (
    SimulatedCluster,
    SimulationConfig,
    SimulationResult,
    simulated_sources,
)
from shardstream.sim.apply_events import encoded_state
from shardstream.spark.source.rows import events_to_batch
from shardstream.transform import ChangeEvent, ChangeStreamOptions


def simulate(*, seed: int, shards: int = 3, operations: int = 300) -> SimulationResult:
    """One seeded simulated run (migrations and transactions included by default)."""
    return SimulatedCluster(SimulationConfig(seed=seed, shards=shards, operations=operations)).run()


def merged_events(result: SimulationResult, *, seed: int = 0) -> list[ChangeEvent]:
    """The run's whole merged stream, as mongos would emit it."""
    stream = MergedStream(simulated_sources(result, seed=seed), ChangeStreamOptions())
    events: list[ChangeEvent] = []
    while not stream.exhausted:
        events += stream.next_batch(500)[0]
    stream.close()
    return events


def event_batches(events: list[ChangeEvent], size: int) -> list[pa.Table]:
    """The events cut into Arrow tables of ``size`` rows, in stream order."""
    return [
        pa.Table.from_batches([events_to_batch(events[start : start + size])])
        for start in range(0, len(events), size)
    ]


def expected_state(result: SimulationResult) -> dict[Any, dict[bytes, bytes]]:
    """The simulator's true final data, as BSON bytes."""
    return encoded_state(result.final_state)
