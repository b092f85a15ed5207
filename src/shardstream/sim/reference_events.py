"""Simulator check: a run's change events in the merged order, found by a plain sort.

The reference the merger and the sync are checked against, and how
:mod:`shardstream.sim.emulated_source` rebuilds the data at a cut: each shard's oplog goes
through the transform on its own, then all events are sorted by ``clusterTime`` and the
token's ``_data``, the order mongos's merge promises.  It holds a whole run in memory,
which is fine for a simulated one; no merger code runs here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from shardstream.sim.result import SimulationResult
from shardstream.transform import ChangeStreamOptions, transform_oplog

# The oplog's own diffs, which apply_events applies.
RAW: Final = ChangeStreamOptions(show_raw_update_description=True)


def shard_events(
    oplog: Sequence[Mapping[str, Any]], options: ChangeStreamOptions = RAW
) -> list[dict[str, Any]]:
    """The event documents one shard's oplog yields, in that shard's order."""
    return [event.document for event in transform_oplog(oplog, options)]


def merged_events(
    result: SimulationResult, options: ChangeStreamOptions = RAW
) -> list[dict[str, Any]]:
    """Every shard's events of a simulated run in the merged order (:func:`merged_oplog_events`)."""
    return merged_oplog_events(result.oplogs, options)


def merged_oplog_events(
    oplogs: Mapping[str, Sequence[Mapping[str, Any]]], options: ChangeStreamOptions = RAW
) -> list[dict[str, Any]]:
    """Every shard's events in the merged order: clusterTime, then the token's ``_data``.

    Complexity: O(n log n) in the events.
    """
    events = [event for oplog in oplogs.values() for event in shard_events(oplog, options)]
    events.sort(key=lambda event: (event["clusterTime"], event["_id"]["_data"]))
    return events
