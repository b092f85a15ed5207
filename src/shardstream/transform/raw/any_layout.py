"""Fast path: a CRUD entry whose fields are in any order, from its field offsets.

mongod writes its entries in one field order, which :mod:`pipeline` matches in one go;
entries written in another order (older servers, tools, tests) are walked once by
:func:`~shardstream.transform.raw.oplog_entry.scan_entry`, and this module writes their events
from the offsets it found -- the same events, through the same templates (looked up by
namespace, UUID and op rather than by the raw run).  Anything it cannot vouch for returns
-1 and takes the reference path.
"""

from __future__ import annotations

from typing import Final

from shardstream.transform.raw.event_templates import (
    COMMAND,
    DELETE,
    INSERT,
    NOOP,
    NOT_BUILT,
    OPERATION_TYPES,
    EventTemplates,
)
from shardstream.transform.raw.event_writer import (
    OBJECT_ID_KEY_HEADER,
    OBJECT_ID_KEY_SIZE,
    CrudEventTemplate,
    is_object_id_key,
    write_crud_event,
)
from shardstream.transform.raw.oplog_entry import NS, OBJECT, OBJECT2, OP, TS, UI, WALL
from shardstream.transform.raw.transaction_events import transaction_events

_SHORT_OP: Final = b"\x02\x00\x00\x00"  # a one-character op string's length
_OID_ID_ELEMENT: Final = b"\x07_id\x00"


def any_layout_events(
    doc: bytes,
    slots: list[int],
    templates: EventTemplates,
    start: int,
    keys: list[bytes],
    events: list[bytes],
) -> int:
    """The events of a CRUD entry in any field order; its ts, or -1 for the reference.

    ``slots`` are :func:`scan_entry`'s offsets of ``doc``'s fields; ``start`` is the
    stream's start as a ts integer (earlier entries give no event).
    """
    at = slots[OP]
    ts_at = slots[TS]
    if at < 0 or ts_at < 0 or doc[at] != 0x02 or doc[ts_at] != 0x11:
        return -1
    if doc[at + 4 : at + 8] != _SHORT_OP or doc[at + 9] != 0:
        return -1  # not a one-character op, or its terminator is missing: not valid BSON
    op = doc[at + 8]
    ts_value = doc[ts_at + 4 : ts_at + 12]
    ts = int.from_bytes(ts_value, "little")
    if op == NOOP:
        return ts if slots[OBJECT2] < 0 else -1  # see mongod_layout_events
    if op == COMMAND:
        return transaction_events(doc, templates, start, keys, events)
    if op not in OPERATION_TYPES:
        return -1
    if ts < start:
        return ts
    at = slots[NS]
    if at < 0 or doc[at] != 0x02:
        return -1
    size = int.from_bytes(doc[at + 4 : at + 8], "little")
    if size < 1 or doc[at + 7 + size] != 0:
        return -1  # the string's terminator is not where its length says: not valid BSON
    ns = doc[at + 8 : at + 7 + size]
    at = slots[UI]
    # ui: BinData of 16 bytes, subtype 4 (the element's value is length, subtype, bytes)
    if at < 0 or doc[at] != 0x05 or doc[at + 4 : at + 9] != b"\x10\x00\x00\x00\x04":
        return -1
    parts = (ns, doc[at + 9 : at + 25], op, 0)
    template = templates.by_parts.get(parts, NOT_BUILT)
    if template is NOT_BUILT:
        template = templates.build_for_parts(*parts)
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
        key = o if is_object_id_key(o) else b""
    else:
        at = slots[OBJECT2]
        key = _object_id_key(doc, at) if at >= 0 else b""
        update = templates.update_element(o)
        if update is None:
            return -1
        description = update
    if not key:
        return -1
    sort_key, event = write_crud_event(
        template, ts, ts_value, wall_value, o if op == INSERT else None, key, description
    )
    keys.append(sort_key)
    if description and templates.update_diffs is not None:
        templates.update_diffs.append((len(events), o))
    events.append(event)
    return ts


def _object_id_key(doc: bytes, at: int) -> bytes:
    """The o2 document at element ``at`` if it is exactly ``{_id: ObjectId}``, else b""."""
    key = doc[at + 4 : at + 4 + OBJECT_ID_KEY_SIZE]
    return key if doc[at] == 0x03 and is_object_id_key(key) else b""
