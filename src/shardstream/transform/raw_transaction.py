"""Layer 2, fast path: the ops of a simple committed transaction, from raw bytes.

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
from typing import Final

from shardstream.transform.raw_entry import elements

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
