"""Contract: what the merger needs from one shard's oplog.

A source hands out batches of entries in ``ts`` order, each with the shard's
*promise*: a timestamp such that no entry at or below it will ever arrive.  A
batch may be empty and still advance the promise (an idle shard's periodic noop,
or a tailer that knows the shard's majority point).  A source that ends is
exhausted, like a cursor with id 0: it leaves the merge gate.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from bson.timestamp import Timestamp

from shardstream.oplog.raw_entries import RawEntries


@dataclasses.dataclass(frozen=True, slots=True)
class OplogBatch:
    """One read from a shard.

    Attributes:
        entries: oplog entries, ``ts`` strictly increasing, all above the previous promise.
        promise: no entry at or below this will ever arrive (None: nothing promised yet).
        exhausted: the source has no more entries, ever.
    """

    entries: Sequence[Mapping[str, Any]]
    promise: Timestamp | None
    exhausted: bool = False


class OplogSource(Protocol):
    """One shard's oplog, read in batches (files, a live tailer, the simulator)."""

    @property
    def name(self) -> str:
        """The shard's name (its ``config.shards`` ``_id``)."""

    def next_batch(self, max_entries: int) -> OplogBatch | None:
        """Return the next batch (at most ``max_entries``), or None if nothing is ready yet.

        None means "ask again later" (a live source with no news); a source that will
        never produce more returns a batch with ``exhausted`` set.
        """

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        """Read back an older entry by its ``ts`` (a transaction's earlier entries)."""

    def close(self) -> None:
        """Release files, cursors and threads."""


@dataclasses.dataclass(slots=True)
class Handout:
    """A tailer's consumer side: entries read ahead, the promise so far, a reader's failure.

    The thread and the process tailers fill it in their own way and hand batches out
    through :meth:`take`, so both answer ``next_batch`` by the same rules.
    """

    entries: deque[Mapping[str, Any]] = dataclasses.field(default_factory=deque)
    # A raw process tailer's entries, as their bytes (handed out as RawEntries).
    raws: deque[bytes] = dataclasses.field(default_factory=deque)
    promise: Timestamp | None = None
    failure: BaseException | None = None

    @property
    def pending(self) -> bool:
        """Whether entries wait to be taken."""
        return bool(self.entries or self.raws)

    def take(self, max_entries: int, *, ended: bool) -> OplogBatch | None:
        """Pending entries first, then the failure, then (if ``ended``) the end; else None.

        A batch promises its last entry's ``ts``: a tailer's entries come in ``ts`` order.
        """
        if self.raws:
            count = min(max_entries, len(self.raws))
            raws = RawEntries([self.raws.popleft() for _ in range(count)])
            self.promise = raws[-1]["ts"]  # one entry read per batch, as a document
            return OplogBatch(raws, self.promise)
        if self.entries:
            count = min(max_entries, len(self.entries))
            batch = [self.entries.popleft() for _ in range(count)]
            self.promise = batch[-1]["ts"]
            return OplogBatch(batch, self.promise)
        if self.failure is not None:
            raise self.failure
        if ended:
            return OplogBatch((), self.promise, exhausted=True)
        return None
