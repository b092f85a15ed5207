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
from shardstream.transform import ChangeEvent, ChangeStreamOptions
from shardstream.transform.raw.pipeline import FastShardPipeline, fast_path_applies, ts_key


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
        events: list[ChangeEvent] = []
        pipeline = self._pipeline
        if raws and not pipeline.closed:
            events = self._events(raws, -1 if floor is None else ts_key(floor))
        promise = self._promise.advance(events, batch.promise, pipeline.closed)
        return ShardBatch(events, promise, batch.exhausted or pipeline.closed)

    def _events(self, entries: Sequence[bytes], floor: int) -> list[ChangeEvent]:
        """The batch's events: fast ones encoded, the reference's as it built them."""
        pipeline = self._pipeline
        kept: list[tuple[int, ChangeEvent]] = []
        pipeline.reference_events = kept
        diffs: list[tuple[int, bytes]] = []
        pipeline.update_diffs = diffs
        keys: list[bytes] = []
        raws: list[bytes] = []
        pipeline.process_batch(entries, keys, raws, last=floor)
        shard = self.source.name
        events: list[ChangeEvent]
        if not kept:
            events = [EncodedEvent(raw, key, shard) for key, raw in zip(keys, raws, strict=True)]
        else:
            by_index = dict(kept)
            events = []
            for index, (key, raw) in enumerate(zip(keys, raws, strict=True)):
                if raw:
                    events.append(EncodedEvent(raw, key, shard))
                else:
                    event = by_index[index]
                    event.shard = shard
                    events.append(event)
        # As on the reference path, an update carries its entry's o (see ChangeEvent).
        for index, o in diffs:
            events[index].raw_update = RawBSONDocument(o)
        return events


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


def _raw(entry: Mapping[str, Any]) -> bytes:
    if not isinstance(entry, RawBSONDocument):
        raise MergeError(f"expected raw entries (RawBSONDocument), got {type(entry).__name__}")
    raw = entry.raw
    return raw if isinstance(raw, bytes) else bytes(raw)
