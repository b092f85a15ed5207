"""Fast path: one shard's half of a live merged stream, over raw entries.

:class:`FastShardReader` answers the merge exactly as :class:`ShardReader` does (the
same events, in the same order, with the same promise after each batch), but reads
entries as the server's BSON (a source with ``raw_entries``: ``RawBSONDocument``
entries) and runs them through :class:`FastShardPipeline`, which writes the hot CRUD
events straight from the bytes and falls back to the reference pipeline, entry by
entry, for everything else.  Fast events travel as :class:`EncodedEvent`; the
reference's events are kept as it built them (``reference_events``), so their dicts
are the reference's even where BSON would change a type.

Unlike the replay's encoded merge, the router's stages are not applied per shard:
events the router drops (non-classic ones) still move its high-water mark, so they
go through the merge as on the reference path.

A reader of one shard's events alone (a Spark task's window) takes a batch the fast path
wrote every event of as one :class:`EncodedRun` (:meth:`FastShardReader.read_run`): the
events' tokens and bytes in lists, no object per event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import bson
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.errors import MergeError
from shardstream.merger.raw.encoded_event import EncodedEvent
from shardstream.merger.shard_promise import PromisingReader, ShardPromise
from shardstream.merger.shard_reader import ShardBatch
from shardstream.oplog.corrupt_entry import entry_ts
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.oplog.raw_entries import RawEntries
from shardstream.oplog.source import OplogSource
from shardstream.resume_token import ResumeToken
from shardstream.transform import ChangeEvent, ChangeStreamOptions
from shardstream.transform.raw.pipeline import FastShardPipeline, fast_path_applies, ts_key


@dataclasses.dataclass(slots=True)
class EncodedRun:
    """A batch's events, every one written by the fast path, as lists rather than objects.

    ``keys[i]`` is event i's token ``_data`` (ASCII bytes, in token order), ``raws[i]`` its
    BSON; ``updates`` pairs an update event's index with its entry's ``o`` (what
    :attr:`~shardstream.transform.ChangeEvent.raw_update` carries).
    """

    shard: str
    keys: list[bytes]
    raws: list[bytes]
    updates: list[tuple[int, bytes]]

    def events(self) -> list[ChangeEvent]:
        """The run as the :class:`EncodedEvent` s :meth:`FastShardReader.read` gives."""
        shard = self.shard
        events: list[ChangeEvent] = [
            EncodedEvent(raw, key, shard) for key, raw in zip(self.keys, self.raws, strict=True)
        ]
        return _carrying_updates(events, self.updates)

    def slice(self, start: int, stop: int) -> EncodedRun:
        """Events ``start`` to ``stop`` (exclusive) as a run of their own."""
        updates = [(index - start, o) for index, o in self.updates if start <= index < stop]
        return EncodedRun(self.shard, self.keys[start:stop], self.raws[start:stop], updates)

    def last_token(self) -> ResumeToken | None:
        """The last event's token (None for no event)."""
        return ResumeToken(self.keys[-1].decode()) if self.keys else None


@dataclasses.dataclass(frozen=True, slots=True)
class RunBatch:
    """:class:`ShardBatch` with its events as a run where the fast path wrote them all."""

    events: EncodedRun | list[ChangeEvent]
    promise: ResumeToken | None
    exhausted: bool


class FastShardReader(PromisingReader):
    """Pulls one shard's raw oplog through the fast pipeline.

    Args:
        source: the shard's oplog; its entries are ``RawBSONDocument`` s.
        options: the stream's options (see :func:`shard_options`).
        start: the stream's start time; the shard's oplog must reach back to it.
    """

    def __init__(
        self, source: OplogSource, options: ChangeStreamOptions, *, start: Timestamp | None = None
    ) -> None:
        super().__init__(source)
        self._pipeline = FastShardPipeline(
            shard_options(options),
            single_shard=False,
            history=_DecodedHistory(source),
            name=source.name,
        )
        self._promise = ShardPromise.for_source(source, options, start)

    def read(self, max_entries: int) -> ShardBatch | None:
        """Read and transform one batch; None when the source has nothing ready.

        Raises: as :meth:`read_run`.
        """
        batch = self.read_run(max_entries)
        if batch is None:
            return None
        events = batch.events
        if isinstance(events, EncodedRun):
            events = events.events()
        return ShardBatch(events, batch.promise, batch.exhausted)

    def read_run(self, max_entries: int) -> RunBatch | None:
        """As :meth:`read`, but the events of a batch the fast path wrote every one of come
        as an :class:`EncodedRun`.

        Raises:
            ChangeStreamHistoryLost: the shard's oplog starts after the stream's start.
            MergeError: the source's promise went backwards.
            OplogError: an entry is not valid BSON, or its ``ts`` does not increase
                (the reference path reports the latter as a MergeError).
            TransformError: an entry the server would fail on.
        """
        batch = self.source.next_batch(max_entries)
        if batch is None:
            return None
        entries = batch.entries
        # A raw file's batch has its bytes at hand; other sources' entries give theirs.
        raws = entries.raws if isinstance(entries, RawEntries) else [_raw(e) for e in entries]
        floor = self._promise.source_promise
        self._promise.check_source_promise(batch.promise)
        if raws:
            # From the bytes: a damaged entry is the pipeline's to report (corrupt_entry).
            self._promise.check_first_entry(entry_ts(raws[0]))
        events: EncodedRun | list[ChangeEvent] = []
        pipeline = self._pipeline
        if raws and not pipeline.closed:
            events = self._events(raws, -1 if floor is None else ts_key(floor))
        if isinstance(events, EncodedRun):
            last = events.last_token()
        else:
            last = events[-1].token if events else None
        promise = self._promise.advance(last, batch.promise, pipeline.closed)
        return RunBatch(events, promise, batch.exhausted or pipeline.closed)

    def _events(self, entries: Sequence[bytes], floor: int) -> EncodedRun | list[ChangeEvent]:
        """The batch's events: a run if the fast path wrote them all, else a list of the
        fast ones encoded and the reference's as it built them."""
        pipeline = self._pipeline
        kept: list[tuple[int, ChangeEvent]] = []
        pipeline.reference_events = kept
        diffs: list[tuple[int, bytes]] = []
        pipeline.update_diffs = diffs
        keys: list[bytes] = []
        raws: list[bytes] = []
        pipeline.process_batch(entries, keys, raws, last=floor)
        shard = self.source.name
        if not kept:
            return EncodedRun(shard, keys, raws, diffs)
        by_index = dict(kept)
        events: list[ChangeEvent] = []
        for index, (key, raw) in enumerate(zip(keys, raws, strict=True)):
            if raw:
                events.append(EncodedEvent(raw, key, shard))
            else:
                event = by_index[index]
                event.shard = shard
                events.append(event)
        return _carrying_updates(events, diffs)


def shard_options(options: ChangeStreamOptions) -> ChangeStreamOptions:
    """The shard's options for the fast pipeline.

    A shard added mid-stream resumes after a high-water-mark token one tick after the add
    (``start_after_add``).  Such a token swallows nothing (every event at its time sorts
    after it), so it is the same stream as starting at its time, which the fast path takes.
    """
    token = options.resume_token
    if token is not None and token.is_high_water_mark:
        return options.with_options(
            resume_after=None, start_after=None, start_at_operation_time=token.cluster_time
        )
    return options


def reads_fast(options: ChangeStreamOptions) -> bool:
    """Whether a shard with ``options`` can be read by a :class:`FastShardReader`."""
    return fast_path_applies(shard_options(options))


@dataclasses.dataclass(frozen=True, slots=True)
class _DecodedHistory:
    """A raw source's older entries, decoded as the reference pipeline reads entries."""

    source: OplogSource

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        entry = self.source.fetch_entry(ts)
        if isinstance(entry, RawBSONDocument):
            decoded: dict[str, Any] = bson.decode(entry.raw, codec_options=OPLOG_CODEC_OPTIONS)
            return decoded
        return entry


def _carrying_updates(
    events: list[ChangeEvent], updates: list[tuple[int, bytes]]
) -> list[ChangeEvent]:
    """``events``, each update among them given its entry's ``o`` by index: as on the
    reference path, an update carries it (see :class:`ChangeEvent`)."""
    for index, o in updates:
        events[index].raw_update = RawBSONDocument(o)
    return events


def _raw(entry: Mapping[str, Any]) -> bytes:
    if not isinstance(entry, RawBSONDocument):
        raise MergeError(f"expected raw entries (RawBSONDocument), got {type(entry).__name__}")
    raw = entry.raw
    return raw if isinstance(raw, bytes) else bytes(raw)
