"""Fast path: where the few fields a CRUD event needs sit in a raw oplog entry.

The fast path never decodes an entry to Python values.  It walks the entry's
top-level elements once (type byte, name, value size), remembers where ``op``,
``ns``, ``ui``, ``o``, ``o2``, ``ts`` and ``wall`` are, and leaves every value
where it is, so the event can copy the bytes.  Anything unusual -- a field the
reference pipeline would read that the fast path does not handle, a repeated
field, an element type it cannot size -- yields ``None``, and the caller sends the
entry down the reference pipeline instead.

Complexity: O(number of top-level fields) per entry; nothing nested is visited.
"""

from __future__ import annotations

import re
import struct
from typing import Final

_INT32: Final = struct.Struct("<i")

# Value sizes of the fixed-width BSON types, by type byte.
_FIXED_SIZES: Final = {
    0x01: 8, 0x06: 0, 0x07: 12, 0x08: 1, 0x09: 8, 0x0A: 0,
    0x10: 4, 0x11: 8, 0x12: 8, 0x13: 16, 0x7F: 0, 0xFF: 0,
}  # fmt: skip
_STRING_LIKE: Final = frozenset((0x02, 0x0D, 0x0E))
_LENGTH_PREFIXED: Final = frozenset((0x03, 0x04, 0x0F))

# The slots a CRUD event reads, by field name.  An element's slot holds the offset of
# its type byte; the value starts after the name's NUL (offset 1 + len(name) + 1).
OP: Final = 0
NS: Final = 1
UI: Final = 2
OBJECT: Final = 3  # o
OBJECT2: Final = 4  # o2
TS: Final = 5
WALL: Final = 6
_SLOTS: Final = {
    b"op": OP,
    b"ns": NS,
    b"ui": UI,
    b"o": OBJECT,
    b"o2": OBJECT2,
    b"ts": TS,
    b"wall": WALL,
}

# Fields the reference pipeline reads on a CRUD entry with effects the fast path does not
# reproduce (migration filter, transaction op index, image keys, commit time): with any
# of them the entry takes the reference path.
_REFERENCE_ONLY: Final = frozenset(
    (b"fromMigrate", b"txnOpIndex", b"applyOpsTs", b"applyOpsIndex", b"commitTimestamp")
)


# The layout mongod writes for a CRUD entry outside a session (repl/oplog_entry.idl
# order), matched in one C call: op, ns, ui (UUID), o, o2 = {_id: ObjectId}, ts, t, v,
# wall.  Group 1 runs from op through ui: the key of the event template.  Only one part
# (o) has a free length, and everything after it has a fixed size up to the end, so the
# split is unique; the caller checks o's own length prefix and the ns length inside
# group 1 (once per template).  Entries laid out any other way take scan_entry.
_HEAD: Final = (
    rb"(\x02op\x00\x02\x00\x00\x00%s\x00\x02ns\x00.{4}[^\x00]*\x00"
    rb"\x05ui\x00\x10\x00\x00\x00\x04.{16})"
)
_OBJECT_ID_KEY: Final = rb"(\x16\x00\x00\x00\x07_id\x00.{12}\x00)"
_TAIL: Final = rb"\x11ts\x00(.{8})\x12t\x00.{8}\x12v\x00.{8}\x09wall\x00(.{8})\x00"
# insert / update: (template key, o, documentKey, ts, wall)
KEYED_WRITE_LAYOUT: Final = re.compile(
    _HEAD % rb"[iu]" + rb"\x03o\x00(.*)\x03o2\x00" + _OBJECT_ID_KEY + _TAIL, re.DOTALL
)
# delete: (template key, o = documentKey, ts, wall)
DELETE_LAYOUT: Final = re.compile(_HEAD % rb"d" + rb"\x03o\x00" + _OBJECT_ID_KEY + _TAIL, re.DOTALL)
# An op inside applyOps, its document's elements only (no length prefix, no final NUL):
# insert / update with o2 = {_id: ObjectId}: (template key, o, documentKey); delete:
# (template key, o = documentKey).
OP_IN_APPLY_OPS_LAYOUT: Final = re.compile(
    _HEAD % rb"[iu]" + rb"\x03o\x00(.*)\x03o2\x00" + _OBJECT_ID_KEY, re.DOTALL
)
DELETE_IN_APPLY_OPS_LAYOUT: Final = re.compile(
    _HEAD % rb"d" + rb"\x03o\x00" + _OBJECT_ID_KEY, re.DOTALL
)
# What follows o in those layouts, once o's end is known from its length prefix (the
# template cache has already vouched for everything before o): (documentKey, ts, wall).
KEYED_WRITE_TAIL: Final = re.compile(rb"\x03o2\x00" + _OBJECT_ID_KEY + _TAIL, re.DOTALL)
DELETE_TAIL: Final = re.compile(_OBJECT_ID_KEY + _TAIL, re.DOTALL)
# The tail of a transaction entry after o (and prevOpTime): (ts, wall).
TRANSACTION_TAIL: Final = re.compile(_TAIL, re.DOTALL)
# a no-op without o2 (the periodic noop): (o, ts); it yields no event.
NOOP_LAYOUT: Final = re.compile(
    rb"\x02op\x00\x02\x00\x00\x00n\x00\x02ns\x00.{4}[^\x00]*\x00\x03o\x00(.*)"
    rb"\x11ts\x00(.{8})\x12t\x00.{8}\x12v\x00.{8}\x09wall\x00.{8}\x00",
    re.DOTALL,
)


def value_size(doc: bytes, kind: int, at: int) -> int | None:
    """The size of the value of type ``kind`` at ``doc[at]``; None for a type not sized here.

    Raises:
        struct.error: a length prefix runs off the end.
    """
    size = _FIXED_SIZES.get(kind)
    if size is not None:
        return size
    if kind in _STRING_LIKE:
        size = 4 + int(_INT32.unpack_from(doc, at)[0])
    elif kind in _LENGTH_PREFIXED:
        size = int(_INT32.unpack_from(doc, at)[0])
    elif kind == 0x05:
        size = 5 + int(_INT32.unpack_from(doc, at)[0])
    else:
        return None  # regex, DBPointer, or not BSON: let the decoder judge
    return size if size >= 0 else None


def elements(doc: bytes, at: int) -> list[tuple[int, bytes, int, int]] | None:
    """(type, name, value start, value end) of each element of the document at ``doc[at]``.

    None when the document is malformed or holds a type not sized here.
    """
    try:
        end = at + int(_INT32.unpack_from(doc, at)[0]) - 1
        if end >= len(doc) or end < at + 4 or doc[end] != 0:
            return None
        found = []
        fixed = _FIXED_SIZES
        pos = at + 4
        while pos < end:
            kind = doc[pos]
            name_end = doc.index(0, pos + 1, end)
            size = fixed.get(kind)
            if size is None:
                size = value_size(doc, kind, name_end + 1)
                if size is None:
                    return None
            value_end = name_end + 1 + size
            found.append((kind, doc[pos + 1 : name_end], name_end + 1, value_end))
            pos = value_end
    except (ValueError, IndexError, struct.error):
        return None
    return found if pos == end else None


def scan_entry(doc: bytes) -> list[int] | None:
    """Return the offsets of the CRUD slots in ``doc`` (one whole BSON document).

    A missing field's slot is -1.  Returns None when the entry needs the reference
    pipeline (see the module docstring); the bytes themselves are validated by whoever
    decodes them on that path, so a malformed entry is reported there.
    """
    end = len(doc) - 1
    if end < 4 or _INT32.unpack_from(doc)[0] != len(doc) or doc[end] != 0:
        return None
    slots = [-1, -1, -1, -1, -1, -1, -1]
    pos = 4
    fixed = _FIXED_SIZES
    slot_of = _SLOTS
    try:
        while pos < end:
            kind = doc[pos]
            name_end = doc.index(0, pos + 1, end)
            value = name_end + 1
            size = fixed.get(kind)
            if size is None:
                size = value_size(doc, kind, value)
                if size is None:
                    return None
            name = doc[pos + 1 : name_end]
            slot = slot_of.get(name)
            if slot is not None:
                if slots[slot] != -1:
                    return None  # a repeated field: a decoded dict keeps the last one
                slots[slot] = pos
            elif name in _REFERENCE_ONLY:
                return None
            if size < 0:
                return None
            pos = value + size
    except (ValueError, IndexError, struct.error):
        return None  # a length that runs off the end
    if pos != end:
        return None
    return slots
