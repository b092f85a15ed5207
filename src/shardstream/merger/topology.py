"""Input: shards joining and leaving the cluster (the ``config.shards`` monitor).

mongos opens a change stream on ``config.shards`` beside the data shards; it is a
remote of the merge like any shard (its promise gates the merge) and its events
open or retire shard cursors.  Here that remote reads a :class:`TopologySource`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Protocol

from bson.timestamp import Timestamp

from shardstream.oplog.source import OplogSource


class ShardChangeKind(Enum):
    """What happened to a shard."""

    ADDED = "added"
    REMOVED = "removed"


@dataclasses.dataclass(frozen=True, slots=True)
class ShardChange:
    """A shard added to or removed from ``config.shards`` at ``ts``."""

    ts: Timestamp
    kind: ShardChangeKind
    shard: str
    # How to open the new shard's oplog (added shards only).
    open_source: Callable[[], OplogSource] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class TopologyBatch:
    """Changes (in ``ts`` order) and the monitor's promise, as an oplog batch has."""

    changes: Sequence[ShardChange]
    promise: Timestamp | None
    exhausted: bool = False


class TopologySource(Protocol):
    """Reads shard additions and removals (a live ``config.shards`` stream, or a fixed list)."""

    def next_batch(self) -> TopologyBatch | None:
        """Return the next changes, or None when nothing is known yet."""


class StaticTopology:
    """A topology known in advance (a replay, the simulator): all changes at once.

    Its promise is the last change's time, then it is exhausted, so it never holds
    the merge back once read.
    """

    def __init__(self, changes: Sequence[ShardChange]) -> None:
        self._changes = sorted(changes, key=lambda change: change.ts)
        self._read = False

    def next_batch(self) -> TopologyBatch:
        """Return every change, once."""
        if self._read:
            return TopologyBatch((), None, exhausted=True)
        self._read = True
        promise = self._changes[-1].ts if self._changes else None
        return TopologyBatch(self._changes, promise, exhausted=True)
