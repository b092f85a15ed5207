"""Fast path: the ops of a simple committed transaction, from raw bytes.

The common transaction entry -- an unprepared transaction committed in one
``applyOps`` (``lsid``, ``txnNumber``, ``op: c``, ``o: {applyOps: [...]}``, a null or
missing ``prevOpTime``, no ``multiOpType``) -- needs no chain lookup and no state:
its ops become events at the entry's ``ts`` and ``wall``, each with ``txnNumber``
and ``lsid`` before ``_id`` (the reference's order) and its index in the
transaction in the token.  Anything else (chains, prepared transactions, retryable
``applyOps``, commands inside, unusual fields) returns None and takes the
reference path, which also raises the server's errors.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Final

from shardstream.transform.raw.event_writer import (
    OBJECT_ID_KEY_HEADER,
    OBJECT_ID_KEY_SIZE,
    is_object_id_key,
)
from shardstream.transform.raw.oplog_entry import (
    DELETE_IN_APPLY_OPS_LAYOUT,
    OP_IN_APPLY_OPS_LAYOUT,
    TRANSACTION_TAIL,
    elements,
)

# {ts: Timestamp(0, 0), t: NumberLong(-1)}: the prevOpTime of a transaction's first entry.
NULL_OP_TIME: Final = (
    b"\x1c\x00\x00\x00\x11ts\x00" + bytes(8) + b"\x12t\x00" + b"\xff" * 8 + b"\x00"
)
_ENTRY_FIELDS: Final = frozenset(
    (b"lsid", b"txnNumber", b"op", b"ns", b"o", b"prevOpTime", b"ts", b"t", b"v", b"wall")
)
_OP_FIELDS: Final = frozenset((b"op", b"ns", b"ui", b"o", b"o2"))

# (type, value start, value end) of an element, by field name.
Fields = dict[bytes, tuple[int, int, int]]


@dataclasses.dataclass(frozen=True, slots=True)
class RawTransaction:
    """A committed transaction's parts, as offsets into the entry's bytes.

    Attributes:
        leading: the ``txnNumber`` and ``lsid`` elements, in the order events carry them.
        ts: the entry's raw ``ts`` (8 bytes).
        wall: the entry's raw ``wall`` (8 bytes).
        ops: each op's fields, in ``applyOps`` order.
    """

    leading: bytes
    ts: bytes
    wall: bytes
    ops: list[Fields]


_LSID: Final = b"\x03lsid\x00"
_TXN_NUMBER: Final = b"\x12txnNumber\x00"
_OP_C: Final = b"\x02op\x00\x02\x00\x00\x00c\x00"
_NS: Final = b"\x02ns\x00"
_APPLY_OPS: Final = b"\x03o\x00"
_APPLY_OPS_ARRAY: Final = b"\x04applyOps\x00"
_PREV_OP_TIME: Final = b"\x03prevOpTime\x00" + NULL_OP_TIME

_read_int32: Final = struct.Struct("<i").unpack_from
_OBJECT_FIELD: Final = b"\x03o\x00"
_O2_KEY_HEADER: Final = b"\x03o2\x00" + OBJECT_ID_KEY_HEADER
_DELETE: Final = 0x64  # d
# An op's head: op (10), "\x02ns\x00" (4), ns length (4) + ns, ui (25), "\x03o\x00" (3).
_HEAD_SIZE: Final = 46
_SHORTEST_OP: Final = _HEAD_SIZE + 2 + OBJECT_ID_KEY_SIZE  # keeps the ns length read in bounds
# One op of a transaction in mongod's layout: (template key, o, documentKey) as matched by
# OP_IN_APPLY_OPS_LAYOUT / DELETE_IN_APPLY_OPS_LAYOUT (o is the documentKey for a delete).
LaidOutOp = tuple[bytes, bytes, bytes]


def parse_laid_out_transaction(
    doc: bytes, known_heads: set[bytes]
) -> tuple[bytes, bytes, bytes, list[LaidOutOp]] | None:
    """A simple committed transaction in mongod's field order: (leading, ts, wall, ops).

    lsid, txnNumber, op, ns, o: {applyOps}, prevOpTime (null), ts, t, v, wall, each op
    laid out as mongod writes it.  None for any other layout (:func:`parse_transaction`
    reads those).  ``known_heads``: the bytes of ops up to their o's value that a full
    layout match has vouched for; read and extended here (see :func:`_known_op`).
    """
    pos = 4
    leading = b""
    lsid = b""
    if doc.startswith(_LSID, pos):
        end = pos + 6 + int.from_bytes(doc[pos + 6 : pos + 10], "little")
        lsid = doc[pos:end]
        pos = end
    if doc.startswith(_TXN_NUMBER, pos):
        leading = doc[pos : pos + 19]
        pos += 19
    leading += lsid
    if not doc.startswith(_OP_C, pos) or not doc.startswith(_NS, pos + 10):
        return None
    pos += 14
    pos += 4 + int.from_bytes(doc[pos : pos + 4], "little")
    if not doc.startswith(_APPLY_OPS, pos) or not doc.startswith(_APPLY_OPS_ARRAY, pos + 7):
        return None
    o_end = pos + 3 + int.from_bytes(doc[pos + 3 : pos + 7], "little")
    array_at = pos + 17
    array_end = array_at + int.from_bytes(doc[array_at : array_at + 4], "little")
    if array_end + 1 != o_end or doc[o_end - 1] != 0 or doc[array_end - 1] != 0:
        return None  # o holds more than applyOps, or its lengths disagree
    pos = o_end + len(_PREV_OP_TIME) if doc.startswith(_PREV_OP_TIME, o_end) else o_end
    tail = TRANSACTION_TAIL.fullmatch(doc, pos)
    if tail is None:
        return None
    ops: list[LaidOutOp] = []
    pos = array_at + 4
    last = array_end - 1
    while pos < last:
        if doc[pos] != 0x03:
            return None
        at = doc.index(0, pos + 1, last) + 1  # the op document, after its index name
        end = at + _read_int32(doc, at)[0]
        if end > last or doc[end - 1] != 0:
            return None
        op = _known_op(doc, at + 4, end - 1, known_heads)
        if op is None:
            op = _laid_out_op(doc, at + 4, end - 1)
            if op is None:
                return None
            known_heads.add(op[0] + _OBJECT_FIELD)
        ops.append(op)
        pos = end
    if not ops or pos != last:
        return None
    ts, wall = tail.groups()
    return leading, ts, wall, ops


def _laid_out_op(doc: bytes, at: int, end: int) -> LaidOutOp | None:
    """The op whose elements are ``doc[at:end]``, matched as a whole."""
    match = OP_IN_APPLY_OPS_LAYOUT.fullmatch(doc, at, end)
    if match is not None:
        return match.groups()  # type: ignore[return-value]
    match = DELETE_IN_APPLY_OPS_LAYOUT.fullmatch(doc, at, end)
    if match is None:
        return None
    ident, key = match.groups()
    return ident, key, key


def _known_op(doc: bytes, at: int, end: int, known_heads: set[bytes]) -> LaidOutOp | None:
    """The same op when its bytes up to o's value are a known head; else None.

    A head (op, ns, ui, ``\x03o\x00``) equal to one the whole-op match accepted needs no
    second look; what follows o has a fixed size (``o2: {_id: ObjectId}``, or nothing
    for a delete whose o is the key), so o is framed by position, as the match would.
    """
    if end - at < _SHORTEST_OP:
        return None
    head_end = at + _HEAD_SIZE + _read_int32(doc, at + 14)[0]
    head = doc[at:head_end]
    if head not in known_heads:
        return None
    if doc[at + 8] == _DELETE:
        key = doc[head_end:end]
        if not is_object_id_key(key):
            return None
        return head[:-3], key, key
    o2_at = end - 4 - OBJECT_ID_KEY_SIZE
    if o2_at < head_end + 5 or not doc.startswith(_O2_KEY_HEADER, o2_at) or doc[end - 1]:
        return None
    return head[:-3], doc[head_end:o2_at], doc[o2_at + 4 : end]


def parse_transaction(doc: bytes) -> RawTransaction | None:
    """The parts of ``doc`` if it is a simple committed transaction, else None."""
    fields = _fields(doc, 0, _ENTRY_FIELDS)
    if fields is None or doc[fields[b"op"][1] : fields[b"op"][2]] != b"\x02\x00\x00\x00c\x00":
        return None
    if not _has(fields, b"ts", 0x11) or not _has(fields, b"wall", 0x09):
        return None
    if not _has(fields, b"o", 0x03) or not _has(fields, b"ns", 0x02):
        return None
    prev = fields.get(b"prevOpTime")
    if prev is not None and doc[prev[1] : prev[2]] != NULL_OP_TIME:
        return None  # a chain: the reference reads the earlier entries
    leading = b""
    for name, kind in ((b"txnNumber", 0x12), (b"lsid", 0x03)):
        found = fields.get(name)
        if found is not None:
            if found[0] != kind:
                return None  # the reference raises the server's error
            leading += bytes((kind,)) + name + b"\x00" + doc[found[1] : found[2]]
    o = elements(doc, fields[b"o"][1])
    if o is None or len(o) != 1 or o[0][1] != b"applyOps" or o[0][0] != 0x04:
        return None
    array = elements(doc, o[0][2])
    if not array:
        return None
    ops = []
    for kind, _, value_at, _ in array:
        op = _fields(doc, value_at, _OP_FIELDS) if kind == 0x03 else None
        if op is None:
            return None
        ops.append(op)
    ts, wall = fields[b"ts"], fields[b"wall"]
    return RawTransaction(leading, doc[ts[1] : ts[2]], doc[wall[1] : wall[2]], ops)


def _fields(doc: bytes, at: int, allowed: frozenset[bytes]) -> Fields | None:
    """The elements of the document at ``doc[at]`` by name; None if a name is not allowed."""
    found = elements(doc, at)
    if found is None:
        return None
    fields: Fields = {}
    for kind, name, value_at, value_end in found:
        if name not in allowed or name in fields:
            return None
        fields[name] = (kind, value_at, value_end)
    return fields


def _has(fields: Fields, name: bytes, kind: int) -> bool:
    found = fields.get(name)
    return found is not None and found[0] == kind
