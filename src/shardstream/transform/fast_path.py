"""Layer 2, fast path: raw oplog entries to BSON events without decoding what passes through.

The hot case -- an insert, ``$v:2`` update or delete of a document keyed by an
ObjectId ``_id``, alone or in a simple committed transaction, on a stream with
default options -- is written straight from the entry's bytes (:mod:`raw_entry`
finds the fields, :mod:`event_templates` and :mod:`raw_event_writer` write the
event, :mod:`fast_transaction` unwinds transactions).  Every other entry (DDL,
transaction chains, no-ops with an ``o2``, other document keys, unusual fields) is
decoded and run through the reference
:class:`ShardPipeline`, in the same order, so output and pipeline state are exactly
what the reference path alone would produce.  Tests compare both byte for byte.
"""

from __future__ import annotations

import struct
from typing import Any, Final

import bson
from bson.errors import BSONError
from bson.timestamp import Timestamp

from shardstream.errors import OplogError
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.transform import fields as f
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.event_templates import (
    DELETE,
    INSERT,
    NOT_BUILT,
    OPERATION_TYPES,
    UPDATE,
    EventTemplates,
)
from shardstream.transform.fast_transaction import (
    NOT_LAID_OUT,
    laid_out_transaction_events,
    transaction_events,
)
from shardstream.transform.options import ChangeStreamOptions
from shardstream.transform.pipeline import ShardPipeline
from shardstream.transform.raw_entry import (
    DELETE_LAYOUT,
    DELETE_TAIL,
    KEYED_WRITE_LAYOUT,
    KEYED_WRITE_TAIL,
    NOOP_LAYOUT,
    NS,
    OBJECT,
    OBJECT2,
    OP,
    TS,
    UI,
    WALL,
    scan_entry,
)
from shardstream.transform.raw_event_writer import (
    OBJECT_ID_KEY_HEADER,
    OBJECT_ID_KEY_SIZE,
    CrudEventTemplate,
    encode_event_document,
    write_crud_event,
)
from shardstream.transform.raw_update_description import update_description_bytes
from shardstream.transform.unwind_transaction import TransactionHistory

# struct's unpack_from reads in place: no slice, about half the cost of int.from_bytes.
_read_int32: Final = struct.Struct("<i").unpack_from
_read_uint64: Final = struct.Struct("<Q").unpack_from  # a Timestamp's 8 bytes: inc, time
_NOOP: Final = 0x6E  # n
_KEYED_WRITES: Final = frozenset((INSERT, UPDATE))
# In mongod's CRUD layout o's value starts at 50 + the ns string's length (int32 at 18):
# 4 (document length) + 10 (op) + 4 + 4 + ns + 25 (ui) + 3 ("\x03o\x00").
_HEAD_END: Final = 50
_SHORTEST_CRUD: Final = 120  # below any entry of that layout; keeps the int32 read in bounds
_OBJECT_FIELD: Final = b"\x03o\x00"
_KEYED_TAIL_SIZE: Final = 75  # o2 = {_id: ObjectId} (4 + 22), ts, t, v, wall, final NUL (49)
_COMMAND: Final = 0x63  # c
_OTHER_LAYOUT: Final = NOT_LAID_OUT
_SHORT_OP: Final = b"\x02\x00\x00\x00"  # a one-character op string's length
_OID_ID_ELEMENT: Final = b"\x07_id\x00"
_NEW_SHARD_EVENTS: Final = frozenset({f.NEW_SHARD_DETECTED, f.NEW_SHARD_DETECTED_LEGACY})


def fast_path_applies(options: ChangeStreamOptions) -> bool:
    """Whether a stream with ``options`` can take the fast path for its CRUD entries.

    Options that change CRUD events (expanded events, raw update descriptions, images,
    split events) or that need tokens compared (resuming) keep the reference path.
    """
    return (
        not options.show_expanded_events
        and not options.show_raw_update_description
        and options.full_document == "default"
        and options.full_document_before_change == "off"
        and not options.split_large_events
        and options.resume_token is None
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
    """

    def __init__(
        self,
        options: ChangeStreamOptions,
        *,
        single_shard: bool = True,
        history: TransactionHistory | None = None,
        name: str = "<oplog>",
    ) -> None:
        self.reference = ShardPipeline(options, history=history, single_shard=single_shard)
        self.enabled = fast_path_applies(options)
        self.name = name
        self._options = options
        self._single_shard = single_shard
        self._templates = EventTemplates(options)
        start = options.start_at_operation_time
        self._start = ts_key(start) if start is not None else -1
        self._offset = 0  # the file offset of the current batch's first entry
        self._batch: list[bytes] = []
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

    @property
    def closed(self) -> bool:
        """True after an invalidate: nothing more comes from this shard."""
        return self.reference.closed

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
        docs: list[bytes],
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
            last: the ts (as an int) of the entry before ``docs``, to check that ts
                increases from entry to entry, as a shard of a merged stream must (see
                ``FileOplogSource``); None: not checked.

        Raises:
            OplogError: an entry is not valid BSON, or its ts does not increase.
            TransformError: an entry the server would fail on.
        """
        self._batch = docs
        ts = -1
        by_layout = self._by_layout
        check = last is not None
        previous = last if last is not None else -1
        for doc in docs:
            if self._fast:
                ts = by_layout(doc, keys, events)
                if ts < 0:
                    ts = self._other(doc, ts, keys, events)
            elif self.reference.closed:
                break
            else:
                ts = self._reference_entry(doc, keys, events)
            if check:
                if ts <= previous and not self.reference.closed:
                    raise OplogError(
                        f"shard {self.name!r}: expected ts to increase, got "
                        f"{timestamp_of(ts)!r} after {timestamp_of(previous)!r}"
                    )
                previous = ts
        else:
            self._entries += len(docs)
            self._offset += sum(map(len, docs))
            return ts
        # Closed by an invalidate: the rest of the batch is never read.
        self._entries += _index_of(docs, doc)
        return ts

    def _other(self, doc: bytes, ts: int, keys: list[bytes], events: list[bytes]) -> int:
        """An entry _by_layout did not write: another layout, or the reference path."""
        if ts == _OTHER_LAYOUT:
            slots = scan_entry(doc)
            ts = self._by_slots(doc, slots, keys, events) if slots is not None else -1
            if ts >= 0:
                return ts
        return self._reference_entry(doc, keys, events)

    def _reference_entry(self, doc: bytes, keys: list[bytes], events: list[bytes]) -> int:
        self.reference_entries += 1
        ts = self._reference(doc, keys, events)
        if self.reference.closed:
            self._fast = False
        return ts

    def _by_layout(self, doc: bytes, keys: list[bytes], events: list[bytes]) -> int:
        """The common layouts, matched in one call; _OTHER_LAYOUT if ``doc`` has another."""
        if len(doc) < 13:
            return _OTHER_LAYOUT
        if doc[4] == 0x03:  # a session's lsid first: a transaction, or a retryable write
            return laid_out_transaction_events(doc, self._templates, self._start, keys, events)
        op = doc[12]  # the op character, if op is the first field
        description = b""
        head_end = _HEAD_END + _read_int32(doc, 18)[0] if len(doc) > _SHORTEST_CRUD else 0
        template = self._templates.by_head.get(doc[4:head_end], NOT_BUILT)
        if template is not NOT_BUILT:
            # A known op-ns-ui run: o's value starts at head_end; only o and the fixed
            # tail after it are left to frame (about half the cost of the whole match).
            if op == DELETE:
                match = DELETE_TAIL.fullmatch(doc, head_end)
                if match is None:
                    return _OTHER_LAYOUT
                key, ts_value, wall_value = match.groups()
                o = key
            else:
                # The tail has a fixed size, so o ends where it begins; o's own length
                # must say so (else let scan_entry frame the entry by its lengths).
                o_end = len(doc) - _KEYED_TAIL_SIZE
                if o_end < head_end + 5 or _read_int32(doc, head_end)[0] != o_end - head_end:
                    return _OTHER_LAYOUT
                match = KEYED_WRITE_TAIL.fullmatch(doc, o_end)
                if match is None:
                    return _OTHER_LAYOUT
                key, ts_value, wall_value = match.groups()
                o = doc[head_end:o_end]
                if o[-1]:
                    return -1
        elif op in _KEYED_WRITES:
            match = KEYED_WRITE_LAYOUT.fullmatch(doc, 4)
            if match is None:
                return _OTHER_LAYOUT
            run, o, key, ts_value, wall_value = match.groups()
            if o[-1] or _read_int32(o)[0] != len(o):
                return -1
            template = self._template_of(run)
        elif op == DELETE:
            match = DELETE_LAYOUT.fullmatch(doc, 4)
            if match is None:
                return _OTHER_LAYOUT
            run, key, ts_value, wall_value = match.groups()
            o = key
            template = self._template_of(run)
        elif op == _NOOP:
            match = NOOP_LAYOUT.fullmatch(doc, 4)
            if match is None:
                return _OTHER_LAYOUT
            o, ts_value = match.groups()
            if o[-1] or _read_int32(o)[0] != len(o):
                return -1
            # Every arm of the oplog filter that takes a no-op reads its o2; without one it
            # yields nothing, and transaction bookkeeping only looks at op "c".
            return _read_uint64(ts_value)[0]  # type: ignore[no-any-return]
        else:
            if op == _COMMAND:  # a transaction without a session's fields
                return laid_out_transaction_events(doc, self._templates, self._start, keys, events)
            return _OTHER_LAYOUT
        ts: int = _read_uint64(ts_value)[0]
        if ts < self._start:
            return ts  # before the stream's start: filtered out
        if not isinstance(template, CrudEventTemplate):
            return -1
        if not template.matched:
            return ts
        if op == UPDATE:
            update = update_description_bytes(o)
            if update is None:
                return -1
            description = update
        sort_key, event = write_crud_event(
            template, ts, ts_value, wall_value, o if op == INSERT else None, key, description
        )
        keys.append(sort_key)
        events.append(event)
        return ts

    def _template_of(self, run: bytes) -> CrudEventTemplate | None:
        """The template of a run the full layout matched; also cached by its head."""
        templates = self._templates
        template = templates.by_run.get(run, NOT_BUILT)
        if template is NOT_BUILT:
            template = templates.build_for_run(run)
        templates.by_head[run + _OBJECT_FIELD] = template  # type: ignore[assignment]
        return template  # type: ignore[return-value]

    def _by_slots(
        self, doc: bytes, slots: list[int], keys: list[bytes], events: list[bytes]
    ) -> int:
        """Any other layout, from scan_entry's offsets; -1 sends ``doc`` to the reference."""
        at = slots[OP]
        ts_at = slots[TS]
        if at < 0 or ts_at < 0 or doc[at] != 0x02 or doc[ts_at] != 0x11:
            return -1
        if doc[at + 4 : at + 8] != _SHORT_OP:
            return -1
        op = doc[at + 8]
        ts_value = doc[ts_at + 4 : ts_at + 12]
        ts = int.from_bytes(ts_value, "little")
        if op == _NOOP:
            return ts if slots[OBJECT2] < 0 else -1  # see _by_layout
        if op == _COMMAND:
            return transaction_events(doc, self._templates, self._start, keys, events)
        if op not in OPERATION_TYPES:
            return -1
        if ts < self._start:
            return ts
        at = slots[NS]
        if at < 0 or doc[at] != 0x02:
            return -1
        ns = doc[at + 8 : at + 7 + int.from_bytes(doc[at + 4 : at + 8], "little")]
        at = slots[UI]
        # ui: BinData of 16 bytes, subtype 4 (the element's value is length, subtype, bytes)
        if at < 0 or doc[at] != 0x05 or doc[at + 4 : at + 9] != b"\x10\x00\x00\x00\x04":
            return -1
        parts = (ns, doc[at + 9 : at + 25], op, 0)
        template = self._templates.by_parts.get(parts, NOT_BUILT)
        if template is NOT_BUILT:
            template = self._templates.build_for_parts(*parts)
        if not isinstance(template, CrudEventTemplate):
            return -1
        if not template.matched:
            return ts
        at = slots[WALL]
        if at < 0 or doc[at] != 0x09:
            return -1
        wall_value = doc[at + 6 : at + 14]
        at = slots[OBJECT]
        if at < 0 or doc[at] != 0x03:
            return -1
        o = doc[at + 3 : at + 3 + int.from_bytes(doc[at + 3 : at + 7], "little")]
        if not o or o[-1] != 0:
            return -1
        description = b""
        if op == INSERT:  # documentKey is o2, or {_id: o._id} in older oplogs
            at = slots[OBJECT2]
            if at >= 0:
                key = _object_id_key(doc, at)
            elif o[4:9] == _OID_ID_ELEMENT:
                key = OBJECT_ID_KEY_HEADER + o[9:21] + b"\x00"
            else:
                return -1
        elif op == DELETE:  # documentKey is o
            key = o if len(o) == OBJECT_ID_KEY_SIZE and o[:9] == OBJECT_ID_KEY_HEADER else b""
        else:
            at = slots[OBJECT2]
            key = _object_id_key(doc, at) if at >= 0 else b""
            update = update_description_bytes(o)
            if update is None:
                return -1
            description = update
        if not key:
            return -1
        sort_key, event = write_crud_event(
            template, ts, ts_value, wall_value, o if op == INSERT else None, key, description
        )
        keys.append(sort_key)
        events.append(event)
        return ts

    def _reference(self, doc: bytes, keys: list[bytes], events: list[bytes]) -> int:
        try:
            entry: dict[str, Any] = bson.decode(doc, codec_options=OPLOG_CODEC_OPTIONS)
        except (BSONError, ValueError, OverflowError) as exc:
            batch = self._batch
            offset = self._offset + sum(map(len, batch[: _index_of(batch, doc)]))
            raise OplogError(f"corrupt BSON entry in {self.name} at byte {offset}: {exc}") from exc
        for event in self.reference.process(entry):
            kind = event.operation_type
            if not self._single_shard:
                # The router's rules, per event: they commute with the merge.
                if kind in _NEW_SHARD_EVENTS:
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
            events.append(encode_event_document(event.document))
        ts = entry.get("ts")
        return ts_key(ts) if isinstance(ts, Timestamp) else -1


def _index_of(docs: list[bytes], doc: bytes) -> int:
    """Where ``doc`` (the object itself) is in ``docs``: only on rare paths (errors, the end)."""
    return next(i for i, other in enumerate(docs) if other is doc)


def timestamp_of(ts: int) -> Timestamp | None:
    """The Timestamp of :func:`ts_key`'s integer; None for -1 (an entry without a ts)."""
    return Timestamp(ts >> 32, ts & 0xFFFFFFFF) if ts >= 0 else None


def _object_id_key(doc: bytes, at: int) -> bytes:
    """The o2 document at element ``at`` if it is exactly ``{_id: ObjectId}``, else b""."""
    if doc[at] != 0x03 or doc[at + 4 : at + 13] != OBJECT_ID_KEY_HEADER:
        return b""
    key = doc[at + 4 : at + 4 + OBJECT_ID_KEY_SIZE]
    return key if key[-1] == 0 else b""
