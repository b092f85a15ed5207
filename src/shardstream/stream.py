"""Facade: ``watch()`` and :class:`ChangeStream`, shaped like pymongo's.

A pymongo user switches by changing one line: ``collection.watch(...)`` becomes
``shardstream.watch(shards, db=..., coll=..., ...)``; iteration, ``try_next``,
``resume_token``, ``alive``, ``close`` and ``with`` behave as the driver's do,
including the change-stream spec's resume-token caching rules.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar

from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.errors import ConfigurationError, OplogError
from shardstream.match.evaluator import compile_pipeline
from shardstream.merger.config_shards_monitor import ConfigShardsMonitor
from shardstream.merger.floored_stream import FlooredStream, resumed_on_fast_path
from shardstream.merger.merged_stream import MergedStream
from shardstream.merger.raw.encoded_event import EncodedEvent, decode_event, leading_id
from shardstream.merger.topology import TopologySource
from shardstream.oplog.live.cluster import connect_live_cluster
from shardstream.oplog.source import OplogSource
from shardstream.resume_token import ResumeToken, ResumeTokenData, decode_token_document
from shardstream.transform import ChangeEvent, ChangeStreamOptions, DocumentLookup, PerShardLookup
from shardstream.transform.namespace_filter import pattern_list
from shardstream.transform.raw.event_writer import encode_event_document
from shardstream.transform.raw.pipeline import fast_path_applies

DEFAULT_BATCH_SIZE: Final = 1000
_POLL_INTERVAL_S: Final = 0.01
_T = TypeVar("_T")


class ChangeStream:
    """An iterator over merged change events (like ``pymongo.change_stream.ChangeStream``).

    Use :func:`watch` to create one.
    """

    def __init__(
        self,
        merged: MergedStream | FlooredStream,
        *,
        batch_size: int,
        max_await_time_ms: int | None,
        start_token: Mapping[str, Any] | None = None,
    ) -> None:
        self._merged = merged
        self._batch_size = batch_size
        self._max_await_s = None if max_await_time_ms is None else max_await_time_ms / 1000
        self._batch: deque[ChangeEvent] = deque()
        self._batch_resume_token: ResumeToken | None = None
        # The driver spec caches startAfter (else resumeAfter) as given when the stream
        # starts, so resume_token is usable before the first batch arrives.
        self._resume_token: dict[str, Any] | None = (
            None if start_token is None else copy.deepcopy(dict(start_token))
        )
        self._closed = False

    def __iter__(self) -> ChangeStream:
        return self

    def __next__(self) -> dict[str, Any]:
        return self.next()

    def next(self) -> dict[str, Any]:
        """Return the next event, waiting for one; StopIteration once the stream has ended.

        A stream over finite sources (files) ends when they are all read; over live
        sources it waits (polling at most ``max_await_time_ms`` per call to the shards).
        """
        while self.alive:
            event = self.try_next()
            if event is not None:
                return event
            if not self._batch and not self._merged.exhausted:
                time.sleep(_POLL_INTERVAL_S)
        raise StopIteration

    def try_next(self, *, wait: bool = True) -> dict[str, Any] | None:
        """Return the next event if one is ready now, else None (and advance ``resume_token``).

        ``wait=False``: never wait ``max_await_time_ms`` for live shards (one look at what
        the merge holds), for a caller that paces its own reads.
        """
        return self.try_next_decoded(decode_event, wait=wait)

    def try_next_decoded(
        self, decode: Callable[[bytes], dict[str, Any]], *, wait: bool = True
    ) -> dict[str, Any] | None:
        """:meth:`try_next`, a fast-path event decoded from its bytes by ``decode`` (for
        :meth:`try_next`, :func:`~shardstream.merger.raw.encoded_event.decode_event`; the
        sync keeps some fields as bytes: ``cluster_sync.sync_event``).

        ``decode`` must give the event's ``_id``. A fast-path event's copied values only
        meet a decoder here: what it raises (a corrupt value) closes the stream, as a
        reference-path error does. A reference-path event comes as its dict (encoding it to
        decode it again would only cost).
        """
        event = self._pop_event(wait)
        if event is None:
            return None
        document = self._decoded(event, decode)
        self._advance(document["_id"])
        return document

    def take_decoded(
        self,
        decode: Callable[[bytes], _T],
        max_events: int,
        document: Callable[[dict[str, Any]], _T],
    ) -> list[_T]:
        """Up to ``max_events`` events ready now (never waiting), a fast-path event as
        ``decode`` makes it from its bytes, a reference-path event as ``document`` makes it
        from its dict, and ``resume_token`` where that many :meth:`try_next` calls would
        leave it: for a reader that takes what is ready in one call instead of one call per
        event (the sync turns each event into its target write here).

        What ``decode`` or ``document`` raises closes the stream and propagates (the events
        taken before it are not returned).
        """
        taken: list[_T] = []
        ready = self._batch
        last: ChangeEvent | None = None
        while len(taken) < max_events:
            if ready:
                event = ready.popleft()
            else:
                if last is not None:  # the token after the held batch's last event
                    self._advance(_token_of(last))
                fetched = self._pop_event(wait=False)
                if fetched is None:
                    return taken
                event = fetched
            try:
                converted = (
                    decode(event.raw)
                    if isinstance(event, EncodedEvent)
                    else document(event.document)
                )
            except BaseException:
                self.close()
                raise
            taken.append(converted)
            last = event
        if last is not None:
            self._advance(_token_of(last))
        return taken

    def _decoded(
        self, event: ChangeEvent, decode: Callable[[bytes], dict[str, Any]]
    ) -> dict[str, Any]:
        try:
            return decode(event.raw) if isinstance(event, EncodedEvent) else event.document
        except BaseException:
            self.close()
            raise

    def try_next_raw(self) -> bytes | None:
        """:meth:`try_next`, with the event as the BSON bytes the server would send.

        On the fast path these are the bytes it wrote, never decoded (a corrupt value is
        found by whoever reads them); a reference-path event is encoded. ``resume_token``
        advances as with :meth:`try_next`.
        """
        event = self._pop_event()
        if event is None:
            return None
        self._advance(_token_of(event))
        if isinstance(event, EncodedEvent):
            return event.raw
        return encode_event_document(event.document)

    def _pop_event(self, wait: bool = True) -> ChangeEvent | None:
        if self._closed:
            return None
        if not self._batch:
            try:
                self._fetch_batch(wait)
            except BaseException:
                # As pymongo: a fatal error closes the stream (nothing here is resumable;
                # the caller resumes from resume_token with a new watch()).
                self.close()
                raise
            if not self._batch:
                return None
        return self._batch.popleft()

    def _advance(self, event_id: Mapping[str, Any]) -> None:
        if not self._batch and self._batch_resume_token is not None:
            self._resume_token = self._batch_resume_token.to_document()
        else:
            self._resume_token = dict(event_id)

    def _fetch_batch(self, wait: bool) -> None:
        await_s = self._max_await_s if wait else None
        deadline = None if await_s is None else time.monotonic() + await_s
        while True:
            events, resume_token = self._merged.next_batch(self._batch_size)
            self._batch.extend(events)
            self._batch_resume_token = resume_token
            if events or self._merged.exhausted or deadline is None or time.monotonic() >= deadline:
                break
            time.sleep(_POLL_INTERVAL_S)
        if not self._batch and resume_token is not None:
            self._resume_token = resume_token.to_document()

    @property
    def resume_token(self) -> dict[str, Any] | None:
        """Where to resume: the last event's ``_id``, or the batch's postBatchResumeToken."""
        return None if self._resume_token is None else dict(self._resume_token)

    @property
    def alive(self) -> bool:
        """False once closed, invalidated, or (finite sources) fully read."""
        return not self._closed and (bool(self._batch) or not self._merged.exhausted)

    def shard_positions(self) -> dict[str, Timestamp | None]:
        """How far each shard is known to be (its promise's cluster time)."""
        return self._merged.shard_positions()

    def close(self) -> None:
        """Stop reading and release the sources."""
        if not self._closed:
            self._closed = True
            self._merged.close()

    def __enter__(self) -> ChangeStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


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


def _token_of(event: ChangeEvent) -> Mapping[str, Any]:
    """An event's resume token, read from its bytes where the fast path wrote it first."""
    token: Mapping[str, Any] | None = None
    if isinstance(event, EncodedEvent):
        token = leading_id(event.raw)
    return token or event.document["_id"]
