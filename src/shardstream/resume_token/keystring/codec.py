"""KeyString V1 encoding of BSON values, all ascending (server: key_string.cpp); the
reading back is ``value_decoder``.

The resume token is the KeyString of a sequence of unnamed values.  Each value
is a CType byte then a payload; inside an embedded document every field is the
value's *generic* CType, the raw field name, NUL, then the value itself.  Field
order is kept, never sorted.  Type information the bytes drop on purpose
(int vs long vs double, String vs Symbol) goes to the type bits.

Complexity: O(n) in the encoded size.
"""

from __future__ import annotations

import datetime
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from bson.binary import Binary
from bson.code import Code
from bson.datetime_ms import DatetimeMS
from bson.dbref import DBRef
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from bson.regex import Regex
from bson.timestamp import Timestamp

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.bson_values import (
    DBPointer,
    Symbol,
    _UndefinedType,
    date_millis,
)
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
from shardstream.resume_token.keystring.raw_bson import append_raw_document
from shardstream.resume_token.keystring.type_bits import TypeBitsWriter

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_UTC = datetime.UTC


def encode_values(values: Iterable[Any], out: bytearray, bits: TypeBitsWriter) -> None:
    """Append each value's KeyString to ``out`` (no end byte)."""
    for value in values:
        append_value(out, bits, value, 0)


def append_value(out: bytearray, bits: TypeBitsWriter, value: Any, depth: int = 0) -> None:
    """Append one value's CType and payload, and its type bits.

    Raises:
        ResumeTokenError: the value has no BSON type, or an int is out of int64 range.
    """
    if depth > ctype.MAX_NESTING:
        raise ResumeTokenError(f"value nested deeper than {ctype.MAX_NESTING} levels")
    if value is None:
        out.append(ctype.NULL)
    elif isinstance(value, bool):
        out.append(ctype.BOOL_TRUE if value else ctype.BOOL_FALSE)
    elif isinstance(value, Int64):
        append_int(out, bits, int(value), TYPE_INT64)
    elif isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ResumeTokenError(f"expected an integer in int64 range, got {value!r}")
        append_int(
            out, bits, value, TYPE_INT32 if _INT32_MIN <= value <= _INT32_MAX else TYPE_INT64
        )
    elif isinstance(value, float):
        append_double(out, bits, value)
    elif isinstance(value, str) and not isinstance(value, Code):
        out.append(ctype.STRING_LIKE)
        _append_string_body(out, value)
        bits.append_bit(1 if isinstance(value, Symbol) else 0)
    elif isinstance(value, ObjectId):
        out.append(ctype.OID)
        out += value.binary
    elif isinstance(value, RawBSONDocument):
        # Straight from the bytes: faster, and Symbol / Undefined / DBPointer keep their type.
        append_raw_document(out, bits, value.raw)
    elif isinstance(value, Mapping):
        out.append(ctype.OBJECT)
        _append_fields(out, bits, value, depth)
    elif isinstance(value, list | tuple):
        out.append(ctype.ARRAY)
        for element in value:
            append_value(out, bits, element, depth + 1)
        out.append(0)
    else:
        _append_rare(out, bits, value, depth)


def _append_rare(out: bytearray, bits: TypeBitsWriter, value: Any, depth: int) -> None:
    if isinstance(value, Timestamp):
        out.append(ctype.TIMESTAMP)
        out += value.time.to_bytes(4, "big") + value.inc.to_bytes(4, "big")
    elif isinstance(value, Binary):
        append_bin_data(out, value.subtype, bytes(value))
    elif isinstance(value, bytes):
        append_bin_data(out, 0, value)
    elif isinstance(value, uuid.UUID):
        append_bin_data(out, 4, value.bytes)
    elif isinstance(value, Decimal128):
        encode_decimal128(value, out, bits)
    elif isinstance(value, datetime.datetime | DatetimeMS):
        append_date(out, date_millis(value))
    elif isinstance(value, Code):
        if value.scope is None:
            out.append(ctype.CODE)
            _append_string_body(out, str(value))
        else:
            out.append(ctype.CODE_WITH_SCOPE)
            _append_string_body(out, str(value))
            _append_fields(out, bits, value.scope, depth)
    elif isinstance(value, Regex | re.Pattern):
        _append_regex(out, value)
    elif isinstance(value, MinKey):
        out.append(ctype.MIN_KEY)
    elif isinstance(value, MaxKey):
        out.append(ctype.MAX_KEY)
    elif isinstance(value, _UndefinedType):
        out.append(ctype.UNDEFINED)
    elif isinstance(value, DBPointer):
        namespace = value.namespace.encode()
        out.append(ctype.DB_REF)
        out += len(namespace).to_bytes(4, "big") + namespace + value.oid.binary
    elif isinstance(value, DBRef):
        # BSON stores a DBRef as the sub-document {$ref, $id[, $db], ...}.
        append_value(out, bits, value.as_doc(), depth)
    else:
        raise ResumeTokenError(f"expected a BSON value, got {type(value).__name__} {value!r:.80}")


def _append_fields(
    out: bytearray, bits: TypeBitsWriter, document: Mapping[str, Any], depth: int
) -> None:
    for name, field_value in document.items():
        if not isinstance(name, str) or "\x00" in name:
            raise ResumeTokenError(f"expected a field name without NUL, got {name!r}")
        out.append(generic_ctype(field_value))
        out += name.encode()
        out.append(0)
        append_value(out, bits, field_value, depth + 1)
    out.append(0)


def generic_ctype(value: Any) -> int:
    """Return the CType that precedes a field holding ``value`` inside a document.

    It is the first CType of the value's type family: every number gets 0x1E and
    both booleans 0x6E, so field headers do not depend on the value.
    """
    if value is None:
        return ctype.NULL
    if isinstance(value, bool):
        return ctype.BOOL_FALSE
    if isinstance(value, int | float | Decimal128):
        return ctype.NUMERIC
    if isinstance(value, str) and not isinstance(value, Code):
        return ctype.STRING_LIKE
    if isinstance(value, ObjectId):
        return ctype.OID
    if isinstance(value, Mapping | DBRef):
        return ctype.OBJECT
    if isinstance(value, list | tuple):
        return ctype.ARRAY
    for types, code in _RARE_GENERIC_CTYPES:
        if isinstance(value, types):
            return code
    if isinstance(value, Code):
        return ctype.CODE if value.scope is None else ctype.CODE_WITH_SCOPE
    raise ResumeTokenError(f"expected a BSON value, got {type(value).__name__} {value!r:.80}")


_RARE_GENERIC_CTYPES: tuple[tuple[type | tuple[type, ...], int], ...] = (
    ((Binary, bytes, uuid.UUID), ctype.BIN_DATA),
    (Timestamp, ctype.TIMESTAMP),
    ((datetime.datetime, DatetimeMS), ctype.DATE),
    ((Regex, re.Pattern), ctype.REGEX),
    (MinKey, ctype.MIN_KEY),
    (MaxKey, ctype.MAX_KEY),
    (_UndefinedType, ctype.UNDEFINED),
    (DBPointer, ctype.DB_REF),
)


def _append_string_body(out: bytearray, text: str) -> None:
    append_string_bytes(out, text.encode("utf-8", "surrogatepass"))


def _append_regex(out: bytearray, value: Regex[Any] | re.Pattern[Any]) -> None:
    regex = value if isinstance(value, Regex) else Regex.from_native(value)
    pattern = regex.pattern
    pattern_bytes = pattern.encode() if isinstance(pattern, str) else bytes(pattern)
    flags = regex.flags
    flag_text = flags if isinstance(flags, str) else _regex_flag_letters(flags)
    if b"\x00" in pattern_bytes or "\x00" in flag_text:
        raise ResumeTokenError(f"expected a regex without NUL, got {pattern!r} / {flag_text!r}")
    out.append(ctype.REGEX)
    out += pattern_bytes + b"\x00" + flag_text.encode() + b"\x00"


def _regex_flag_letters(flags: int) -> str:
    # The letters and order BSON's encoder writes for Python's re flags.
    letters = (
        (re.IGNORECASE, "i"),
        (re.LOCALE, "l"),
        (re.MULTILINE, "m"),
        (re.DOTALL, "s"),
        (re.UNICODE, "u"),
        (re.VERBOSE, "x"),
    )
    return "".join(letter for flag, letter in letters if flags & flag)
