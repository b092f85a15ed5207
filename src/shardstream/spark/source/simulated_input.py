"""A simulated cluster's shard oplogs as sources a task can position in O(log n).

The simulator runs once per Python process (cached: workers are reused for many tasks).
Each task then reads a shard from the stream's start, found by bisection over the
oplog's timestamps, as a tailer's cursor starts at it; earlier entries stay reachable
through ``fetch_entry`` for transactions that began before the start.  (The simulator's
own live-feeding source builds a timestamp index per source and adds random delays,
which only cost time here: the whole run is there at once, like a file.)
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Mapping, Sequence
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.errors import ChangeStreamHistoryLost
from shardstream.oplog.source import OplogBatch
from shardstream.sim import SimulatedCluster, SimulationConfig, SimulationResult

_MAX_BATCH: Final = 1000


@functools.lru_cache(maxsize=4)
def simulated_run(config: SimulationConfig) -> SimulationResult:
    """Run (once per process) the simulated cluster ``config`` describes."""
    return SimulatedCluster(config).run()


@functools.lru_cache(maxsize=4)
def _timestamps(config: SimulationConfig) -> dict[str, list[Timestamp]]:
    return {
        shard: [entry["ts"] for entry in oplog]
        for shard, oplog in simulated_run(config).oplogs.items()
    }


def simulated_shard_names(config: SimulationConfig) -> list[str]:
    """The shards of the run, in its order."""
    return list(simulated_run(config).oplogs)


class SimulatedShardOplog:
    """One shard of a simulated run, read from ``start`` on (an :class:`OplogSource`).

    Args:
        config: the run.
        shard: the shard's name.
        start: the stream's start time (None: from the first entry).

    Complexity: O(log n) to position, O(1) per entry read, O(log n) per ``fetch_entry``.
    """

    verifies_history = True

    def __init__(self, config: SimulationConfig, shard: str, start: Timestamp | None) -> None:
        self._name = shard
        self._entries: Sequence[Mapping[str, Any]] = simulated_run(config).oplogs[shard]
        self._times = _timestamps(config)[shard]
        self._start = start
        self._position = 0 if start is None else bisect.bisect_left(self._times, start)
        self._checked = start is None

    @property
    def name(self) -> str:
        """The shard's name."""
        return self._name

    def next_batch(self, max_entries: int) -> OplogBatch:
        """The next entries from the position on; exhausted at the end of the run.

        Raises:
            ChangeStreamHistoryLost: the shard's oplog starts after the stream's start.
        """
        if not self._checked:
            self._checked = True
            first = self._times[0] if self._times else None
            if first is not None and self._start is not None and first > self._start:
                raise ChangeStreamHistoryLost(
                    f"Resume of change stream was not possible, as the resume point may no "
                    f"longer be in the oplog: shard {self._name!r} starts at {first!r}, after "
                    f"the stream's start {self._start!r} (server error 286)"
                )
        end = min(self._position + min(max_entries, _MAX_BATCH), len(self._entries))
        batch = self._entries[self._position : end]
        self._position = end
        promise = self._times[end - 1] if end else None
        return OplogBatch(batch, promise, exhausted=end >= len(self._entries))

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        """The entry at ``ts`` (before the start too), or None."""
        index = bisect.bisect_left(self._times, ts)
        if index < len(self._times) and self._times[index] == ts:
            return self._entries[index]
        return None

    def close(self) -> None:
        """Nothing to release: the run stays cached for the next task."""
