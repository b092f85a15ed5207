"""Driver side, per-shard mode: a batch is a cluster-time window, planned without a merge.

Every event's token begins with its cluster time, so the events of ``[S, T)`` (cluster
times) sort after every event of the window before it, whatever shard they come from: a
window is a slice of the merged stream, exactly once and replayable by construction.  A
transaction's events share its commit time, so none straddles two windows.  The driver
therefore needs no merge to cut batches: it picks ``T`` from each shard's ``ts`` index
(:mod:`shardstream.oplog.ts_index`, built by framing the files' BSON) so that the shards
hold about ``maxEventsPerTrigger`` entries, or ``maxBytesPerTrigger`` bytes of them, in
``[S, T)``, and each task reads one shard's share of the window on the fast path
(``range_reader.read_shard_window``).  Within a batch
the stream's order is the order of ``_id``, which the sinks sort by.

The end offset's watermark is the high-water-mark token of ``T``: it sorts below every
event at ``T`` and above every event before it, so the next window (or a merged batch,
or a restart) starts there with nothing lost or read twice.

Windows are used where they give the merged stream's events exactly: BSON oplog files on
the fast path (``fast_start``) or a live cluster's shards (planned from the shards'
majority points instead of files), and a whole-cluster stream, which is never invalidated (a
collection or database stream ends at its invalidate, which only the merge finds).
Everything else keeps :class:`~shardstream.spark.source.batch_planner.BatchPlanner`.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator, Sequence
from typing import Final

from bson.timestamp import Timestamp

from shardstream.oplog.ts_index import TsIndex, ts_index
from shardstream.resume_token import decode_token, encode_token, high_water_mark
from shardstream.spark.source.fast_start import window_start
from shardstream.spark.source.offsets import StreamOffset, token_of_text, token_text
from shardstream.spark.source.options import PartitionMode, SourceSpec
from shardstream.spark.source.shard_inputs import ReadBound, start_time
from shardstream.transform.options import StreamScope
from shardstream.transform.raw.pipeline import ts_key

_TICK: Final = 1  # one increment: the smallest step between two cluster times
_NO_END: Final = 1 << 64  # above every cluster time


def windows_apply(spec: SourceSpec) -> bool:
    """Whether ``spec``'s batches are planned as cluster-time windows (files here, a live
    cluster by :mod:`~shardstream.spark.source.live_window_planner`)."""
    return (
        spec.partition_mode is PartitionMode.PER_SHARD
        and spec.stream.scope is StreamScope.CLUSTER
        and window_start(spec, "") is not None
    )


def plan_window(
    spec: SourceSpec,
    start: StreamOffset,
    max_events: int | None,
    bound: ReadBound | None,
    *,
    max_bytes: int | None = None,
) -> StreamOffset:
    """The end of the window that starts at ``start`` (``start`` itself: no more data).

    Args:
        spec: a source :func:`windows_apply` accepts.
        start: where the window starts (its watermark; "" = the configured start).
        max_events: about how many entries the window should hold (None: all of them).
        bound: where the read ends (``endAtOperationTime``).
        max_bytes: about how many bytes of entries it should hold (None: no cap).
    """
    indexes = [ts_index(path) for _, path in spec.oplog_paths]
    defects = [index.defect for index in indexes if index.defect is not None]
    begin = _window_start(spec, start.watermark, indexes)
    if begin is None:
        if defects:
            raise defects[0]  # no entry before it: nothing else can be reported first
        return start  # every file is empty
    end = max(index.last for index in indexes) + _TICK  # just past the last entry
    if defects:
        # The data runs on past a defect the index stopped at: the window runs to the files'
        # end, so the tasks' readers meet it in its place, after any earlier entry's error.
        end = _NO_END - 1  # the last cluster time there is
    if bound is not None:
        end = min(end, ts_key(decode_token(token_of_text(bound.stop_before)).cluster_time))
    if max_events is not None or max_bytes is not None:
        end = min(end, _end_after(indexes, begin, max_events, max_bytes))
    if end <= begin:
        if defects and bound is None:
            raise defects[0]  # the data goes on past the start, to a defect: report it
        return start  # nothing at or after the start
    version = spec.stream.default_token_version
    mark = high_water_mark(Timestamp(end >> 32, end & 0xFFFFFFFF), version)
    return StreamOffset(token_text(encode_token(mark)), start.shards, window=True)


def _window_start(spec: SourceSpec, watermark: str, indexes: Sequence[TsIndex]) -> int | None:
    """The window's first cluster time as an integer; None: the files' beginning."""
    if watermark:
        return ts_key(decode_token(token_of_text(watermark)).cluster_time)
    configured = start_time(spec.stream)
    if configured is not None:
        return ts_key(configured)
    firsts = [index.times[0] for index in indexes if index.times]
    return min(firsts) if firsts else None


def _end_after(
    indexes: Sequence[TsIndex], begin: int, max_events: int | None, max_bytes: int | None
) -> int:
    """The cluster time before which the shards hold about ``max_events`` entries, or about
    ``max_bytes`` bytes of them, from ``begin`` on (whichever comes first).

    Walks the shards' sampled times above ``begin`` in time order; each stands for the
    entries since the sample before it, and for their bytes.  The first one is always
    taken, so every window advances.  What a window holds beyond the count: on each other
    shard, the entries since its last sample below the end (samples are at most
    :data:`~shardstream.oplog.ts_index.STRIDE` entries, or about
    :data:`~shardstream.oplog.ts_index.SAMPLE_BYTES` or one entry, apart).
    """
    taken = size = 0
    for time, entries, span in heapq.merge(*(_samples_after(index, begin) for index in indexes)):
        taken += entries
        size += span
        if (max_events is not None and taken >= max_events) or (
            max_bytes is not None and size >= max_bytes
        ):
            return time
    return _NO_END  # fewer than that: the window runs to the end of the data


def _samples_after(index: TsIndex, begin: int) -> Iterator[tuple[int, int, int]]:
    """(time, entries since the sample before, their bytes) of each sample above ``begin``."""
    for at in range(bisect.bisect_right(index.times, begin), len(index.times)):
        if at:
            entries = index.ordinals[at] - index.ordinals[at - 1]
            yield index.times[at], entries, index.offsets[at] - index.offsets[at - 1]
        else:
            yield index.times[at], 0, 0
