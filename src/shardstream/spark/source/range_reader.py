"""Task side: re-read exactly the events of a planned batch, merged or per shard.

A task gets ``(start, end]`` as offsets and reads it afresh, so a batch Spark replays after
a crash yields the same events.  Both readers stop on each shard's last event of the
batch (the end offset's shard token), never on a time: nothing past it is read, and a
range that cannot be reproduced (the oplog rolled over, the input changed) fails loudly.

* :func:`read_merged_range` runs the real merged stream from the start watermark: the
  reference, mongos's order.
* :func:`read_shard_range` runs one shard's pipeline only, over a slice of the shard's
  events, and applies the router's per-event stages (the classic-event filter and the
  user's ``$match``) as mongos does after the merge.  The events are the merged stream's,
  full tokens included; only their interleaving across shards is left to the reader.

Both read BSON oplog files on the fast path where ``fast_start`` allows (raw entries,
events kept as bytes until their rows are written), the reference path otherwise.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterator
from typing import Final

from shardstream.errors import MergeError, OplogError
from shardstream.match.evaluator import Predicate, compile_pipeline
from shardstream.merger.handle_topology_change import is_internal
from shardstream.merger.raw.encoded_event import EncodedEvent
from shardstream.merger.raw.shard_reader import EncodedRun, FastShardReader
from shardstream.merger.shard_reader import ShardReader
from shardstream.resume_token import decode_token, encode_token
from shardstream.spark.source.fast_start import (
    FastStart,
    fast_start,
    open_planning_stream,
    window_start,
)
from shardstream.spark.source.offsets import StreamOffset, data_of
from shardstream.spark.source.options import SourceKind, SourceSpec
from shardstream.spark.source.shard_inputs import (
    open_shard_source,
    start_time,
    stream_options,
)
from shardstream.transform import ChangeEvent, ChangeStreamOptions
from shardstream.transform import fields as f
from shardstream.transform.raw.pipeline import ts_key

READ_CHUNK: Final = 1000
_LIVE_WAIT_S: Final = 60.0
_LIVE_POLL_S: Final = 0.05


def read_merged_range(
    spec: SourceSpec, start: StreamOffset, end: StreamOffset
) -> Iterator[ChangeEvent]:
    """Yield the merged stream's events in ``(start, end]``, in stream order.

    Raises:
        OplogError: the range is no longer what it was when planned (or rolled off:
            ChangeStreamHistoryLost from the shard readers).
    """
    pending = {shard: data_of(last) for shard, last in end.shards_advanced_from(start).items()}
    watermark = data_of(end.watermark)
    if not pending:
        return
    stream = open_planning_stream(spec, start.watermark)  # on the fast path where it applies
    deadline = time.monotonic() + _LIVE_WAIT_S
    try:
        while pending:
            events, _ = stream.next_batch(READ_CHUNK)
            if events:
                deadline = time.monotonic() + _LIVE_WAIT_S  # a wait counts from the last news
            else:
                if stream.exhausted:
                    raise _not_reproducible(spec, end, pending, "the stream ended before it")
                if time.monotonic() >= deadline:
                    raise _not_reproducible(spec, end, pending, "they did not arrive in time")
                if not spec.bounded:
                    time.sleep(_LIVE_POLL_S)
                continue
            for event in events:
                shard, token = event.shard or "", event.token.data
                last = pending.get(shard)
                if last is None:
                    if token <= watermark:
                        raise _not_reproducible(spec, end, pending, f"unplanned event {token}")
                    continue  # a shard already done: its next events belong to a later batch
                if token > last:
                    raise _not_reproducible(spec, end, pending, f"shard {shard!r} passed it")
                yield event
                if token == last:
                    del pending[shard]
                    if not pending:
                        break
    finally:
        stream.close()


def read_shard_range(spec: SourceSpec, shard: str, after: str, last: str) -> Iterator[ChangeEvent]:
    """Yield ``shard``'s events of the merged stream in ``(after, last]``, in its order.

    Args:
        spec: the source.
        shard: the shard to read.
        after: the token to start after ("" = the configured start).
        last: the shard's last event of the range (its token, inclusive).

    Raises:
        OplogError: the range is no longer what it was when planned.
    """
    fast = fast_start(spec, after)
    reader: ShardReader | FastShardReader
    if fast is not None:
        reader, options = _fast_reader(spec, shard, fast)
        source = reader.source
        floor = fast.floor
    else:
        options = stream_options(spec, after).with_options(merged_by_router=True)
        start = start_time(options)
        source = open_shard_source(spec, shard, start)
        reader = ShardReader(source, options, start=start)
        resumed = options.resume_token
        # A shard hands mongos the resume token's own event once more (for the router's
        # EnsureResumeTokenPresent check); the merged stream drops it, and so must this.
        floor = data_of(after) or (encode_token(resumed).data if resumed is not None else "")
    keep = router_filter(compile_pipeline(list(spec.pipeline)), options)
    last = data_of(last)
    deadline = time.monotonic() + _LIVE_WAIT_S
    try:
        while True:
            batch = reader.read(READ_CHUNK)
            if batch is not None and batch.events:
                deadline = time.monotonic() + _LIVE_WAIT_S
            if batch is None:
                if time.monotonic() >= deadline:
                    raise _shard_not_reproducible(spec, shard, last, "it did not arrive in time")
                time.sleep(_LIVE_POLL_S)
                continue
            for event in batch.events:
                token = event.token.data
                if token <= floor:
                    continue
                if token > last:
                    raise _shard_not_reproducible(
                        spec, shard, last, f"the shard passed it: {token}"
                    )
                if keep(event):
                    yield event
                if token == last:
                    return
            if batch.exhausted:
                raise _shard_not_reproducible(spec, shard, last, "the shard's oplog ended first")
    finally:
        source.close()


def read_shard_window(
    spec: SourceSpec, shard: str, after: str, end: str
) -> Iterator[ChangeEvent | EncodedRun]:
    """Yield ``shard``'s events of the merged stream above ``after`` and below ``end``, the
    fast path's as runs where the router keeps them as they are.

    A window's share of one shard (:mod:`shardstream.spark.source.window_planner`,
    :mod:`~shardstream.spark.source.live_window_planner`): ``end`` is the high-water-mark
    token of the window's end time.  The shard's entries are read raw from ``after``'s
    time (a file's ``ts`` index seeks there; a live shard's tailer starts there) until the
    first one at or past the end, or until the shard promises nothing more below it (a
    live shard's majority point: the planner picked an end every shard had reached).

    Raises:
        MergeError: ``spec`` does not take the fast path (no window is planned for it).
        OplogError: a live shard did not reach the end within a minute of its last news.
    """
    fast = window_start(spec, after)
    if fast is None:
        raise MergeError(
            f"{spec.display}: a cluster-time window is read on the fast path, which this "
            "source does not take (BSON oplog files or a live cluster, default stream "
            "options only)"
        )
    reader, options = _fast_reader(spec, shard, fast)
    predicate = compile_pipeline(list(spec.pipeline))
    keep = router_filter(predicate, options)
    # Without a $match the router keeps every fast-path event as it is (router_filter):
    # a run is cut to the window by its keys alone, no object per event.
    runs = predicate is None
    floor, end = fast.floor, data_of(end)
    floor_key, end_key = floor.encode(), end.encode()
    # Everything below the end is read once the shard's promise reaches the last time
    # before it: a source promises no entry at or below its promise is still to come, and
    # an event's token promises its whole entry was read.
    last_time = ts_key(decode_token(end).cluster_time) - 1
    live = spec.kind is SourceKind.LIVE
    deadline = time.monotonic() + _LIVE_WAIT_S
    try:
        while True:
            batch = reader.read_run(READ_CHUNK)
            if batch is None:  # a file always answers; a live tailer may have nothing yet
                if not live:
                    raise MergeError(f"{spec.display}: shard {shard!r} returned no batch")
                if time.monotonic() >= deadline:
                    raise _shard_not_reproducible(
                        spec, shard, end, "it did not reach the window's end in time"
                    )
                time.sleep(_LIVE_POLL_S)
                continue
            deadline = time.monotonic() + _LIVE_WAIT_S  # a wait counts from the last news
            events = batch.events
            if isinstance(events, EncodedRun) and runs:
                # The shard's events come in token order: the window is one slice of it.
                keys = events.keys
                first = bisect.bisect_right(keys, floor_key)
                stop = bisect.bisect_left(keys, end_key)
                if first < stop:
                    yield events.slice(first, stop)
                if stop < len(keys):
                    return  # the rest is at or past the end
                events = []
            elif isinstance(events, EncodedRun):
                events = events.events()
            for event in events:
                token = event.token.data
                if token >= end:
                    return  # the shard's events come in token order: the rest is later
                if token > floor and keep(event):
                    yield event
            promise = batch.promise
            if batch.exhausted or (
                promise is not None and ts_key(decode_token(promise).cluster_time) >= last_time
            ):
                return
    finally:
        reader.source.close()


def _fast_reader(
    spec: SourceSpec, shard: str, fast: FastStart
) -> tuple[FastShardReader, ChangeStreamOptions]:
    """The shard's raw entries from the fast start's time, through the fast pipeline; the
    events at or below its floor are the caller's to drop."""
    options = fast.options.with_options(merged_by_router=True)
    start = start_time(options)
    source = open_shard_source(spec, shard, start, raw=True)
    return FastShardReader(source, options, start=start), options


def router_filter(
    predicate: Predicate | None, options: ChangeStreamOptions
) -> Callable[[ChangeEvent], bool]:
    """The per-event stages mongos applies after the merge, as one predicate; ``predicate``
    is the source's pipeline compiled (``compile_pipeline``; None: no $match)."""
    classic_only = not options.show_expanded_events

    def keep(event: ChangeEvent) -> bool:
        if predicate is None and type(event) is EncodedEvent:
            # The fast path writes CRUD events only: classic, never internal (and reading
            # each one's operationType back out of its bytes costs a task ~1 us per event).
            return True
        if is_internal(event):  # only a config.shards monitor makes these; no shard does
            raise MergeError(f"unexpected internal event in a shard's stream: {event.document!r}")
        if classic_only and event.operation_type not in f.CLASSIC_OPERATION_TYPES:
            return False
        return predicate is None or predicate(event.document)

    return keep


def _not_reproducible(
    spec: SourceSpec, end: StreamOffset, pending: dict[str, str], why: str
) -> OplogError:
    return OplogError(
        f"{spec.display}: cannot re-read the batch ending at {end.watermark}: expected the "
        f"last events {pending} of the shards, but {why}"
    )


def _shard_not_reproducible(spec: SourceSpec, shard: str, last: str, why: str) -> OplogError:
    return OplogError(
        f"{spec.display}: cannot re-read shard {shard!r} up to its event {last}: {why}"
    )
