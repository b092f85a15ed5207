"""The reason shardstream exists: only the merged order reproduces the cluster's data.

A simulated run with chunk migrations and multi-shard transactions is streamed
through watch(); applying the merged events gives exactly the simulator's final
state (documents compared as BSON bytes, so field order and types count).
Applying each shard's events on its own, shard after shard, as tools that read
shards in parallel without a global order do, does not.  The merged stream is read
on both paths (the ``path`` fixture, tests/paths.py).
"""

from __future__ import annotations

import pytest

from shardstream.sim import SimulatedCluster, SimulationConfig, SimulationResult, simulated_sources
from shardstream.sim.apply_events import apply_events, encoded_state
from shardstream.transform import ChangeStreamOptions, transform_oplog
from tests.paths import OnPath

SEEDS = range(8)


def _run(seed: int) -> SimulationResult:
    config = SimulationConfig(seed=seed, shards=3, operations=400, p_migration=0.08)
    result = SimulatedCluster(config).run()
    assert result.counters.migrations > 0
    assert result.counters.multi_shard_transactions > 0
    return result


@pytest.mark.parametrize("seed", SEEDS)
def test_applying_the_merged_stream_reproduces_the_final_state(path: OnPath, seed: int) -> None:
    result = _run(seed)
    sources = simulated_sources(result, seed=seed, delay=0.2, max_batch=16)
    with path.watch(sources, show_raw_update_description=True) as stream:
        state = apply_events(stream)
    assert encoded_state(state) == encoded_state(result.final_state)


def _per_shard_state(result: SimulationResult) -> dict[object, dict[bytes, bytes]]:
    options = ChangeStreamOptions(show_raw_update_description=True)
    events = [
        event.document
        for oplog in result.oplogs.values()
        for event in transform_oplog(oplog, options)
    ]
    return encoded_state(apply_events(events, strict=False))


def test_applying_shard_by_shard_does_not_reproduce_it() -> None:
    differing = [
        seed
        for seed in SEEDS
        if _per_shard_state(_run(seed)) != encoded_state(_run(seed).final_state)
    ]
    # Documents that migrated and were written on both shards end up wrong.
    assert len(differing) >= len(SEEDS) // 2, differing
