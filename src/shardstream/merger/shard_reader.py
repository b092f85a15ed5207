"""One shard's half of a sharded change stream.

Reads batches from the shard's :class:`OplogSource`, runs them through the shard
pipeline, and reports what a shard cursor reports to mongos: the events plus a
postBatchResumeToken, which becomes the shard's promise in the merge
(:class:`~shardstream.merger.shard_promise.ShardPromise`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from bson.timestamp import Timestamp

from shardstream.errors import MergeError
from shardstream.merger.shard_promise import PromisingReader, ShardPromise
from shardstream.oplog.source import OplogSource
from shardstream.resume_token import ResumeToken
from shardstream.transform import ChangeEvent, ChangeStreamOptions, DocumentLookup, ShardPipeline
from shardstream.transform import fields as f


@dataclasses.dataclass(frozen=True, slots=True)
class ShardBatch:
    """What one read of a shard yields for the merge."""

    events: list[ChangeEvent]
    promise: ResumeToken | None
    exhausted: bool


class ShardReader(PromisingReader):
    """Pulls one shard's oplog through its pipeline.

    Args:
        source: the shard's oplog.
        options: the stream's options (the same start point on every shard).
        lookup: for image options.
        start: the stream's start time; the shard's oplog must reach back to it.
    """

    def __init__(
        self,
        source: OplogSource,
        options: ChangeStreamOptions,
        *,
        lookup: DocumentLookup | None = None,
        start: Timestamp | None = None,
    ) -> None:
        super().__init__(source)
        self._pipeline = ShardPipeline(options, history=source, lookup=lookup, single_shard=False)
        self._promise = ShardPromise.for_source(source, options, start)

    def read(self, max_entries: int) -> ShardBatch | None:
        """Read and transform one batch; None when the source has nothing ready.

        Raises:
            ChangeStreamHistoryLost: the shard's oplog starts after the stream's start.
            TransformError: an entry the server would fail on.
        """
        batch = self.source.next_batch(max_entries)
        if batch is None:
            return None
        self._check_entries(batch.entries)
        self._promise.check_source_promise(batch.promise)
        if batch.entries:
            self._promise.check_first_entry(batch.entries[0].get("ts"))
        events: list[ChangeEvent] = []
        for entry in batch.entries:
            for event in self._pipeline.process(entry):
                # The legacy new-shard signal: mongos swallows it, and learns of new shards
                # from config.shards instead; dropping it here keeps its token out of the
                # shard's promise (internal tokens are never exposed).
                if event.operation_type not in f.NEW_SHARD_EVENTS:
                    event.shard = self.source.name
                    events.append(event)
            if self._pipeline.closed:
                break
        closed = self._pipeline.closed
        promise = self._promise.advance(events[-1].token if events else None, batch.promise, closed)
        return ShardBatch(events, promise, batch.exhausted or closed)

    def _check_entries(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """A source's entries come after its last promise, in increasing ts order."""
        floor = self._promise.source_promise
        for entry in entries:
            ts = entry.get("ts")
            if not isinstance(ts, Timestamp) or (floor is not None and ts <= floor):
                raise MergeError(
                    f"shard {self.name!r}: expected entries with ts above {floor!r} in "
                    f"increasing order, got ts {ts!r:.60}"
                )
            floor = ts
