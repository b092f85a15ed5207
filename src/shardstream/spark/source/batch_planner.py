"""Driver side: where the next micro-batch ends, found by running the real merge.

Only the merged stream knows the global order, so the driver runs it from the start
offset's watermark and counts up to the read limit (events, and bytes of the events' BSON
when ``maxBytesPerTrigger`` caps them too; the first event is always taken); the batch ends
at the last event taken.  Tasks then re-read exactly that slice (see
:mod:`shardstream.spark.source.range_reader`).

The planner keeps its stream open between calls: when the next batch starts where the
last one ended (the usual case), it goes on from there instead of re-reading the oplogs.
Anything else (a restart, a replayed batch) reopens the stream after the start watermark.

Two rules keep every batch re-readable:

* a batch never ends between events whose tokens are byte-identical (a DDL event seen
  on several shards): a restart after that token would skip the rest of the group, so
  the batch takes the whole group, even past ``maxEventsPerTrigger``;
* a batch ends at an invalidate: the stream opened before it cannot go past it, the next
  batch opens a new one after it (``startAfter``).

A live stream that has had no event for a while (a quiet collection) would keep its
watermark on its last event, and a restart would then re-scan, or no longer find, days of
oplog.  So when nothing is ready and the merge's postBatchResumeToken is
``advance_idle_after`` seconds past the watermark, the planner returns an eventless batch
that moves the watermark up to it (a high-water-mark token), as a driver moves its resume
token to the postBatchResumeToken of an empty batch.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Mapping
from typing import Final

from bson.timestamp import Timestamp

from shardstream.errors import MergeError, OplogError
from shardstream.merger import MergedStream
from shardstream.merger.floored_stream import FlooredStream
from shardstream.merger.raw.encoded_event import EncodedEvent
from shardstream.resume_token import ResumeToken, decode_token
from shardstream.spark.source.fast_start import open_planning_stream
from shardstream.spark.source.offsets import StreamOffset, data_of, token_of_text, token_text
from shardstream.spark.source.options import SourceSpec
from shardstream.spark.source.shard_inputs import ReadBound, start_time
from shardstream.transform import ChangeEvent
from shardstream.transform import fields as f
from shardstream.transform.raw.event_writer import encode_event_document

PLAN_CHUNK: Final = 1000
# A bounded source (files, a simulated run) always has news until it is exhausted; a run
# of empty batches this long means the merge is stuck, not that data is on its way.
_MAX_EMPTY_ROUNDS: Final = 10_000
_LIVE_WAIT_S: Final = 60.0
_LIVE_PLAN_BUDGET_S: Final = 10.0
_LIVE_POLL_S: Final = 0.05


@dataclasses.dataclass(frozen=True, slots=True)
class PlannedBatch:
    """Where a batch ends.

    Attributes:
        end: the end offset (equal to the start when there is nothing new).
        events: how many events the batch holds.
        splits: per shard, tokens of its events after which a per-shard task range
            ends and the next begins (every ``split_every``-th event of the shard).
    """

    end: StreamOffset
    events: int
    splits: Mapping[str, tuple[str, ...]]


class BatchPlanner:
    """Plans batches over one spec's merged stream (lives in the driver's source runner).

    Args:
        spec: the source.
        split_every: per-shard mode: split a shard's range every this many events.
    """

    def __init__(self, spec: SourceSpec, *, split_every: int) -> None:
        self._spec = spec
        self._split_every = split_every
        self._stream: MergedStream | FlooredStream | None = None
        self._position: str | None = None  # the watermark the open stream has reached
        self._lookahead: deque[ChangeEvent] = deque()
        self._resume_token: ResumeToken | None = None  # the merge's last postBatchResumeToken

    def plan(
        self,
        start: StreamOffset,
        *,
        max_events: int | None,
        max_bytes: int | None = None,
        bound: ReadBound | None = None,
        until: str | None = None,
        wait_for_bound: bool = False,
        advance_idle_after: int | None = None,
    ) -> PlannedBatch:
        """Find the end of the batch that starts at ``start``.

        Args:
            start: where the batch starts.
            max_events: the read limit (None: everything available).
            max_bytes: the events' BSON bytes at most, beyond the first event (None: no cap).
            bound: where the read ends (a pinned ``availableNow`` target or
                ``endAtOperationTime``).
            until: take exactly the events up to this token (re-planning a known batch).
            wait_for_bound: a live stream is read until it has passed ``bound`` (or a
                minute goes by), not only while events are ready.
            advance_idle_after: a live stream with nothing ready moves its watermark to the
                postBatchResumeToken once that is this many seconds ahead (None: never).

        Complexity: O(n log s) for n events over s shards, plus re-reading the oplogs
        from the watermark when the stream has to be reopened.
        """
        self._seek(start.watermark)
        try:
            planned = self._plan(
                start, max_events, max_bytes, bound, until, wait_for_bound=wait_for_bound
            )
            if planned.events or advance_idle_after is None:
                return planned
            return self._advance_idle(start, advance_idle_after, bound)
        except BaseException:
            self.close()  # the stream's position is unknown now: the next plan reopens it
            raise

    def _plan(
        self,
        start: StreamOffset,
        max_events: int | None,
        max_bytes: int | None,
        bound: ReadBound | None,
        until: str | None,
        *,
        wait_for_bound: bool,
    ) -> PlannedBatch:
        per_shard: dict[str, int] = {}
        last_by_shard: dict[str, str] = {}
        splits: dict[str, list[str]] = {}
        taken = size = 0
        last = ""
        until_data = data_of(until) if until is not None else None
        stop_before = bound.stop_before if bound is not None else None
        waiting_until = bound.complete_at if bound is not None and wait_for_bound else None
        # A busy live cluster may always have an event ready: cap the time spent planning.
        budget_end = time.monotonic() + _LIVE_PLAN_BUDGET_S
        while max_events is None or taken < max_events:
            if not self._spec.bounded and time.monotonic() >= budget_end:
                break
            event = self._next_event(waiting_until)
            if event is None:
                break
            token = event.token.data
            if (stop_before is not None and token >= stop_before) or (
                until_data is not None and token > until_data
            ):
                self._lookahead.appendleft(event)
                break
            if max_bytes is not None:
                size += event_size(event)
                if taken and size > max_bytes:
                    self._lookahead.appendleft(event)
                    break
            last = self._take(event, per_shard, last_by_shard, splits)
            taken += 1
            if event.operation_type == f.INVALIDATE:
                break
        # Never end inside a group of byte-identical tokens (see the module docstring).
        while taken and (event := self._next_event(None)) is not None:
            if event.token.data != data_of(last):
                self._lookahead.appendleft(event)
                break
            self._take(event, per_shard, last_by_shard, splits)
            taken += 1
        if not taken:
            return PlannedBatch(start, 0, {})
        self._position = last
        end = start.advanced(last, last_by_shard)
        kept = {
            shard: tuple(token for token in tokens if token != last_by_shard[shard])
            for shard, tokens in splits.items()
        }
        return PlannedBatch(end, taken, {shard: tokens for shard, tokens in kept.items() if tokens})

    def _advance_idle(
        self, start: StreamOffset, after_s: int, bound: ReadBound | None
    ) -> PlannedBatch:
        mark = self._resume_token
        unchanged = PlannedBatch(start, 0, {})
        if self._spec.bounded or self._lookahead or mark is None:
            return unchanged
        if mark.data <= data_of(start.watermark) or (
            bound is not None and mark.data >= bound.stop_before
        ):
            return unchanged
        since: Timestamp | None
        if start.watermark:
            since = decode_token(token_of_text(start.watermark)).cluster_time
        else:
            since = start_time(self._spec.stream)
        if since is None or decode_token(mark).cluster_time.time - since.time < after_s:
            return unchanged
        self._position = token_text(mark)
        return PlannedBatch(StreamOffset(self._position, start.shards), 0, {})

    def _take(
        self,
        event: ChangeEvent,
        per_shard: dict[str, int],
        last_by_shard: dict[str, str],
        splits: dict[str, list[str]],
    ) -> str:
        token = token_text(event.token)
        shard = event.shard or ""
        count = per_shard.get(shard, 0) + 1
        per_shard[shard] = count
        last_by_shard[shard] = token
        if count % self._split_every == 0:
            splits.setdefault(shard, []).append(token)
        return token

    def _seek(self, watermark: str) -> None:
        """Make the open stream stand just after ``watermark``, reopening it if needed."""
        stream = self._stream
        current = (
            stream is not None
            and self._position == watermark
            and (self._lookahead or not stream.invalidated)
        )
        if current:
            return
        self.close()
        self._stream = open_planning_stream(self._spec, watermark)
        self._position = watermark

    def _next_event(self, wait_until: str | None) -> ChangeEvent | None:
        if self._lookahead:
            return self._lookahead.popleft()
        stream = self._stream
        assert stream is not None  # _seek opened it
        deadline = time.monotonic() + _LIVE_WAIT_S
        empty_rounds = 0
        while not stream.exhausted:
            events, resume_token = stream.next_batch(PLAN_CHUNK)
            self._resume_token = resume_token
            if events:
                self._lookahead.extend(events[1:])
                return events[0]
            if self._spec.bounded:
                empty_rounds += 1
                if empty_rounds > _MAX_EMPTY_ROUNDS:
                    raise MergeError(
                        f"{self._spec.display}: the merge made no progress in "
                        f"{_MAX_EMPTY_ROUNDS} rounds"
                    )
                continue
            if wait_until is None:
                return None  # nothing ready now
            if resume_token is not None and resume_token.data >= wait_until:
                return None  # the merge has passed the pinned target: all of it was read
            if time.monotonic() >= deadline:
                # Returning "nothing" here would end an availableNow run as a success short
                # of its target; a shard that stays behind that long is a failure to report.
                raise OplogError(
                    f"{self._spec.display}: the merge did not reach the pinned target "
                    f"{wait_until} within {_LIVE_WAIT_S:.0f} s (it is at "
                    f"{resume_token.data if resume_token else 'its start'}): a shard is "
                    "lagging or unreachable; see the shards' lag with `shardstream watch --stats`"
                )
            time.sleep(_LIVE_POLL_S)
        return None

    def close(self) -> None:
        """Close the open stream, if any."""
        if self._stream is not None:
            self._stream.close()
        self._stream = None
        self._position = None
        self._lookahead.clear()
        self._resume_token = None


def event_size(event: ChangeEvent) -> int:
    """The event's BSON size: its bytes on the fast path, else its document encoded."""
    if isinstance(event, EncodedEvent):
        return len(event.raw)
    return len(encode_event_document(event.document))
