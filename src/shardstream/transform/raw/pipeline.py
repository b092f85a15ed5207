"""Fast path: raw oplog entries to BSON events without decoding what passes through.

The hot case -- an insert, ``$v:2`` update or delete of a document keyed by an
ObjectId ``_id``, alone or in a simple committed transaction, on a stream with
default options -- is written straight from the entry's bytes
(:mod:`mongod_layout` reads mongod's field order, :mod:`any_layout` any
other, :mod:`transaction_events` unwinds transactions; :mod:`event_templates` and
:mod:`event_writer` write the event).  Every other entry (DDL,
transaction chains, no-ops with an ``o2``, other document keys, unusual fields) is
decoded and run through the reference
:class:`ShardPipeline`, in the same order, so output and pipeline state are exactly
what the reference path alone would produce.  Tests compare both byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bson.timestamp import Timestamp

from shardstream.errors import OplogError, ShardstreamError
from shardstream.oplog.corrupt_entry import decode_entry, entry_ts
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.oplog.ts_order import OUT_OF_CLOCK_BITS, clock_limit_error, missing_ts_error
from shardstream.transform import fields as f
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.event_bson import event_bson
from shardstream.transform.event_size_limit import check_written_events
from shardstream.transform.options import ChangeStreamOptions
from shardstream.transform.pipeline import ShardPipeline
from shardstream.transform.raw.any_layout import any_layout_events
from shardstream.transform.raw.bson_check import valid_entry
from shardstream.transform.raw.event_templates import EventTemplates
from shardstream.transform.raw.mongod_layout import mongod_layout_events
from shardstream.transform.raw.oplog_entry import scan_entry
from shardstream.transform.raw.transaction_events import NOT_LAID_OUT
from shardstream.transform.stages.unwind_transaction import TransactionHistory

_OTHER_LAYOUT: Final = NOT_LAID_OUT


def fast_path_applies(options: ChangeStreamOptions) -> bool:
    """Whether a stream with ``options`` can take the fast path for its CRUD entries.

    Expanded events (``collectionUUID``) and raw update descriptions (the entry's ``o``)
    are written from the entry's bytes too; options that need another document (images),
    split events or tokens compared (resuming) keep the reference path.
    """
    return (
        not options.wants_images and not options.split_large_events and options.resume_token is None
    )


def ts_key(ts: Timestamp) -> int:
    """A Timestamp as one integer that orders like it (time, then increment)."""
    return (ts.time << 32) | ts.inc


class FastShardPipeline:
    """One shard's pipeline over raw entries: the fast path, or the reference per entry.

    Args:
        options: the stream's options.
        single_shard: the whole stream is this shard (also runs the router's stages);
            when False, the events are one shard's half of a merged stream, and the
            router's per-event rules (no new-shard events, classic events only unless
            expanded) are applied here so that events can stay encoded through the merge.
        history: older transaction entries, for the reference path.
        name: the source's name, for error messages.
        source: where the entries are read from (a file's path), for a corrupt entry's
            message, as the file reader names it; None: ``name``.
    """

    def __init__(
        self,
        options: ChangeStreamOptions,
        *,
        single_shard: bool = True,
        history: TransactionHistory | None = None,
        name: str = "<oplog>",
        source: str | None = None,
    ) -> None:
        self.reference = ShardPipeline(options, history=history, single_shard=single_shard)
        self.enabled = fast_path_applies(options)
        self.name = name
        self.source = source
        self._options = options
        self._single_shard = single_shard
        self._templates = EventTemplates(options)
        start = options.start_at_operation_time
        self._start = ts_key(start) if start is not None else -1
        self._offset = 0  # the file offset of the current batch's first entry
        self._batch: Sequence[bytes] = []
        self.reference_entries = 0
        self._entries = 0  # entries taken from batches (skipped ones after an invalidate not)
        self.invalidate_key: bytes | None = None
        # With single_shard False, set to a list to keep the reference path's events
        # as it built them, as (index in ``events``, event), with b"" in ``events``, and
        # without the router's classic-event rule: the live merge hands out their dicts,
        # whose types (FieldList, uuid) the BSON would not bring back, and runs the
        # router's stages itself.
        self.reference_events: list[tuple[int, ChangeEvent]] | None = None
        # enabled and not closed, read per entry as one attribute: closing only ever
        # happens on the reference path, which clears it.
        self._fast = self.enabled
        self._ts_checked = False  # this batch's entries must each have a Timestamp ts

    @property
    def closed(self) -> bool:
        """True after an invalidate: nothing more comes from this shard."""
        return self.reference.closed

    @property
    def update_diffs(self) -> list[tuple[int, bytes]] | None:
        """Set to a list to be told, per update event the fast path writes, (its index in
        the events list, the entry's ``o`` BSON); None: not kept.  The reference path's
        events carry their ``o`` themselves (``ChangeEvent.raw_update``)."""
        return self._templates.update_diffs

    @update_diffs.setter
    def update_diffs(self, value: list[tuple[int, bytes]] | None) -> None:
        self._templates.update_diffs = value

    @property
    def fast_entries(self) -> int:
        """How many entries the fast path wrote (the others went to the reference)."""
        return self._entries - self.reference_entries

    def process(self, doc: bytes, keys: list[bytes], events: list[bytes]) -> int:
        """Append the events of entry ``doc`` (sort keys to ``keys``); return its ts as an int.

        The ts is -1 when the entry has none (the reference path reports what is wrong).
        :meth:`process_batch` of one entry.
        """
        return self.process_batch([doc], keys, events)

    def process_batch(
        self,
        docs: Sequence[bytes],
        keys: list[bytes],
        events: list[bytes],
        *,
        last: int | None = None,
    ) -> int:
        """Append the events of the entries ``docs``, in order; return the last one's ts.

        Stops after an invalidate (see :attr:`closed`).  One loop per batch rather than a
        call per entry: the call, the offset and the counters were ~5 % of the CPU per
        entry (benchmarks/README.md, "replay").

        Args:
            docs: whole BSON documents, each cut out by its own length prefix, as the
                readers and tailers hand them out (the prefix itself is not read again).
            last: the ts (as an int) of the entry before ``docs``, to check that ts
                increases from entry to entry, as a shard of a merged stream must (see
                ``FileOplogSource``); None: not checked.

        Raises:
            OplogError: an entry is not valid BSON, or its ts does not increase.
            TransformError: an entry the server would fail on.
        """
        self._batch = docs
        ts = -1
        templates = self._templates
        start = self._start
        check = last is not None
        previous = last if last is not None else -1
        self._ts_checked = check
        first_event = len(events)
        try:
            for doc in docs:
                if self._fast:
                    ts = mongod_layout_events(doc, templates, start, keys, events)
                    if ts < 0:
                        ts = self._other(doc, ts, keys, events)
                elif self.reference.closed:
                    break
                else:
                    ts = self._reference_entry(doc, keys, events)
                if check:
                    # The entry that closes the stream is checked too (only an entry without a
                    # ts, which the reference reports itself, may close it with ts -1).
                    if (ts <= previous or ts & OUT_OF_CLOCK_BITS) and (
                        ts >= 0 or not self.reference.closed
                    ):
                        raise self._order_error(ts, previous)
                    previous = ts
            else:
                self._check_sizes(events, keys, first_event)
                self._entries += len(docs)
                self._offset += sum(map(len, docs))
                return ts
        except ShardstreamError as exc:
            self._entries += _index_of(docs, doc) + 1  # up to the entry that failed
            if check:
                # The oplog's order rule comes before the transform reads the entry, as the
                # readers check it (oplog.ts_order); the check above runs after, for speed.
                raw_ts = entry_ts(doc)
                key = ts_key(raw_ts) if raw_ts is not None else -1
                if key >= 0 and (key <= previous or key & OUT_OF_CLOCK_BITS):
                    raise self._order_error(key, previous) from exc
            # An event too large, written before the failing entry, fails the stream first.
            self._check_sizes(events, keys, first_event)
            raise
        # Closed by an invalidate: the rest of the batch is never read.
        self._check_sizes(events, keys, first_event)
        self._entries += _index_of(docs, doc)
        return ts

    def _order_error(self, ts: int, previous: int) -> OplogError:
        """The error for an entry at ``ts`` after one at ``previous`` (both as ints)."""
        if ts <= previous:
            return OplogError(
                f"shard {self.name!r}: expected ts to increase, got "
                f"{timestamp_of(ts)!r} after {timestamp_of(previous)!r}"
            )
        return clock_limit_error(f"shard {self.name!r}", timestamp_of(ts))

    def _check_sizes(self, events: list[bytes], keys: list[bytes], start: int) -> None:
        """Fail on an event from ``start`` on that the server could not serialize.

        A shard's half of a merged stream counts each event's ``$sortKey`` (its key).
        """
        check_written_events(events, None if self._single_shard else keys, start)

    def _other(self, doc: bytes, ts: int, keys: list[bytes], events: list[bytes]) -> int:
        """An entry mongod_layout_events did not write: any layout, or the reference.

        Bytes the fast path cannot vouch for (``bson_check``) take the reference path, whose
        decode gives the verdict: one verdict per entry, whatever its layout.
        """
        if ts == _OTHER_LAYOUT and valid_entry(doc):
            slots = scan_entry(doc)
            ts = (
                any_layout_events(doc, slots, self._templates, self._start, keys, events)
                if slots is not None
                else -1
            )
            if ts >= 0:
                return ts
        return self._reference_entry(doc, keys, events)

    def _reference_entry(self, doc: bytes, keys: list[bytes], events: list[bytes]) -> int:
        self.reference_entries += 1
        ts = self._reference(doc, keys, events)
        if self.reference.closed:
            self._fast = False
        return ts

    def _where(self, doc: bytes) -> tuple[str, int]:
        """(the source's name, the file offset of ``doc``) for an error message."""
        batch = self._batch
        offset = self._offset + sum(map(len, batch[: _index_of(batch, doc)]))
        return self.source or self.name, offset

    def _reference(self, doc: bytes, keys: list[bytes], events: list[bytes]) -> int:
        entry = decode_entry(doc, OPLOG_CODEC_OPTIONS, lambda: self._where(doc))
        if self._ts_checked and not isinstance(entry.get("ts"), Timestamp):
            # One oplog's rule (oplog.ts_order), before the transform sees the entry.
            raise missing_ts_error(f"shard {self.name!r}", entry.get("ts"))
        for event in self.reference.process(entry):
            kind = event.operation_type
            if not self._single_shard:
                # The router's rules, per event: they commute with the merge.
                if kind in f.NEW_SHARD_EVENTS:
                    continue
                if self.reference_events is not None:
                    # Kept whole for a merge that runs the router's stages itself.
                    self.reference_events.append((len(events), event))
                    keys.append(event.token.data.encode())
                    events.append(b"")
                    continue
                if not self._options.show_expanded_events and kind not in f.CLASSIC_OPERATION_TYPES:
                    continue
            key = event.token.data.encode()
            if kind == f.INVALIDATE:
                self.invalidate_key = key
            keys.append(key)
            events.append(event_bson(event))  # the bytes the reference's size check kept
        ts = entry.get("ts")
        return ts_key(ts) if isinstance(ts, Timestamp) else -1


def _index_of(docs: Sequence[bytes], doc: bytes) -> int:
    """Where ``doc`` (the object itself) is in ``docs``: only on rare paths (errors, the end)."""
    return next(i for i, other in enumerate(docs) if other is doc)


def timestamp_of(ts: int) -> Timestamp | None:
    """The Timestamp of :func:`ts_key`'s integer; None for -1 (an entry without a ts)."""
    return Timestamp(ts >> 32, ts & 0xFFFFFFFF) if ts >= 0 else None
