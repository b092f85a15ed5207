"""Open the shards' oplogs a spec names, positioned after a watermark.

The driver (to plan batches) and every task (to read them) open their own sources:
nothing here is shared or pickled.  A simulated cluster is run once per Python process
and cached, since a worker is reused for many tasks.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from bson.timestamp import Timestamp

from shardstream.errors import OplogError
from shardstream.match.evaluator import compile_pipeline
from shardstream.merger import MergedStream
from shardstream.merger.config_shards_monitor import ConfigShardsMonitor
from shardstream.merger.merged_stream import start_token
from shardstream.oplog.file_reader import (
    OPLOG_CODEC_OPTIONS,
    RAW_OPLOG_CODEC_OPTIONS,
    InputFormat,
)
from shardstream.oplog.file_source import FileOplogSource
from shardstream.oplog.live.cluster import connect_live_cluster
from shardstream.oplog.live.discovery import discover_cluster
from shardstream.oplog.live.tailer import LiveOplogSource
from shardstream.oplog.source import OplogSource
from shardstream.oplog.ts_index import ts_index
from shardstream.resume_token import decode_token, encode_token, high_water_mark
from shardstream.sim.feed import just_below
from shardstream.spark.source.offsets import StreamOffset, token_of_text, token_text
from shardstream.spark.source.options import SourceKind, SourceSpec
from shardstream.spark.source.positioned_source import PositionedSource
from shardstream.spark.source.simulated_input import (
    SimulatedShardOplog,
    simulated_run,
    simulated_shard_names,
)
from shardstream.transform import ChangeStreamOptions

_LIVE_AWAIT_MS: Final = 200


def stream_options(spec: SourceSpec, after: str) -> ChangeStreamOptions:
    """The stream's options, started just after the token ``after`` ("" = as configured).

    ``startAfter`` rather than ``resumeAfter``: the two agree on every token except an
    invalidate's, which only ``startAfter`` accepts.
    """
    if not after:
        return spec.stream
    return spec.stream.with_options(
        resume_after=None,
        start_after=decode_token(token_of_text(after)),
        start_at_operation_time=None,
    )


def start_time(options: ChangeStreamOptions) -> Timestamp | None:
    """Where every shard's oplog must reach back to for ``options``' start."""
    token = options.resume_token
    if token is not None:
        return token.cluster_time
    return options.start_at_operation_time


def open_sources(
    spec: SourceSpec, start: Timestamp | None, *, raw: bool = False
) -> dict[str, OplogSource]:
    """One source per shard, each able to serve the stream from ``start``.

    ``raw``: oplog files hand out their bytes (``RawBSONDocument``), for the fast path.
    """
    if spec.kind is SourceKind.OPLOG:
        return {
            name: _at_start(
                FileOplogSource(name, path, spec.input_format, raw_entries=raw, near=start), start
            )
            for name, path in spec.oplog_paths
        }
    if spec.kind is SourceKind.SIMULATE:
        config = spec.simulation
        assert config is not None  # parse_options sets it for this kind
        return {
            name: SimulatedShardOplog(config, name, start) for name in simulated_shard_names(config)
        }
    assert spec.uri is not None  # parse_options sets it for a live source
    return connect_live_cluster(spec.uri, start=start, await_ms=_LIVE_AWAIT_MS).sources


def _at_start(source: OplogSource, start: Timestamp | None) -> OplogSource:
    """``source`` from the stream's start on (as a tailer is); the whole of it without one."""
    return source if start is None else PositionedSource(source, start)


def open_shard_source(
    spec: SourceSpec, shard: str, start: Timestamp | None, *, raw: bool = False
) -> OplogSource:
    """The source of one shard (per-shard tasks read nothing else); ``raw`` as for
    :func:`open_sources`, and for a live shard's tailer (a window's task)."""
    if spec.kind is SourceKind.LIVE:
        assert spec.uri is not None
        info = discover_cluster(spec.uri)
        by_name = {found.name: found for found in info.shards}
        if shard not in by_name:
            raise _missing_shard(spec, shard, list(by_name))
        first = start or info.cluster_time
        codec = RAW_OPLOG_CODEC_OPTIONS if raw else OPLOG_CODEC_OPTIONS
        return LiveOplogSource(
            shard, by_name[shard].uri, start=first, await_ms=_LIVE_AWAIT_MS, codec_options=codec
        )
    if spec.kind is SourceKind.SIMULATE:
        assert spec.simulation is not None
        names = simulated_shard_names(spec.simulation)
        if shard not in names:
            raise _missing_shard(spec, shard, names)
        return SimulatedShardOplog(spec.simulation, shard, start)
    paths = dict(spec.oplog_paths)
    if shard not in paths:
        raise _missing_shard(spec, shard, list(paths))
    return _at_start(
        FileOplogSource(shard, paths[shard], spec.input_format, raw_entries=raw, near=start),
        start,
    )


def open_merged_stream(spec: SourceSpec, after: str) -> MergedStream:
    """The merged stream of every shard, starting just after ``after``."""
    options = stream_options(spec, after)
    if spec.kind is not SourceKind.LIVE:
        return offline_merged_stream(spec, options)
    event_filter = compile_pipeline(list(spec.pipeline))
    assert spec.uri is not None
    # As watch(URI): the config server's oplog is a remote of the merge, so shards added
    # while the query runs are read from their add time, and removed ones fail it.
    live = connect_live_cluster(
        spec.uri,
        start=start_time(options),
        await_ms=_LIVE_AWAIT_MS,
        with_lookup=options.wants_images,
        with_config=True,
    )
    if live.config_source is None:
        live.close()
        raise OplogError(
            "mongos did not name its config server (getShardMap was refused), so shards "
            "added or removed while the query runs could not be followed; grant the "
            "clusterMonitor role"
        )
    if options.start_at_operation_time is None and options.resume_token is None:
        options = options.with_options(start_at_operation_time=live.start)
    monitor = ConfigShardsMonitor(live.config_source, live.start, live.open_shard)
    return MergedStream(
        live.sources, options, lookup=live.lookup, topology=monitor, event_filter=event_filter
    )


def offline_merged_stream(
    spec: SourceSpec, options: ChangeStreamOptions, *, raw: bool = False
) -> MergedStream:
    """The merged stream of a file or simulated input with ``options``; ``raw`` as for
    :func:`open_sources`."""
    sources = open_sources(spec, start_time(options), raw=raw)
    return MergedStream(sources, options, event_filter=compile_pipeline(list(spec.pipeline)))


def initial_offset(spec: SourceSpec) -> StreamOffset:
    """Where a new query starts.

    Files and simulated runs start as configured (their start is in the data).  A live
    cluster's start is pinned in the offset, so that a restart from a checkpoint holding
    no event yet starts there again whatever its options (a snapshot's T0 is passed as an
    option by the first run only): a resume token as itself, ``startAtOperationTime`` T
    as the high-water-mark token at T (it sorts below T's events), and no start option as
    the mark at the cluster's current time plus one tick, where mongos starts.
    """
    if spec.kind is SourceKind.LIVE:
        assert spec.uri is not None
        info = discover_cluster(spec.uri)
        names = [shard.name for shard in info.shards]
        pinned = start_token(spec.stream)
        if pinned is None:
            now = info.cluster_time
            mark = high_water_mark(
                Timestamp(now.time, now.inc + 1), spec.stream.default_token_version
            )
            pinned = encode_token(mark)
        return StreamOffset.initial(token_text(pinned), names)
    if spec.kind is SourceKind.OPLOG:
        return StreamOffset.initial("", [name for name, _ in spec.oplog_paths])
    assert spec.simulation is not None
    return StreamOffset.initial("", spec.simulation.all_shard_names)


@dataclasses.dataclass(frozen=True, slots=True)
class ReadBound:
    """Where a bounded read ends.

    Attributes:
        stop_before: no event whose token is at or above this is read (a high-water
            mark at the first excluded cluster time, so it sorts below that time's events).
        complete_at: once the merge's postBatchResumeToken reaches this (the mark at the
            last included time), every event before the bound has been seen.
    """

    stop_before: str
    complete_at: str


def read_bound(spec: SourceSpec, *, pin_now: bool) -> ReadBound | None:
    """The bound of a read: ``endAtOperationTime`` (exclusive), and maybe "now".

    Args:
        spec: the source.
        pin_now: also stop after the live cluster's current time (``availableNow`` and
            batch reads: data written later is not "available now").
    """
    bounds = []
    if spec.end_at is not None:
        bounds.append(spec.end_at)
    if pin_now and spec.kind is SourceKind.LIVE:
        assert spec.uri is not None
        now = discover_cluster(spec.uri).cluster_time
        bounds.append(Timestamp(now.time, now.inc + 1))
    if not bounds:
        return None
    first_excluded = min(bounds)
    version = spec.stream.default_token_version
    return ReadBound(
        stop_before=encode_token(high_water_mark(first_excluded, version)).data,
        complete_at=encode_token(high_water_mark(just_below(first_excluded), version)).data,
    )


def _missing_shard(spec: SourceSpec, shard: str, names: list[str]) -> OplogError:
    return OplogError(f"expected shard {shard!r} in {spec.display}, got shards {sorted(names)}")


def newest_time(spec: SourceSpec) -> Timestamp | None:
    """A bounded source's newest cluster time: its last entry's ``ts`` over every shard
    (None: a live cluster, or files whose entries are not indexed, Extended JSON).

    Raises:
        OplogError: an oplog file cannot be read.
    """
    if spec.kind is SourceKind.SIMULATE and spec.simulation is not None:
        times = [
            oplog[-1]["ts"] for oplog in simulated_run(spec.simulation).oplogs.values() if oplog
        ]
        return max(times) if times else None
    if spec.kind is SourceKind.OPLOG and spec.input_format is not InputFormat.EJSON:
        paths = [path for _, path in spec.oplog_paths]
        if any(not path.endswith(".bson") and spec.input_format is None for path in paths):
            return None
        lasts = [ts_index(path).last for path in paths]
        newest = max(lasts, default=-1)
        return Timestamp(newest >> 32, newest & 0xFFFFFFFF) if newest >= 0 else None
    return None
