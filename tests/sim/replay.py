"""Replays of simulated oplogs through the transform, shared by the simulator tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shardstream.sim import SimulationResult
from shardstream.sim.apply_events import State, apply_events, encoded_state
from shardstream.sim.chunks import hash_position
from shardstream.transform import ChangeStreamOptions, transform_oplog

RAW = ChangeStreamOptions(show_raw_update_description=True)


def shard_events(
    oplog: Sequence[Mapping[str, Any]], options: ChangeStreamOptions = RAW
) -> list[dict[str, Any]]:
    """The event documents one shard's oplog yields, in that shard's order."""
    return [event.document for event in transform_oplog(oplog, options)]


def merged_events(
    result: SimulationResult, options: ChangeStreamOptions = RAW
) -> list[dict[str, Any]]:
    """Every shard's events in the merged order: clusterTime, then the token's ``_data``."""
    events = [event for oplog in result.oplogs.values() for event in shard_events(oplog, options)]
    events.sort(key=lambda event: (event["clusterTime"], event["_id"]["_data"]))
    return events


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
    "State",
    "apply_events",
    "encoded",
    "in_range",
    "merged_events",
    "position",
    "shard_events",
]
