"""Simulator: a deterministic sharded cluster whose per-shard oplogs have a known final state.

Tests and demos run a seeded workload on simulated shards and get back each shard's
oplog (entries shaped as a 7.0+ shard writes them), the true final contents of every
collection, and live-feeding :class:`~shardstream.oplog.source.OplogSource` objects
over those oplogs::

    result = SimulatedCluster(SimulationConfig(seed=1, operations=500)).run()
    sources = simulated_sources(result, seed=1)
"""

from __future__ import annotations

from shardstream.sim.cluster import SimulatedCluster
from shardstream.sim.config import DEFAULT_COLLECTIONS, CollectionSpec, SimulationConfig
from shardstream.sim.documents import id_key
from shardstream.sim.feed import SimulatedOplogSource, simulated_sources
from shardstream.sim.result import MigrationRecord, SimulationCounters, SimulationResult

__all__ = [
    "DEFAULT_COLLECTIONS",
    "CollectionSpec",
    "MigrationRecord",
    "SimulatedCluster",
    "SimulatedOplogSource",
    "SimulationConfig",
    "SimulationCounters",
    "SimulationResult",
    "id_key",
    "simulated_sources",
]
