"""Facade: ``watch()``, shaped like pymongo's; the stream it returns is
:class:`~shardstream.change_stream.ChangeStream`.

A pymongo user switches by changing one line: ``collection.watch(...)`` becomes
``shardstream.watch(shards, db=..., coll=..., ...)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.change_stream import ChangeStream
from shardstream.errors import ConfigurationError, OplogError
from shardstream.match.evaluator import compile_pipeline
from shardstream.merger.config_shards_monitor import ConfigShardsMonitor
from shardstream.merger.floored_stream import FlooredStream, resumed_on_fast_path
from shardstream.merger.merged_stream import MergedStream
from shardstream.merger.topology import TopologySource
from shardstream.oplog.live.cluster import connect_live_cluster
from shardstream.oplog.source import OplogSource
from shardstream.resume_token import ResumeTokenData, decode_token_document
from shardstream.transform import ChangeStreamOptions, DocumentLookup, PerShardLookup
from shardstream.transform.namespace_filter import pattern_list
from shardstream.transform.raw.pipeline import fast_path_applies

DEFAULT_BATCH_SIZE: Final = 1000


def watch(
    source: Mapping[str, OplogSource] | str | MongoClient[Any],
    *,
    db: str | None = None,
    coll: str | None = None,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    pipeline: Sequence[Mapping[str, Any]] | None = None,
    full_document: str | None = None,
    full_document_before_change: str | None = None,
    resume_after: Mapping[str, Any] | None = None,
    start_after: Mapping[str, Any] | None = None,
    start_at_operation_time: Timestamp | None = None,
    show_expanded_events: bool = False,
    batch_size: int | None = None,
    max_await_time_ms: int | None = None,
    lookup: DocumentLookup | PerShardLookup | None = None,
    topology: TopologySource | None = None,
    ignore_removed_shards: bool = False,
    monitor_shards: bool = True,
    read_preference: str = "primary",
    client_options: Mapping[str, Any] | None = None,
    tailer: str = "thread",
    fast_path: bool = True,
    fast_resume: bool = False,
    **internal_options: Any,
) -> ChangeStream:
    """Open a change stream over every shard, merged as mongos merges it.

    Args:
        source: a mongos URI or a ``MongoClient`` connected to mongos (each shard's
            oplog is then tailed live, from the same start on every shard: the start
            option, else the cluster's time + 1 tick as mongos picks it), or a mapping
            shard name -> :class:`~shardstream.oplog.OplogSource` (files, the simulator).
        db: watch one database (default: the whole cluster).
        coll: watch one collection of ``db``.
        include / exclude: ``DB.COLL`` patterns (``*`` matches any characters): only the
            namespaces an include matches (all, without one) and no exclude matches; an
            exclude wins. Applied in each shard's oplog filter, before any transform.
            A rename is kept when either name is selected, a dropDatabase when some
            collection of its database may be (docs/filters.md). ``include``
            and ``db`` are exclusive.
        pipeline: ``$match`` stages, evaluated on each event (see docs/watch.md).
        full_document: ``updateLookup``, ``whenAvailable`` or ``required`` (needs ``lookup``).
        full_document_before_change: ``whenAvailable`` or ``required`` (needs ``lookup``).
        resume_after: a token document ``{_data, ...}`` to resume after.
        start_after: like ``resume_after``, and also accepts an invalidate's token.
        start_at_operation_time: start at this cluster time.
        show_expanded_events: also DDL events and the expanded fields.
        batch_size: events per internal batch (the postBatchResumeToken granularity).
        max_await_time_ms: how long ``try_next`` waits for live shards before giving up.
        lookup: reads documents for the image options.
        topology: shard additions and removals (a ``config.shards`` monitor).
        ignore_removed_shards: go on when a shard leaves (accepting a possible gap).
        monitor_shards: on a live cluster, tail the config server's oplog so shards
            added mid-stream are read from the time they join, as mongos does; without
            it only the shards listed at the start are read.
        read_preference: on a live cluster, the member each tailer reads (``primary``,
            ``primaryPreferred``, ``secondary``, ``secondaryPreferred``, ``nearest``).
        client_options: on a live cluster, extra ``MongoClient`` options for the shard
            and config-server connections (TLS files, timeouts, ...).
        tailer: on a live cluster, ``thread`` (default) or ``process``: whether each
            shard is tailed by a thread or by a child process (``spawn``; the caller's
            script needs a ``__main__`` guard). See ``benchmarks/README.md``.
        fast_path: on a live cluster, read the shards' entries as raw BSON and write the
            common events straight from the bytes when the options allow it (no images,
            no split events, no ``resume_after``/``start_after`` past an event; expanded
            events and raw update descriptions included); the events,
            tokens and errors are the reference path's. False: always the reference
            path (for comparisons).
        fast_resume: on a live cluster, ``resume_after`` a token this same stream (same
            options) returned while reading: start at the token's cluster time on the fast
            path and drop the events at or below it (``merger.floored_stream``), rather
            than resume on the reference path. Unlike a resume, this does not fail when the
            token's own event has left the oplog (a token read at majority never does).
            For readers that restart after their own checkpoints (the sync).
        internal_options: the server's internal flags as ChangeStreamOptions names
            (``show_system_events``, ``show_raw_update_description``, ``server_version``,
            ``token_version`` ...).

    Raises:
        ConfigurationError: conflicting or unknown options.
        ResumeTokenError: a malformed resume token.
    """
    if batch_size is not None and batch_size < 1:
        raise ConfigurationError(f"expected batch_size >= 1, got {batch_size!r}")
    try:
        options = ChangeStreamOptions(
            db=db,
            coll=coll,
            include=pattern_list(include, "include"),
            exclude=pattern_list(exclude, "exclude"),
            full_document=full_document or "default",
            full_document_before_change=full_document_before_change or "off",
            resume_after=_token(resume_after),
            start_after=_token(start_after),
            start_at_operation_time=start_at_operation_time,
            show_expanded_events=show_expanded_events,
            **internal_options,
        )
    except TypeError as exc:
        raise ConfigurationError(f"unknown watch() option: {exc}") from exc
    floor = ""  # with fast_resume: the token to drop events at or below
    if isinstance(source, str | MongoClient):
        start = options.resume_token.cluster_time if options.resume_token else None
        start = start or start_at_operation_time
        started = resumed_on_fast_path(options) if fast_resume and fast_path else None
        if started is not None and resume_after is not None:
            options, floor = started, str(resume_after["_data"])
        # fast_path_applies is the one gate: resuming (tokens compared on the shards),
        # images and split events keep the reference path.
        raw = fast_path and fast_path_applies(options)
        live = connect_live_cluster(
            source,
            start=start,
            await_ms=min(max_await_time_ms or 1000, 1000),
            read_preference=read_preference,
            client_options=client_options,
            with_lookup=options.wants_images and lookup is None,
            with_config=topology is None and monitor_shards,
            tailer=tailer,
            raw_entries=raw,
        )
        lookup = lookup or live.lookup
        if start is None:
            options = options.with_options(start_at_operation_time=live.start)
        if topology is None and monitor_shards:
            if live.config_source is None:
                live.close()
                raise OplogError(
                    "mongos did not name its config server (getShardMap was refused), so "
                    "shards added or removed mid-stream cannot be followed; grant the "
                    "clusterMonitor role, or pass monitor_shards=False to accept that"
                )
            topology = ConfigShardsMonitor(live.config_source, live.start, live.open_shard)
        source = live.sources
    merged = MergedStream(
        source,
        options,
        lookup=lookup,
        topology=topology,
        event_filter=compile_pipeline(pipeline or []),
        ignore_removed_shards=ignore_removed_shards,
    )
    return ChangeStream(
        FlooredStream(merged, floor) if floor else merged,
        batch_size=batch_size or DEFAULT_BATCH_SIZE,
        max_await_time_ms=max_await_time_ms,
        start_token=start_after if start_after is not None else resume_after,
    )


def _token(document: Mapping[str, Any] | None) -> ResumeTokenData | None:
    return None if document is None else decode_token_document(document)
