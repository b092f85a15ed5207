"""Layer 2, fast path: raw oplog entries to BSON events without decoding what passes through.

The hot case -- an insert, ``$v:2`` update or delete of a document keyed by an
ObjectId ``_id``, on a stream with default options -- is written straight from the
entry's bytes (:mod:`raw_entry` finds the fields, :mod:`raw_event_writer` writes
the event).  Every other entry (transactions, DDL, no-ops with an ``o2``, other
document keys, unusual fields) is decoded and run through the reference
:class:`ShardPipeline`, in the same order, so output and pipeline state are exactly
what the reference path alone would produce.  Tests compare both byte for byte.
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Mapping
from typing import Any, Final

import bson
from bson.errors import BSONError
from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.errors import OplogError, TransformError
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.transform import fields as f
from shardstream.transform.oplog_match import OplogMatch
from shardstream.transform.options import ChangeStreamOptions, StreamScope
from shardstream.transform.pipeline import ShardPipeline
from shardstream.transform.raw_entry import (
    DELETE_LAYOUT,
    KEYED_WRITE_LAYOUT,
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
    update_description_element,
    write_crud_event,
)
from shardstream.transform.raw_transaction import (
    Fields,
    parse_laid_out_transaction,
    parse_transaction,
)
from shardstream.transform.raw_update_description import simple_update_description
from shardstream.transform.unwind_transaction import TransactionHistory
from shardstream.transform.view_event import VIEWS_COLLECTION

_INSERT: Final = 0x69  # i
_UPDATE: Final = 0x75  # u
_DELETE: Final = 0x64  # d
_NOOP: Final = 0x6E  # n
_COMMAND: Final = 0x63  # c
_OPERATION_TYPES: Final = {_INSERT: f.INSERT, _UPDATE: f.UPDATE, _DELETE: f.DELETE}
_OTHER_LAYOUT: Final = -2
_SHORT_OP: Final = b"\x02\x00\x00\x00"  # a one-character op string's length
_OID_ID_ELEMENT: Final = b"\x07_id\x00"
_NEW_SHARD_EVENTS: Final = frozenset({f.NEW_SHARD_DETECTED, f.NEW_SHARD_DETECTED_LEGACY})
_NOT_BUILT: Final = object()
_MISSING: Final = (0, 0, 0)  # (type, start, end) of an absent field
_UUID_HEADER: Final = b"\x10\x00\x00\x00\x04"  # BinData: 16 bytes, subtype 4


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
        self._match = OplogMatch(options)
        self._collection_scope = options.scope is StreamScope.COLLECTION
        start = options.start_at_operation_time
        self._start = ts_key(start) if start is not None else -1
        # Templates by the entry's op-ns-ui bytes (layout matches) or by (ns, ui, op).
        self._layout_templates: dict[bytes, CrudEventTemplate | None] = {}
        self._slot_templates: dict[tuple[Any, ...], CrudEventTemplate | None] = {}
        self._offset = 0
        self.fast_entries = 0
        self.reference_entries = 0
        self.invalidate_key: bytes | None = None

    @property
    def closed(self) -> bool:
        """True after an invalidate: nothing more comes from this shard."""
        return self.reference.closed

    def process(self, doc: bytes, keys: list[bytes], events: list[bytes]) -> int:
        """Append the events of entry ``doc`` (sort keys to ``keys``); return its ts as an int.

        The ts is -1 when the entry has none (the reference path reports what is wrong).

        Raises:
            OplogError: the entry is not valid BSON.
            TransformError: an entry the server would fail on.
        """
        offset = self._offset
        self._offset = offset + len(doc)
        if self.reference.closed:
            return -1
        if self.enabled:
            ts = self._by_layout(doc, keys, events)
            if ts == _OTHER_LAYOUT:
                slots = scan_entry(doc)
                ts = self._by_slots(doc, slots, keys, events) if slots is not None else -1
            if ts >= 0:
                self.fast_entries += 1
                return ts
        self.reference_entries += 1
        return self._reference(doc, offset, keys, events)

    def _by_layout(self, doc: bytes, keys: list[bytes], events: list[bytes]) -> int:
        """The common layouts, matched in one call; _OTHER_LAYOUT if ``doc`` has another."""
        if len(doc) < 13:
            return _OTHER_LAYOUT
        op = doc[12]  # the op character, if op is the first field
        description = b""
        if op in (_INSERT, _UPDATE):
            match = KEYED_WRITE_LAYOUT.fullmatch(doc, 4)
            if match is None:
                return _OTHER_LAYOUT
            ident, o, key, ts_value, wall_value = match.groups()
            if int.from_bytes(o[:4], "little") != len(o) or o[-1] != 0:
                return -1
        elif op == _DELETE:
            match = DELETE_LAYOUT.fullmatch(doc, 4)
            if match is None:
                return _OTHER_LAYOUT
            ident, key, ts_value, wall_value = match.groups()
            o = key
        elif op == _NOOP:
            match = NOOP_LAYOUT.fullmatch(doc, 4)
            if match is None:
                return _OTHER_LAYOUT
            o, ts_value = match.groups()
            if int.from_bytes(o[:4], "little") != len(o) or o[-1] != 0:
                return -1
            # Every arm of the oplog filter that takes a no-op reads its o2; without one it
            # yields nothing, and transaction bookkeeping only looks at op "c".
            return int.from_bytes(ts_value, "little")
        else:
            # A transaction starts with lsid (or op, for one without a session).
            if doc[4] == 0x03 or op == _COMMAND:
                return self._laid_out_transaction(doc, keys, events)
            return _OTHER_LAYOUT
        ts = int.from_bytes(ts_value, "little")
        if ts < self._start:
            return ts  # before the stream's start: filtered out
        template = self._layout_templates.get(ident, _NOT_BUILT)
        if template is _NOT_BUILT:
            template = self._layout_template(ident)
        if not isinstance(template, CrudEventTemplate):
            return -1
        if not template.matched:
            return ts
        if op == _UPDATE:
            update = _v2_update_description(o)
            if update is None:
                return -1
            description = update
        sort_key, event = write_crud_event(
            template, ts, ts_value, wall_value, o if op == _INSERT else None, key, description
        )
        keys.append(sort_key)
        events.append(event)
        return ts

    def _layout_template(self, ident: bytes, txn_op_index: int = 0) -> CrudEventTemplate | None:
        """The template of a layout match's op-ns-ui bytes (checks the ns length once)."""
        size = int.from_bytes(ident[14:18], "little")
        ns = ident[18 : 17 + size]
        template: CrudEventTemplate | None = None
        if size >= 1 and len(ident) == 18 + size + 25 and ident[17 + size] == 0:
            template = self._template(ns, ident[-16:], ident[8], txn_op_index)
        if txn_op_index:
            self._slot_templates[(ident, txn_op_index)] = template
        else:
            self._layout_templates[ident] = template
        return template

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
            return self._transaction(doc, keys, events)
        if op not in _OPERATION_TYPES:
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
        ident = (ns, doc[at + 9 : at + 25], op)
        template = self._slot_templates.get(ident, _NOT_BUILT)
        if template is _NOT_BUILT:
            template = self._slot_templates[ident] = self._template(*ident)
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
        if op == _INSERT:  # documentKey is o2, or {_id: o._id} in older oplogs
            at = slots[OBJECT2]
            if at >= 0:
                key = _object_id_key(doc, at)
            elif o[4:9] == _OID_ID_ELEMENT:
                key = OBJECT_ID_KEY_HEADER + o[9:21] + b"\x00"
            else:
                return -1
        elif op == _DELETE:  # documentKey is o
            key = o if len(o) == OBJECT_ID_KEY_SIZE and o[:9] == OBJECT_ID_KEY_HEADER else b""
        else:
            at = slots[OBJECT2]
            key = _object_id_key(doc, at) if at >= 0 else b""
            update = _v2_update_description(o)
            if update is None:
                return -1
            description = update
        if not key:
            return -1
        sort_key, event = write_crud_event(
            template, ts, ts_value, wall_value, o if op == _INSERT else None, key, description
        )
        keys.append(sort_key)
        events.append(event)
        return ts

    def _laid_out_transaction(self, doc: bytes, keys: list[bytes], events: list[bytes]) -> int:
        """A simple committed transaction in mongod's layout; _OTHER_LAYOUT if not one."""
        parsed = parse_laid_out_transaction(doc)
        if parsed is None:
            return _OTHER_LAYOUT
        leading, ts_value, wall_value, ops = parsed
        ts = int.from_bytes(ts_value, "little")
        if ts < self._start:
            return ts
        new_keys: list[bytes] = []
        new_events: list[bytes] = []
        templates = self._slot_templates
        for index, (ident, o, key) in enumerate(ops):
            template = (
                self._layout_templates.get(ident, _NOT_BUILT)
                if index == 0
                else templates.get((ident, index), _NOT_BUILT)
            )
            if template is _NOT_BUILT:
                template = self._layout_template(ident, index)
            if not isinstance(template, CrudEventTemplate):
                return -1
            if not template.matched:
                continue
            op = ident[8]
            description = b""
            if op == _UPDATE:
                update = _v2_update_description(o)
                if update is None:
                    return -1
                description = update
            elif int.from_bytes(o[:4], "little") != len(o) or o[-1] != 0:
                return -1
            sort_key, event = write_crud_event(
                template,
                ts,
                ts_value,
                wall_value,
                o if op == _INSERT else None,
                key,
                description,
                leading,
            )
            new_keys.append(sort_key)
            new_events.append(event)
        keys += new_keys
        events += new_events
        return ts

    def _transaction(self, doc: bytes, keys: list[bytes], events: list[bytes]) -> int:
        """A simple committed transaction's events; -1 sends ``doc`` to the reference."""
        txn = parse_transaction(doc)
        if txn is None:
            return -1
        ts = int.from_bytes(txn.ts, "little")
        if ts < self._start:
            return ts
        new_keys: list[bytes] = []
        new_events: list[bytes] = []
        for index, op in enumerate(txn.ops):
            kind, at, end = op.get(b"op", _MISSING)
            op_value = doc[at:end]
            if kind != 0x02 or len(op_value) != 6 or op_value[4] not in _OPERATION_TYPES:
                return -1  # not CRUD (a command inside, or a no-op: an error)
            ns_kind, at, end = op.get(b"ns", _MISSING)
            ui_kind, ui_at, ui_end = op.get(b"ui", _MISSING)
            if ns_kind != 0x02 or ui_kind != 0x05 or doc[ui_at : ui_at + 5] != _UUID_HEADER:
                return -1
            ident = (doc[at + 4 : end - 1], doc[ui_at + 5 : ui_end], op_value[4], index)
            template = self._slot_templates.get(ident, _NOT_BUILT)
            if template is _NOT_BUILT:
                template = self._slot_templates[ident] = self._template(*ident)
            if not isinstance(template, CrudEventTemplate) or len(ident[1]) != 16:
                return -1
            if not template.matched:
                continue
            o_kind, at, end = op.get(b"o", _MISSING)
            if o_kind != 0x03:
                return -1
            parts = _crud_parts(op_value[4], doc[at:end], op, doc)
            if parts is None:
                return -1
            full_document, key, description = parts
            sort_key, event = write_crud_event(
                template, ts, txn.ts, txn.wall, full_document, key, description, txn.leading
            )
            new_keys.append(sort_key)
            new_events.append(event)
        keys += new_keys
        events += new_events
        return ts

    def _template(
        self, ns: bytes, ui: bytes, op: int, txn_op_index: int = 0
    ) -> CrudEventTemplate | None:
        """A new event template; None when the reference path must decide."""
        try:
            namespace = ns.decode()
        except UnicodeDecodeError:
            return None
        # A write to system.views becomes a view event unless one collection is watched.
        if not self._collection_scope and namespace.partition(".")[2] == VIEWS_COLLECTION:
            return None
        matched = self._match.operation({"op": "i", "ns": namespace})
        version = self._options.default_token_version
        template = CrudEventTemplate(
            namespace,
            uuid_module.UUID(bytes=ui),
            _OPERATION_TYPES[op],
            version,
            matched=matched,
            txn_op_index=txn_op_index,
        )
        return template if template.token_middle is not None else None

    def _reference(self, doc: bytes, offset: int, keys: list[bytes], events: list[bytes]) -> int:
        try:
            entry: dict[str, Any] = bson.decode(doc, codec_options=OPLOG_CODEC_OPTIONS)
        except (BSONError, ValueError, OverflowError) as exc:
            raise OplogError(f"corrupt BSON entry in {self.name} at byte {offset}: {exc}") from exc
        for event in self.reference.process(entry):
            kind = event.operation_type
            if not self._single_shard:
                # The router's rules, per event: they commute with the merge.
                if kind in _NEW_SHARD_EVENTS:
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


def _crud_parts(
    op: int, o: bytes, fields: Fields, doc: bytes
) -> tuple[bytes | None, bytes, bytes] | None:
    """(fullDocument, documentKey, updateDescription) of a transaction's op, or None."""
    if int.from_bytes(o[:4], "little") != len(o):
        return None
    kind, at, end = fields.get(b"o2", _MISSING)
    o2 = doc[at:end] if kind == 0x03 else None
    if kind not in (0x03, 0):
        return None
    if op == _DELETE:
        return (None, o, b"") if _is_object_id_key(o) else None
    if op == _INSERT:
        if o2 is None and o[4:9] == _OID_ID_ELEMENT:
            o2 = OBJECT_ID_KEY_HEADER + o[9:21] + b"\x00"
        return (o, o2, b"") if o2 is not None and _is_object_id_key(o2) else None
    description = _v2_update_description(o)
    if description is None or o2 is None or not _is_object_id_key(o2):
        return None
    return None, o2, description


def _is_object_id_key(key: bytes) -> bool:
    return len(key) == OBJECT_ID_KEY_SIZE and key.startswith(OBJECT_ID_KEY_HEADER)


def _object_id_key(doc: bytes, at: int) -> bytes:
    """The o2 document at element ``at`` if it is exactly ``{_id: ObjectId}``, else b""."""
    if doc[at] != 0x03 or doc[at + 4 : at + 13] != OBJECT_ID_KEY_HEADER:
        return b""
    key = doc[at + 4 : at + 4 + OBJECT_ID_KEY_SIZE]
    return key if key[-1] == 0 else b""


def _v2_update_description(o: bytes) -> bytes | None:
    """The updateDescription element of a ``$v:2`` update, or None for any other update."""
    simple = simple_update_description(o)
    if simple is not None:
        return simple
    try:
        decoded = bson.decode(o, codec_options=OPLOG_CODEC_OPTIONS)
    except (BSONError, ValueError, OverflowError):
        return None
    version = decoded.get("$v")
    diff = decoded.get("diff")
    # As EventTransform._update: an int32/int64 2 (a double 2.0 is not), and a document diff.
    if type(version) not in (int, Int64) or version != 2 or not isinstance(diff, Mapping):
        return None
    try:
        return update_description_element(diff)
    except TransformError:
        return None  # the reference path raises it, with the entry's ts
