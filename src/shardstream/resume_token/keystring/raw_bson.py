"""KeyString V1 encoding straight from raw BSON bytes (no Python values in between).

Two reasons to skip decoding: it is faster for the documentKey of every event, and
it keeps the BSON types pymongo folds together when it decodes (Symbol becomes
``str``, Undefined ``None``, DBPointer ``DBRef``), which would change the token's
type bits or CType.  The output is byte-identical to :func:`keystring.append_value`
on the decoded value wherever decoding keeps the type (property-tested).

Complexity: O(n) in the document's size.
"""

from __future__ import annotations

import struct
from typing import Final

from bson.decimal128 import Decimal128

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.keystring import ctype
from shardstream.resume_token.keystring.decimal128 import encode_decimal128
from shardstream.resume_token.keystring.numeric import (
    TYPE_INT32,
    TYPE_INT64,
    append_double,
    append_int,
)
from shardstream.resume_token.keystring.payloads import (
    append_bin_data,
    append_date,
    append_string_bytes,
)
from shardstream.resume_token.keystring.type_bits import TypeBitsWriter

_DOUBLE = struct.Struct("<d")
_INT32 = struct.Struct("<i")
_INT64 = struct.Struct("<q")
_UINT32 = struct.Struct("<I")

# The CType written before a field, by BSON element type (numbers share one, as do bools).
_GENERIC: Final = {
    0x01: ctype.NUMERIC,
    0x02: ctype.STRING_LIKE,
    0x03: ctype.OBJECT,
    0x04: ctype.ARRAY,
    0x05: ctype.BIN_DATA,
    0x06: ctype.UNDEFINED,
    0x07: ctype.OID,
    0x08: ctype.BOOL_FALSE,
    0x09: ctype.DATE,
    0x0A: ctype.NULL,
    0x0B: ctype.REGEX,
    0x0C: ctype.DB_REF,
    0x0D: ctype.CODE,
    0x0E: ctype.STRING_LIKE,
    0x0F: ctype.CODE_WITH_SCOPE,
    0x10: ctype.NUMERIC,
    0x11: ctype.TIMESTAMP,
    0x12: ctype.NUMERIC,
    0x13: ctype.NUMERIC,
    0xFF: ctype.MIN_KEY,
    0x7F: ctype.MAX_KEY,
}


def append_raw_document(out: bytearray, bits: TypeBitsWriter, raw: bytes | memoryview) -> None:
    """Append the KeyString of the BSON document ``raw`` (its whole bytes).

    Raises:
        ResumeTokenError: the bytes are not a well-formed BSON document.
    """
    view = memoryview(raw)
    if len(view) < 5 or _INT32.unpack_from(view, 0)[0] != len(view) or view[-1] != 0:
        raise ResumeTokenError(f"expected a BSON document, got {len(view)} malformed bytes")
    out.append(ctype.OBJECT)
    try:
        _append_fields(out, bits, view, 4, len(view) - 1, 0)
    except (struct.error, IndexError, ValueError) as exc:  # a length that runs off the end
        raise ResumeTokenError(f"expected a well-formed BSON document: {exc}") from exc


def _append_fields(
    out: bytearray, bits: TypeBitsWriter, view: memoryview, pos: int, end: int, depth: int
) -> int:
    """Append the fields in ``view[pos:end]`` (then the closing 00); return ``end``."""
    while pos < end:
        kind = view[pos]
        name_end = _cstring_end(view, pos + 1, end)
        generic = _GENERIC.get(kind)
        if generic is None:
            raise ResumeTokenError(f"expected a BSON element type, got {kind:#04x} at byte {pos}")
        out.append(generic)
        out += view[pos + 1 : name_end]
        out.append(0)
        pos = _append_element(out, bits, view, kind, name_end + 1, end, depth + 1)
    out.append(0)
    return end


def _append_element(
    out: bytearray,
    bits: TypeBitsWriter,
    view: memoryview,
    kind: int,
    pos: int,
    end: int,
    depth: int,
) -> int:
    """Append one element's value starting at ``pos``; return where the next begins."""
    if depth > ctype.MAX_NESTING:
        raise ResumeTokenError(f"BSON nested deeper than {ctype.MAX_NESTING} levels")
    if kind == 0x07:
        out.append(ctype.OID)
        out += view[pos : pos + 12]
        return _checked(pos + 12, end)
    if kind in (0x02, 0x0E, 0x0D):
        text, after = _string(view, pos, end)
        out.append(ctype.CODE if kind == 0x0D else ctype.STRING_LIKE)
        append_string_bytes(out, text)
        if kind != 0x0D:
            bits.append_bit(1 if kind == 0x0E else 0)
        return after
    if kind == 0x10:
        append_int(out, bits, _INT32.unpack_from(view, pos)[0], TYPE_INT32)
        return _checked(pos + 4, end)
    if kind == 0x12:
        append_int(out, bits, _INT64.unpack_from(view, pos)[0], TYPE_INT64)
        return _checked(pos + 8, end)
    if kind == 0x01:
        append_double(out, bits, _DOUBLE.unpack_from(view, pos)[0])
        return _checked(pos + 8, end)
    if kind in (0x03, 0x04):
        size = _INT32.unpack_from(view, pos)[0]
        inner_end = _checked(pos + size, end) - 1
        if kind == 0x03:
            out.append(ctype.OBJECT)
            _append_fields(out, bits, view, pos + 4, inner_end, depth)
        else:
            out.append(ctype.ARRAY)
            _append_elements(out, bits, view, pos + 4, inner_end, depth)
        return inner_end + 1
    return _append_rare(out, bits, view, kind, pos, end, depth)


def _append_elements(
    out: bytearray, bits: TypeBitsWriter, view: memoryview, pos: int, end: int, depth: int
) -> None:
    """An array's elements: values only, no names and no generic CTypes."""
    while pos < end:
        kind = view[pos]
        pos = _append_element(
            out, bits, view, kind, _cstring_end(view, pos + 1, end) + 1, end, depth + 1
        )
    out.append(0)


def _append_rare(
    out: bytearray,
    bits: TypeBitsWriter,
    view: memoryview,
    kind: int,
    pos: int,
    end: int,
    depth: int,
) -> int:
    if kind in (0x0A, 0x06, 0xFF, 0x7F):
        out.append(_GENERIC[kind])
        return pos
    if kind == 0x08:
        out.append(ctype.BOOL_TRUE if view[pos] else ctype.BOOL_FALSE)
        return _checked(pos + 1, end)
    if kind == 0x09:
        append_date(out, _INT64.unpack_from(view, pos)[0])
        return _checked(pos + 8, end)
    if kind == 0x11:
        increment, seconds = (
            _UINT32.unpack_from(view, pos)[0],
            _UINT32.unpack_from(view, pos + 4)[0],
        )
        out.append(ctype.TIMESTAMP)
        out += seconds.to_bytes(4, "big") + increment.to_bytes(4, "big")
        return _checked(pos + 8, end)
    if kind == 0x05:
        size: int = _INT32.unpack_from(view, pos)[0]
        subtype = view[pos + 4]
        data = bytes(view[pos + 5 : _checked(pos + 5 + size, end)])
        if subtype == 2 and len(data) >= 4:
            data = data[4:]  # the old binary subtype repeats its length inside
        append_bin_data(out, subtype, data)
        return pos + 5 + size
    if kind == 0x13:
        encode_decimal128(
            Decimal128.from_bid(bytes(view[pos : _checked(pos + 16, end)])), out, bits
        )
        return pos + 16
    if kind == 0x0B:
        pattern_end = _cstring_end(view, pos, end)
        flags_end = _cstring_end(view, pattern_end + 1, end)
        out.append(ctype.REGEX)
        out += view[pos : flags_end + 1]
        return flags_end + 1
    if kind == 0x0C:
        namespace, after = _string(view, pos, end)
        out.append(ctype.DB_REF)
        out += len(namespace).to_bytes(4, "big") + namespace + view[after : after + 12]
        return _checked(after + 12, end)
    if kind == 0x0F:
        total = _INT32.unpack_from(view, pos)[0]
        source, scope_at = _string(view, pos + 4, end)
        out.append(ctype.CODE_WITH_SCOPE)
        append_string_bytes(out, source)
        scope_size = _INT32.unpack_from(view, scope_at)[0]
        _append_fields(out, bits, view, scope_at + 4, scope_at + scope_size - 1, depth)
        return _checked(pos + int(total), end)
    raise ResumeTokenError(f"expected a BSON element type, got {kind:#04x} at byte {pos}")


def _string(view: memoryview, pos: int, end: int) -> tuple[bytes, int]:
    size = _INT32.unpack_from(view, pos)[0]
    stop = _checked(pos + 4 + size, end)
    if size < 1 or view[stop - 1] != 0:
        raise ResumeTokenError(f"expected a BSON string at byte {pos}, got a bad length {size}")
    return bytes(view[pos + 4 : stop - 1]), stop


def _cstring_end(view: memoryview, pos: int, end: int) -> int:
    for index in range(pos, end):
        if view[index] == 0:
            return index
    raise ResumeTokenError(f"expected a NUL-terminated field name at byte {pos}, found none")


def _checked(pos: int, end: int) -> int:
    if pos > end:
        raise ResumeTokenError(f"truncated BSON: an element runs past byte {end}")
    return pos
