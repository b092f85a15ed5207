"""The source on the fast path: a restart after one of its tokens, as a start at its time.

The fast path refuses resume tokens (``fast_path_applies``): resuming compares tokens on the
shards. This source only ever restarts after a token of its own stream (a batch's
watermark, a shard's last event), so "after token T" is the same stream as "from T's cluster
time, every event above T": the shards start at T's time, which the fast path takes, and the
events at or below T are dropped (``merger.floored_stream``), which is what the shards'
resumability check drops (byte-identical tokens of several shards included: a batch never
ends inside such a group).

It applies when the input is BSON oplog files (raw entries), or, for a task reading a live
shard's window (:func:`window_start`), a live shard tailed raw; the user's own start is not a
resume token (a resumed stream's tokens keep that token's version), ``after`` is no
invalidate's token (after one the stream restarts with ``startAfter``, which only the
reference path takes) and the options are otherwise the fast path's.

The driver's planner reads each event's token, shard and operation type, which a fast-path
event gives without being decoded; the tasks (``range_reader``, merged and per shard) turn
the events into rows from their bytes (``encoded_rows``), an update's oplog ``o`` (the
``_oplogUpdate`` column the mirror applies) included.
"""

from __future__ import annotations

import dataclasses

from shardstream.merger import MergedStream
from shardstream.merger.floored_stream import FlooredStream, started_at_token
from shardstream.oplog import InputFormat
from shardstream.resume_token import decode_token
from shardstream.spark.source.offsets import data_of, token_of_text
from shardstream.spark.source.options import SourceKind, SourceSpec
from shardstream.spark.source.shard_inputs import offline_merged_stream, open_merged_stream
from shardstream.transform import ChangeStreamOptions
from shardstream.transform.raw.pipeline import fast_path_applies


@dataclasses.dataclass(frozen=True, slots=True)
class FastStart:
    """How to read a range on the fast path.

    Attributes:
        options: the stream's options, started at the token's time (or as configured).
        floor: drop events whose token ``_data`` is at or below this ("" = none).
    """

    options: ChangeStreamOptions
    floor: str


def fast_start(spec: SourceSpec, after: str) -> FastStart | None:
    """The fast path's start just after ``after`` ("" = as configured), or None."""
    if spec.kind is not SourceKind.OPLOG:
        return None
    if any(
        (spec.input_format or InputFormat.for_path(path)) is not InputFormat.BSON
        for _, path in spec.oplog_paths
    ):
        return None
    return _fast_options(spec, after)


def window_start(spec: SourceSpec, after: str) -> FastStart | None:
    """:func:`fast_start` for a task reading one shard's window: BSON files, or a live
    shard (its tailer hands out the server's bytes).  Only windows read a live shard on
    the fast path: a live merged stream keeps the reference path, whose config.shards
    monitor follows shards added and removed, which a window's planner checks instead."""
    if spec.kind is SourceKind.LIVE:
        return _fast_options(spec, after)
    return fast_start(spec, after)


def _fast_options(spec: SourceSpec, after: str) -> FastStart | None:
    if spec.stream.resume_token is not None:
        return None
    options, floor = spec.stream, ""
    if after:
        started = started_at_token(options, decode_token(token_of_text(after)))
        if started is None:
            return None
        options, floor = started, data_of(after)
    if options.show_expanded_events or not fast_path_applies(
        options.with_options(merged_by_router=True)
    ):
        # Expanded events took the fast path for the sync (issue 28); the rows and windows
        # built from them are not yet held to the reference path's, so they keep it.
        return None
    return FastStart(options, floor)


def open_planning_stream(spec: SourceSpec, after: str) -> MergedStream | FlooredStream:
    """The merged stream just after ``after``: on the fast path where :func:`fast_start` allows."""
    fast = fast_start(spec, after)
    if fast is None:
        return open_merged_stream(spec, after)
    return FlooredStream(offline_merged_stream(spec, fast.options, raw=True), fast.floor)
