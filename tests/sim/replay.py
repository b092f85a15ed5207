"""Replays of simulated oplogs through the transform, shared by the simulator tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import bson

from shardstream.sim import SimulationResult, id_key
from shardstream.sim.chunks import hash_position
from shardstream.transform import ChangeStreamOptions, transform_oplog
from shardstream.transform.apply_update import apply_update

State = dict[tuple[str, str], dict[bytes, Any]]
CRUD = ("insert", "update", "replace", "delete")
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


def apply_events(events: Iterable[Mapping[str, Any]]) -> State:
    """Apply CRUD events (with ``rawUpdateDescription``) to an empty state."""
    state: State = {}
    for event in events:
        kind = event["operationType"]
        if kind not in CRUD:
            continue
        docs = state.setdefault((event["ns"]["db"], event["ns"]["coll"]), {})
        key = id_key(event["documentKey"]["_id"])
        if kind in ("insert", "replace"):
            docs[key] = event["fullDocument"]
        elif kind == "update":
            docs[key] = apply_update(docs[key], event["rawUpdateDescription"])
        else:
            del docs[key]
    return state


def encoded(state: Mapping[tuple[str, str], Mapping[bytes, Any]]) -> dict[Any, dict[bytes, bytes]]:
    """The state with documents as BSON bytes (field order counts); empty collections dropped."""
    return {
        ns: {key: bson.encode(document) for key, document in docs.items()}
        for ns, docs in state.items()
        if docs
    }


def position(result: SimulationResult, ns: str, key: Mapping[str, Any]) -> Any:
    """Where a document key falls in its collection's chunk ranges."""
    coll = ns.partition(".")[2]
    spec = next(spec for spec in result.config.collections if spec.name == coll)
    value = key[spec.shard_key[0]]
    return hash_position(value) if spec.hashed else value


def in_range(value: Any, lower: Any, upper: Any) -> bool:
    """Whether ``value`` is in ``[lower, upper)`` (None bounds are open)."""
    return (lower is None or value >= lower) and (upper is None or value < upper)
