"""Simulated runs shared by the simulator tests (each is built once per session)."""

from __future__ import annotations

import pytest

from shardstream.sim import SimulatedCluster, SimulationConfig, SimulationResult

# Busy enough for every feature to show up: idle stretches, an added shard, prepared
# transactions, migrations to and from every shard.
BUSY = SimulationConfig(
    seed=7,
    shards=3,
    operations=1500,
    idle_shards=("shard2",),
    add_shard_at=600,
)


@pytest.fixture(scope="session")
def busy() -> SimulationResult:
    """The run of :data:`BUSY`."""
    return SimulatedCluster(BUSY).run()
