"""Replays of simulated oplogs through the transform, shared by the simulator tests.

The reference order itself (``shard_events``, ``merged_events``) is product code, in
:mod:`shardstream.sim.reference_events`, which ``shardstream demo --sync`` uses too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardstream.sim import SimulationResult
from shardstream.sim.apply_events import State, apply_events, encoded_state
from shardstream.sim.chunks import hash_position
from shardstream.sim.reference_events import RAW, merged_events, shard_events


def position(result: SimulationResult, ns: str, key: Mapping[str, Any]) -> Any:
    """Where a document key falls in its collection's chunk ranges."""
    coll = ns.partition(".")[2]
    spec = next(spec for spec in result.config.collections if spec.name == coll)
    value = key[spec.shard_key[0]]
    return hash_position(value) if spec.hashed else value


def in_range(value: Any, lower: Any, upper: Any) -> bool:
    """Whether ``value`` is in ``[lower, upper)`` (None bounds are open)."""
    return (lower is None or value >= lower) and (upper is None or value < upper)


encoded = encoded_state
__all__ = [
    "RAW",
    "State",
    "apply_events",
    "encoded",
    "in_range",
    "merged_events",
    "position",
    "shard_events",
]
