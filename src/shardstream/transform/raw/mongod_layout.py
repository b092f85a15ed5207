"""Fast path: a CRUD entry or transaction in mongod's own field order.

mongod writes every CRUD entry outside a session as op, ns, ui, o, o2, ts, t, v, wall
(``repl/oplog_entry.idl``), and a committed transaction as lsid, txnNumber, op, ns, o,
prevOpTime, ts, t, v, wall.  Those layouts are matched here with one regex each
(:mod:`oplog_entry`); once a match has accepted an entry's bytes up to ``o``'s value (the
"head"), the template is also cached by those bytes, so a later entry with an equal head
needs only ``o``'s length prefix and one regex over its fixed-size tail.  A head can only be
equal if its ns length field agrees with its length, so a hit proves what the whole match
would have.  This is the hot loop of the fast path: per entry it is a handful of C calls.

Bytes are copied only once ``bson_check`` vouches for them: the whole entry on a full match
(so only checked heads are cached), and then, for an entry whose head is cached, its ``o``
alone -- the fixed-size tail after it holds fixed, valid fields.  Else -1: the reference path.
"""

from __future__ import annotations

import struct
from typing import Final

from shardstream.oplog.bson_depth import MAX_NESTING
from shardstream.transform.raw.bson_check import valid_entry
from shardstream.transform.raw.event_templates import (
    COMMAND,
    DELETE,
    INSERT,
    NOOP,
    NOT_BUILT,
    UPDATE,
    EventTemplates,
)
from shardstream.transform.raw.event_writer import CrudEventTemplate, write_crud_event
from shardstream.transform.raw.oplog_entry import (
    DELETE_LAYOUT,
    DELETE_TAIL,
    KEYED_WRITE_LAYOUT,
    KEYED_WRITE_TAIL,
    NOOP_LAYOUT,
)
from shardstream.transform.raw.transaction_events import NOT_LAID_OUT, laid_out_transaction_events

# struct's unpack_from reads in place: no slice, about half the cost of int.from_bytes.
_read_int32: Final = struct.Struct("<i").unpack_from
_read_uint64: Final = struct.Struct("<Q").unpack_from  # a Timestamp's 8 bytes: inc, time
_KEYED_WRITES: Final = frozenset((INSERT, UPDATE))
# In mongod's CRUD layout o's value starts at 50 + the ns string's length (int32 at 18):
# 4 (document length) + 10 (op) + 4 + 4 + ns + 25 (ui) + 3 ("\x03o\x00").
_HEAD_END: Final = 50
_SHORTEST_CRUD: Final = 120  # below any entry of that layout; keeps the int32 read in bounds
_OBJECT_FIELD: Final = b"\x03o\x00"
_O2_FIELD: Final = b"\x03o2\x00"
_KEYED_TAIL_SIZE: Final = 75  # o2 = {_id: ObjectId} (4 + 22), ts, t, v, wall, final NUL (49)
_O_NESTING: Final = MAX_NESTING - 1  # o sits one level below the entry's top


def mongod_layout_events(
    doc: bytes, templates: EventTemplates, start: int, keys: list[bytes], events: list[bytes]
) -> int:
    """Write the events of ``doc`` if it is in one of mongod's layouts; return its ts.

    Returns NOT_LAID_OUT for another layout (:func:`any_layout_events` reads it), -1
    for the reference path.  ``start``: the stream's start as a ts integer.
    """
    if len(doc) < 13:
        return NOT_LAID_OUT
    if doc[4] == 0x03:  # a session's lsid first: a transaction, or a retryable write
        if not valid_entry(doc):
            return -1
        return laid_out_transaction_events(doc, templates, start, keys, events)
    op = doc[12]  # the op character, if op is the first field
    description = b""
    head_end = _HEAD_END + _read_int32(doc, 18)[0] if len(doc) > _SHORTEST_CRUD else 0
    template = templates.by_head.get(doc[4:head_end], NOT_BUILT)
    if template is not NOT_BUILT:
        # A known op-ns-ui run: o's value starts at head_end; only o and the fixed
        # tail after it are left to frame (about half the cost of the whole match).
        if op == DELETE:
            match = DELETE_TAIL.fullmatch(doc, head_end)
            if match is None:
                return NOT_LAID_OUT
            key, ts_value, wall_value = match.groups()
            o = key
        else:
            # The tail has a fixed size, so o ends where it begins; o's own length
            # must say so (else let scan_entry frame the entry by its lengths).
            o_end = len(doc) - _KEYED_TAIL_SIZE
            if o_end < head_end + 5 or _read_int32(doc, head_end)[0] != o_end - head_end:
                return NOT_LAID_OUT
            match = KEYED_WRITE_TAIL.fullmatch(doc, o_end)
            if match is None:
                return NOT_LAID_OUT
            key, ts_value, wall_value = match.groups()
            o = doc[head_end:o_end]
            # The head was checked with its namespace's first entry, and the tail's fields are
            # fixed: o is what is left to vouch for (before the start or not: one verdict).
            if o[-1] or not valid_entry(o, _O_NESTING):
                return -1
    elif op in _KEYED_WRITES:
        # Without an o2 (an insert before 6.0 writes none) the match fails only after its
        # o group has backtracked over the whole document: ~3 ms for a 400 KB one.
        if doc.find(_O2_FIELD, 4) < 0:
            return NOT_LAID_OUT
        if not valid_entry(doc):  # whole: its head is cached below for later entries
            return -1
        match = KEYED_WRITE_LAYOUT.fullmatch(doc, 4)
        if match is None:
            return NOT_LAID_OUT
        run, o, key, ts_value, wall_value = match.groups()
        if o[-1] or _read_int32(o)[0] != len(o):
            return -1
        template = _template_of(templates, run)
    elif op == DELETE:
        if not valid_entry(doc):
            return -1
        match = DELETE_LAYOUT.fullmatch(doc, 4)
        if match is None:
            return NOT_LAID_OUT
        run, key, ts_value, wall_value = match.groups()
        o = key
        template = _template_of(templates, run)
    elif op == NOOP:
        if not valid_entry(doc):  # no event, but the reference decodes it: one verdict
            return -1
        match = NOOP_LAYOUT.fullmatch(doc, 4)
        if match is None:
            return NOT_LAID_OUT
        o, ts_value = match.groups()
        if o[-1] or _read_int32(o)[0] != len(o):
            return -1
        # Every arm of the oplog filter that takes a no-op reads its o2; without one it
        # yields nothing, and transaction bookkeeping only looks at op "c".
        return _read_uint64(ts_value)[0]  # type: ignore[no-any-return]
    else:
        if op == COMMAND:  # a transaction without a session's fields
            if not valid_entry(doc):
                return -1
            return laid_out_transaction_events(doc, templates, start, keys, events)
        return NOT_LAID_OUT
    ts: int = _read_uint64(ts_value)[0]
    if ts < start:
        return ts  # before the stream's start: filtered out
    if not isinstance(template, CrudEventTemplate):
        return -1
    if not template.matched:
        return ts
    if op == UPDATE:
        update = templates.update_element(o)
        if update is None:
            return -1
        description = update
    sort_key, event = write_crud_event(
        template, ts, ts_value, wall_value, o if op == INSERT else None, key, description
    )
    keys.append(sort_key)
    if op == UPDATE and templates.update_diffs is not None:
        templates.update_diffs.append((len(events), o))
    events.append(event)
    return ts


def _template_of(templates: EventTemplates, run: bytes) -> CrudEventTemplate | None:
    """The template of a run the whole layout matched; also cached by its head."""
    template = templates.by_run.get(run, NOT_BUILT)
    if template is NOT_BUILT:
        template = templates.build_for_run(run)
    templates.by_head[run + _OBJECT_FIELD] = template  # type: ignore[assignment]
    return template  # type: ignore[return-value]
