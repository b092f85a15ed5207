"""Layer 3: one shard's half of a sharded change stream.

Reads batches from the shard's :class:`OplogSource`, runs them through the shard
pipeline, and reports what a shard cursor reports to mongos: the events plus a
postBatchResumeToken, which becomes the shard's promise in the merge.  As on the
server (``_performChangeStreamsAccounting``), the PBRT is the last event's token,
or a high-water-mark token at the last examined oplog timestamp when the scan has
moved past that event; filtered entries (noops, other collections) move it too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from bson.timestamp import Timestamp

from shardstream.errors import ChangeStreamHistoryLost, MergeError
from shardstream.oplog.source import OplogSource
from shardstream.resume_token import ResumeToken, decode_token, encode_token, high_water_mark
from shardstream.transform import ChangeEvent, ChangeStreamOptions, DocumentLookup, ShardPipeline
from shardstream.transform import fields as f

_NEW_SHARD_EVENTS = frozenset({f.NEW_SHARD_DETECTED, f.NEW_SHARD_DETECTED_LEGACY})


@dataclasses.dataclass(frozen=True, slots=True)
class ShardBatch:
    """What one read of a shard yields for the merge."""

    events: list[ChangeEvent]
    promise: ResumeToken | None
    exhausted: bool


class ShardReader:
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
        self.source = source
        self._pipeline = ShardPipeline(options, history=source, lookup=lookup, single_shard=False)
        self._version = options.default_token_version
        self._start = start
        # A source that reads from a start point itself (a live tailer) checks its oplog's
        # oldest entry on every open; a file source hands out its whole file, so its first
        # entry is the oldest and the check is made here.
        self._checked_history = start is None or getattr(source, "verifies_history", False)
        self._last_event: ResumeToken | None = None
        self._promise: ResumeToken | None = initial_promise(options)
        self._source_promise: Timestamp | None = None

    @property
    def name(self) -> str:
        """The shard's name."""
        return self.source.name

    @property
    def position(self) -> Timestamp | None:
        """The cluster time of the shard's promise (None before its first batch)."""
        return None if self._promise is None else decode_token(self._promise).cluster_time

    def read(self, max_entries: int) -> ShardBatch | None:
        """Read and transform one batch; None when the source has nothing ready.

        Raises:
            ChangeStreamHistoryLost: the shard's oplog starts after the stream's start.
            TransformError: an entry the server would fail on.
        """
        batch = self.source.next_batch(max_entries)
        if batch is None:
            return None
        self._check_contract(batch.entries, batch.promise)
        if not self._checked_history and batch.entries:
            self._check_history(batch.entries[0].get("ts"))
        events: list[ChangeEvent] = []
        for entry in batch.entries:
            for event in self._pipeline.process(entry):
                # The legacy new-shard signal: mongos swallows it, and learns of new shards
                # from config.shards instead; dropping it here keeps its token out of the
                # shard's promise (internal tokens are never exposed).
                if event.operation_type not in _NEW_SHARD_EVENTS:
                    event.shard = self.source.name
                    events.append(event)
            if self._pipeline.closed:
                break
        if events:
            self._last_event = events[-1].token
        candidates = [token for token in (self._last_event, self._promise) if token is not None]
        if batch.promise is not None and not self._pipeline.closed:
            candidates.append(encode_token(high_water_mark(batch.promise, self._version)))
        if candidates:
            self._promise = max(candidates, key=lambda token: token.data)
        exhausted = batch.exhausted or self._pipeline.closed
        return ShardBatch(events, self._promise, exhausted)

    def _check_contract(
        self, entries: Sequence[Mapping[str, Any]], promise: Timestamp | None
    ) -> None:
        """A source's promise never goes back, and its entries come after it."""
        floor = self._source_promise
        for entry in entries:
            ts = entry.get("ts")
            if not isinstance(ts, Timestamp) or (floor is not None and ts <= floor):
                raise MergeError(
                    f"shard {self.name!r}: expected entries with ts above {floor!r} in "
                    f"increasing order, got ts {ts!r:.60}"
                )
            floor = ts
        if promise is not None:
            if self._source_promise is not None and promise < self._source_promise:
                raise MergeError(
                    f"shard {self.name!r}: its promise went backwards, from "
                    f"{self._source_promise!r} to {promise!r}"
                )
            self._source_promise = promise

    def _check_history(self, first_ts: object) -> None:
        self._checked_history = True
        check_history(self.name, first_ts, self._start)


def check_history(name: str, first_ts: object, start: Timestamp | None) -> None:
    """A shard's oplog (first entry at ``first_ts``) must reach back to the stream's start.

    Raises:
        ChangeStreamHistoryLost: it starts after ``start``.
    """
    if isinstance(first_ts, Timestamp) and start is not None and first_ts > start:
        raise ChangeStreamHistoryLost(
            f"Resume of change stream was not possible, as the resume point may no longer be "
            f"in the oplog: shard {name!r} starts at {first_ts!r}, after the stream's "
            f"start {start!r} (server error 286)"
        )


def initial_promise(options: ChangeStreamOptions) -> ResumeToken | None:
    """The promise before any entry is read: the stream's start point, as on a shard.

    The server seeds a shard cursor's postBatchResumeToken with the start token.  An
    event token's own event comes back up once more (EnsureResumeTokenPresent swallows
    it), so for one the promise is the high-water mark at its time, which sorts below it.
    """
    token = options.resume_token
    if token is not None:
        if token.is_high_water_mark:
            return encode_token(token)
        return encode_token(high_water_mark(token.cluster_time, options.default_token_version))
    if options.start_at_operation_time is not None:
        return encode_token(
            high_water_mark(options.start_at_operation_time, options.default_token_version)
        )
    return None
