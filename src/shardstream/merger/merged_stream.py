"""The router half of a sharded change stream, over N shard readers.

Drives the :class:`AsyncResultsMerger` the way mongos's cursor does: read shards
whose buffers are low, release events the gate allows, pass them through the
router stages (topology handling, EnsureResumeTokenPresent, the classic-event
filter, the user's ``$match``), and report a postBatchResumeToken with every batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError, MergeError
from shardstream.merger.async_results_merger import AsyncResultsMerger
from shardstream.merger.handle_topology_change import (
    change_of,
    is_internal,
    removed_shard_error,
    start_after_add,
    topology_event,
)
from shardstream.merger.raw.shard_reader import FastShardReader, reads_fast
from shardstream.merger.shard_reader import ShardReader
from shardstream.merger.topology import ShardChangeKind, TopologySource
from shardstream.oplog.source import OplogSource
from shardstream.resume_token import ResumeToken, decode_token, encode_token, high_water_mark
from shardstream.transform import ChangeEvent, ChangeStreamOptions, DocumentLookup, PerShardLookup
from shardstream.transform import fields as f
from shardstream.transform.options import StreamScope
from shardstream.transform.stages.ensure_resume_token_present import EnsureResumeTokenPresent

TOPOLOGY_REMOTE: Final = "config.shards"
DEFAULT_READ_ENTRIES: Final = 1000
DEFAULT_MAX_BUFFERED: Final = 10_000


class MergedStream:
    """N shards' events as one stream in mongos's order.

    Args:
        sources: shard name -> its oplog.
        options: the stream's options (``merged_by_router`` is set for the shards).
        lookup: for image options.
        topology: shard additions and removals; they gate the merge like a shard.
        event_filter: the user's ``$match``, applied after the router stages.
        ignore_removed_shards: go on when a shard leaves, reading it while it still answers
            (events it held but could no longer serve would be missed).
        read_entries: oplog entries read from a shard at a time.
        max_buffered: a shard with this many unreleased events is not read further.
    """

    def __init__(
        self,
        sources: Mapping[str, OplogSource],
        options: ChangeStreamOptions,
        *,
        lookup: DocumentLookup | PerShardLookup | None = None,
        topology: TopologySource | None = None,
        event_filter: Callable[[Mapping[str, Any]], bool] | None = None,
        ignore_removed_shards: bool = False,
        read_entries: int = DEFAULT_READ_ENTRIES,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
    ) -> None:
        if not sources:
            raise ConfigurationError("expected at least one shard, got none")
        if options.show_migration_events:
            raise ConfigurationError(
                "Change streams on mongos may not show migration events (server error 31123): "
                "show_migration_events needs a single shard"
            )
        self._options = options.with_options(merged_by_router=True)
        self._lookup = lookup
        self._topology = topology
        self._filter = event_filter
        self._ignore_removed = ignore_removed_shards
        self._read_entries = read_entries
        self._max_buffered = max_buffered
        self._start = _start_time(options)
        self._merger = AsyncResultsMerger()
        self._readers: dict[str, ShardReader | FastShardReader] = {}
        for name, source in sources.items():
            self._open_shard(name, source, self._options, self._start)
        if topology is not None:
            self._merger.add_remote(TOPOLOGY_REMOTE, config_cursor=True)
        self._topology_promise: ResumeToken | None = None
        self._ensure_token = EnsureResumeTokenPresent(options.resume_token)
        self._start_token = start_token(options)
        if self._start_token is not None:
            self._merger.set_high_water_mark(self._start_token)
        self.invalidated = False
        self._invalidate_token: ResumeToken | None = None

    def _open_shard(
        self, name: str, source: OplogSource, options: ChangeStreamOptions, start: Timestamp | None
    ) -> None:
        self._merger.add_remote(name)
        # A live lookup reads pre-images on the shard that wrote the change.
        shared = self._lookup
        lookup = shared.for_shard(name) if isinstance(shared, PerShardLookup) else shared
        if not getattr(source, "raw_entries", False):
            self._readers[name] = ShardReader(source, options, lookup=lookup, start=start)
        elif reads_fast(options):
            # The server's bytes, through the fast path (same events, same promises).
            self._readers[name] = FastShardReader(source, options, start=start)
        else:
            raise ConfigurationError(
                f"shard {name!r} delivers raw entries, which only streams with default "
                "options read (no images, expanded events, split events or resume token)"
            )

    def shard_positions(self) -> dict[str, Timestamp | None]:
        """Each shard's promise as a cluster time: how far the merge knows it (for lag stats)."""
        return {name: reader.position for name, reader in self._readers.items()}

    @property
    def shard_names(self) -> list[str]:
        """The data shards being read, in the order they joined."""
        return list(self._readers)

    def next_batch(self, max_events: int) -> tuple[list[ChangeEvent], ResumeToken | None]:
        """Return up to ``max_events`` events and the postBatchResumeToken after them.

        Reads rounds of shards while any of them has news, so with live sources an empty
        batch comes back when nothing is ready; with files, a batch is empty only at the end.
        """
        out: list[ChangeEvent] = []
        progressed = True
        while len(out) < max_events and not self.invalidated and progressed:
            self._release(out, max_events)
            if len(out) >= max_events or self.invalidated or self._merger.drained():
                break
            progressed = self._read_round()
        if len(out) < max_events:
            self._release(out, max_events)
        if self._invalidate_token is not None:
            # As mongos's getMore on ChangeStreamInvalidated: the batch's PBRT is the
            # invalidate's token, never a later promise (resuming must start after it).
            return out, self._invalidate_token
        return out, self._merger.finish_batch()

    @property
    def exhausted(self) -> bool:
        """True when every shard has ended and every event was returned (or invalidated)."""
        return self.invalidated or self._merger.drained()

    def _read_round(self) -> bool:
        """Read once from each remote that is open and not full; False if none had news."""
        progressed = False
        for name in self._merger.remote_names:
            if self._merger.is_exhausted(name) or self._merger.buffered(name) >= self._max_buffered:
                continue
            if name == TOPOLOGY_REMOTE:
                progressed |= self._read_topology()
                continue
            batch = self._readers[name].read(self._read_entries)
            if batch is None:
                continue
            self._merger.add_batch(name, batch.events, batch.promise, exhausted=batch.exhausted)
            progressed = True
        return progressed

    def _read_topology(self) -> bool:
        assert self._topology is not None
        batch = self._topology.next_batch()
        if batch is None:
            return False
        version = self._options.default_token_version
        events: list[ChangeEvent] = [topology_event(change, version) for change in batch.changes]
        promise = (
            encode_token(high_water_mark(batch.promise, version))
            if batch.promise is not None
            else None
        )
        # Like a shard's PBRT, the monitor's promise is the largest of its last event's token
        # and a mark at its scan time; an empty batch at the time of an event it already sent
        # must not take the promise back below that event.
        candidates = [t for t in (self._topology_promise, promise) if t is not None]
        if events:
            candidates.append(events[-1].token)
        if candidates:
            self._topology_promise = max(candidates, key=lambda token: token.data)
        self._merger.add_batch(
            TOPOLOGY_REMOTE, events, self._topology_promise, exhausted=batch.exhausted
        )
        return True

    def _release(self, out: list[ChangeEvent], max_events: int) -> None:
        merger = self._merger
        classic_only = not self._options.show_expanded_events
        # A whole-cluster stream never invalidates (stages/check_invalidate.py): with
        # expanded events too, no event's type is read here (from its bytes, in Python).
        typed = classic_only or self._options.scope is not StreamScope.CLUSTER
        while len(out) < max_events and not self.invalidated:
            # Popped a run at a time (the gate only moves when batches are added); a run
            # ends with a topology event, whose handling may add a remote.  Events popped
            # after an invalidate are dropped with the stream, as if never popped: the
            # stream's token is then the invalidate's.
            released = merger.pop_ready(max_events - len(out), stop_after_config=True)
            if not released:
                return
            for event in released:
                if is_internal(event):
                    # pop_ready left the mark as it was before this event.
                    self._handle_internal(event, merger.high_water_mark)
                    continue
                kept = self._ensure_token(event)
                if kept is None:
                    continue
                if typed:
                    kind = kept.operation_type
                    if classic_only and kind not in f.CLASSIC_OPERATION_TYPES:
                        continue
                    if kind == f.INVALIDATE:
                        self.invalidated = True
                        self._invalidate_token = kept.token
                if self._filter is None or self._filter(kept.document):
                    out.append(kept)
                if self.invalidated:
                    return

    def _handle_internal(self, event: ChangeEvent, previous: ResumeToken | None) -> None:
        # Never expose an internal event's token: at most a high-water mark at its time.
        synthetic = encode_token(
            high_water_mark(event.token_data.cluster_time, self._options.default_token_version)
        )
        best = synthetic if previous is None or synthetic.data > previous.data else previous
        self._merger.set_high_water_mark(best)
        change = change_of(event)
        if change is None:
            raise MergeError(f"internal event without a shard change: {event.document!r:.200}")
        # mongos's monitor starts at open time: a change that sorts at or before the stream's
        # start is part of the registry it opened with, not a change within the stream.
        before_start = self._start_token is not None and event.token.data <= self._start_token.data
        if change.kind is ShardChangeKind.REMOVED:
            if before_start or self._ignore_removed:
                # Gone before the start, nothing of the stream's is lost; or, as mongos v1,
                # the shard's cursor stays open while it can still be read.
                return
            raise removed_shard_error(change)
        if change.shard in self._readers:
            return  # already read (it was in the initial list)
        if change.open_source is None:
            raise MergeError(f"shard {change.shard!r} was added, but no way to read it was given")
        if before_start:
            # In the registry at open: read from the stream's own start, like every shard.
            self._open_shard(change.shard, change.open_source(), self._options, self._start)
            return
        start = start_after_add(change.ts, self._options.default_token_version)
        options = self._options.with_options(
            resume_after=decode_token(start), start_after=None, start_at_operation_time=None
        )
        self._open_shard(change.shard, change.open_source(), options, None)

    def close(self) -> None:
        """Close every shard's source, and the lookup's connections."""
        for reader in self._readers.values():
            reader.source.close()
        close_topology = getattr(self._topology, "close", None)
        if close_topology is not None:
            close_topology()
        close_lookup = getattr(self._lookup, "close", None)
        if close_lookup is not None:
            close_lookup()


def _start_time(options: ChangeStreamOptions) -> Timestamp | None:
    token = options.resume_token
    if token is not None:
        return token.cluster_time
    return options.start_at_operation_time


def start_token(options: ChangeStreamOptions) -> ResumeToken | None:
    """The token a stream starts after: the resume token, or the high-water mark at
    ``startAtOperationTime`` (it sorts below that time's events); None without either."""
    token = options.resume_token
    if token is not None:
        return encode_token(token)
    if options.start_at_operation_time is not None:
        return encode_token(
            high_water_mark(options.start_at_operation_time, options.default_token_version)
        )
    return None
