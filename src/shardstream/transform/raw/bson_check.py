"""Fast path: whether an oplog entry's bytes may be copied into events as they are.

The fast path writes events from the entry's bytes; the reference path decodes the entry
(``bson.decode`` with ``OPLOG_CODEC_OPTIONS``) and encodes each event from the decoded values.
For both to give one verdict -- the same events, or the same error -- an entry takes the fast
path only when :func:`valid_entry` says its bytes are what the reference would decode and write
back unchanged; anything else ("not sure") takes the reference path, whose decode reports what
is wrong (``corrupt BSON entry in <file> at byte <n>: ...``) or whose events are then the output.

:func:`valid_entry` is the compiled check (``_bson_check.c``); :func:`check_entry` is this
module's Python reference of the same rules, held to it (and to ``bson.decode`` /
``bson.encode``) by ``tests/transform/raw/test_bson_check.py``. The rules:

- lengths fit where they sit; every document and array ends in its NUL where its length says;
- strings, code, keys and regex patterns are strict UTF-8; keys and regexes are C strings
  inside their document; a bool byte is 0 or 1; binary subtype 2 repeats its length less 4;
- values that do not come back as themselves are not vouched for: undefined (decoded to
  None, written back as null), symbol (to a string), DBPointer (to a DBRef document), code with
  scope, unknown type bytes; array keys other than "0", "1", ... in order (a list is written
  back so), a key twice in one document (a dict keeps one), a ``$ref`` document (decoded as
  a DBRef) other than ``$ref`` (a string), ``$id``, ``$db`` (a string, if any), the rest, in
  that order (as a DBRef is written back), regex flags other than a subset of ``ilmsux`` in
  that order;
- nesting: at most :data:`~shardstream.oplog.bson_depth.MAX_NESTING` levels below the top
  (the server's limit; deeper entries are refused on every path, see ``bson_depth``); for a
  part of an entry, its own share of that limit.

Where it is called: ``mongod_layout`` checks only ``o`` of a CRUD entry whose other bytes a
layout match has pinned down to fixed, valid fields (its head already checked with the first
entry of its namespace); every other entry the fast path writes is checked whole.

Cost: one pass over the entry's bytes in C, about 0.1 us per 400-byte entry
(``benchmarks/README.md``, "Validating what the fast path copies").
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from shardstream.oplog.bson_depth import MAX_NESTING

try:
    from shardstream.transform.raw._ejson import valid_entry as _compiled
except ImportError:  # installed without a C compiler: the Python check runs instead
    _compiled = None  # type: ignore[assignment]

_INT32: Final = struct.Struct("<i").unpack_from
_FIXED_SIZES: Final = {
    0x01: 8, 0x09: 8, 0x11: 8, 0x12: 8, 0x10: 4, 0x07: 12, 0x13: 16, 0x0A: 0, 0x7F: 0, 0xFF: 0,
}  # fmt: skip
_FLAG_ORDER: Final = "ilmsux"


class _NotSure(Exception):
    """The bytes are not vouched for."""


def check_entry(raw: bytes, max_nesting: int = MAX_NESTING) -> bool:
    """The Python reference of :func:`valid_entry`: True only for bytes the fast path may copy.

    ``max_nesting``: how many levels below its top ``raw`` may nest (less than the entry's
    limit for a part of an entry, e.g. its ``o``, one level down).
    """
    try:
        if len(raw) < 5 or _INT32(raw)[0] != len(raw) or raw[-1] != 0:
            return False
        end = _document(raw, 0, 0, max_nesting, is_array=False)
    except _NotSure:
        return False
    return end == len(raw)


def _document(raw: bytes, start: int, level: int, limit: int, *, is_array: bool) -> int:
    """Check the document (or array) at ``start``, ``level`` below the top; return its end."""
    end: int = start + _INT32(raw, start)[0] - 1  # its final NUL (checked by the caller)
    pos = start + 4
    keys: set[bytes] = set()
    index = 0
    while pos < end:
        kind = raw[pos]
        stop = raw.find(b"\x00", pos + 1, end)
        if stop < 0:
            raise _NotSure
        name = raw[pos + 1 : stop]
        if is_array:
            if name != str(index).encode():
                raise _NotSure
            index += 1
        else:
            _utf8(name)
            if name in keys:
                raise _NotSure
            _dbref_order(name, kind, len(keys), keys)
            keys.add(name)
        pos = _value(raw, kind, stop + 1, end, level, limit)
    if pos != end:
        raise _NotSure
    if b"$ref" in keys and len(keys) < 2:
        raise _NotSure  # "$ref" without "$id"
    return end + 1


def _dbref_order(name: bytes, kind: int, index: int, keys: set[bytes]) -> None:
    """A document holding ``$ref`` decodes to a DBRef, written back ``$ref``, ``$id``,
    ``$db`` (unless null), then the rest: vouched for only when already in that order."""
    if name == b"$ref":
        if index != 0 or kind != 0x02:
            raise _NotSure
    elif b"$ref" in keys:
        if index == 1 and name != b"$id":
            raise _NotSure
        if name == b"$db" and (index != 2 or kind != 0x02):
            raise _NotSure


def _value(raw: bytes, kind: int, at: int, end: int, level: int, limit: int) -> int:
    """Check one value of type ``kind`` at ``at`` (before ``end``); return where it ends."""
    room = end - at
    size = _FIXED_SIZES.get(kind)
    if size is not None:
        pass
    elif kind == 0x08:
        if room < 1 or raw[at] > 1:
            raise _NotSure
        size = 1
    elif kind in (0x02, 0x0D):  # string, code
        if room < 5:
            raise _NotSure
        n = _INT32(raw, at)[0]
        if n < 1 or n > room - 4 or raw[at + 3 + n] != 0:
            raise _NotSure
        _utf8(raw[at + 4 : at + 3 + n])
        size = 4 + n
    elif kind in (0x03, 0x04):
        if room < 5:
            raise _NotSure
        n = _INT32(raw, at)[0]
        if n < 5 or n > room or raw[at + n - 1] != 0 or level >= limit:
            raise _NotSure
        return _document(raw, at, level + 1, limit, is_array=kind == 0x04)
    elif kind == 0x05:
        if room < 5:
            raise _NotSure
        n = _INT32(raw, at)[0]
        if n < 0 or n > room - 5:
            raise _NotSure
        if raw[at + 4] == 2 and (n < 4 or _INT32(raw, at + 5)[0] != n - 4):
            raise _NotSure
        size = 5 + n
    elif kind == 0x0B:  # regex: pattern and flags, two C strings
        stop = raw.find(b"\x00", at, end)
        flags_stop = raw.find(b"\x00", stop + 1, end) if stop >= 0 else -1
        if flags_stop < 0:
            raise _NotSure
        _utf8(raw[at:stop])
        _canonical_flags(raw[stop + 1 : flags_stop])
        size = flags_stop + 1 - at
    else:  # undefined, DBPointer, symbol, code with scope, not BSON
        raise _NotSure
    if size > room:
        raise _NotSure
    return at + size


def _utf8(text: bytes) -> None:
    try:
        text.decode()
    except UnicodeDecodeError:
        raise _NotSure from None


def _canonical_flags(flags: bytes) -> None:
    """Each of ``ilmsux`` at most once, in that order: as ``bson.encode`` writes them back."""
    last = -1
    for flag in flags:
        at = _FLAG_ORDER.find(chr(flag))
        if at <= last:
            raise _NotSure
        last = at


valid_entry: Final[Callable[..., bool]] = _compiled if _compiled is not None else check_entry
