"""KeyString V1 encoding of int32, int64 and double values (key_string.cpp).

Numbers are encoded by *value* so that equal numbers of different types give
equal bytes and sort together; the type goes into the type bits (two bits:
00 int32, 01 int64, 10 double, 11 Decimal128).  Decimal128 lives in
:mod:`decimal128`; both write payloads with :mod:`double_form`.

Complexity: O(1) per value.
"""

from __future__ import annotations

import math

from bson.int64 import Int64

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.keystring import ctype
from shardstream.resume_token.keystring import double_form as form
from shardstream.resume_token.keystring.byte_reader import ByteReader
from shardstream.resume_token.keystring.type_bits import TypeBitsWriter

TYPE_INT32 = 0b00
TYPE_INT64 = 0b01
TYPE_DOUBLE = 0b10
TYPE_DECIMAL = 0b11

_MASK64 = (1 << 64) - 1
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
NEGATIVE_ZERO_SUFFIX = 0b000  # after the 1,1 prefix of CType 0x29: 11000 is double -0.0


def append_int(out: bytearray, bits: TypeBitsWriter, value: int, type_code: int) -> None:
    """Append an int32 (``TYPE_INT32``) or int64 (``TYPE_INT64``) value."""
    bits.append_bits(type_code, 2)
    if value == 0:
        out.append(ctype.NUMERIC_ZERO)
    elif value == _INT64_MIN:
        # -2**63 cannot be negated in 64 bits; the server encodes it as that double.
        form.append_double(out, float(value), form.DCM_EQUAL_TO_DOUBLE)
    else:
        form.append_preshifted_integer(out, abs(value) << 1, value < 0)


def append_double(out: bytearray, bits: TypeBitsWriter, value: float) -> None:
    """Append a double, with its type bits (-0.0 takes a 5-bit code)."""
    if value == 0.0 and math.copysign(1.0, value) < 0:
        bits.append_bits(0b11000, 5)
        out.append(ctype.NUMERIC_ZERO)
        return
    bits.append_bits(TYPE_DOUBLE, 2)
    form.append_double(out, value, form.DCM_EQUAL_TO_DOUBLE)


def read_number_of_type(code: int, reader: ByteReader, type_code: int) -> int | Int64 | float:
    """Decode a non-zero int32, int64 or double payload for CType ``code``."""
    if code == ctype.NUMERIC_NAN:
        if type_code != TYPE_DOUBLE:
            raise _bad_type("NaN", type_code)
        return math.nan
    negative = code < ctype.NUMERIC_ZERO
    if code in (ctype.NUMERIC_POSITIVE_SMALL_MAGNITUDE, ctype.NUMERIC_NEGATIVE_SMALL_MAGNITUDE):
        if type_code != TYPE_DOUBLE:
            raise _bad_type("a number between -1 and 1", type_code)
        return _read_small(reader, negative)
    if code in (ctype.NUMERIC_POSITIVE_LARGE_MAGNITUDE, ctype.NUMERIC_NEGATIVE_LARGE_MAGNITUDE):
        value = _read_large(reader, negative)
        if type_code == TYPE_DOUBLE:
            return value
        if type_code == TYPE_INT64 and value == -(2.0**63):
            return Int64(_INT64_MIN)
        raise _bad_type(f"the large-magnitude number {value!r}", type_code)
    if negative:
        size = ctype.NUMERIC_NEGATIVE_1_BYTE_INT - code + 1
    else:
        size = code - ctype.NUMERIC_POSITIVE_1_BYTE_INT + 1
    mask = (1 << (8 * size)) - 1
    high = reader.read_uint_be(size)
    if negative:
        high ^= mask
    if high & 1:
        return _read_fraction(reader, high, size, negative, type_code)
    magnitude = high >> 1
    if magnitude == 0:
        raise ResumeTokenError(
            f"invalid KeyString number: CType {code:#04x} with a zero magnitude (zero is 0x29)"
        )
    integer = -magnitude if negative else magnitude
    return _typed_integer(integer, type_code)


def _typed_integer(integer: int, type_code: int) -> int | Int64 | float:
    if type_code == TYPE_INT32:
        if not _INT32_MIN <= integer <= _INT32_MAX:
            raise ResumeTokenError(
                f"invalid KeyString number: type bits say int32 but the value is {integer}"
            )
        return integer
    if type_code == TYPE_INT64:
        return Int64(integer)
    return float(integer)


def _read_fraction(
    reader: ByteReader, high: int, size: int, negative: bool, type_code: int
) -> float:
    if type_code != TYPE_DOUBLE:
        raise _bad_type("a fractional number", type_code)
    fraction_bytes = 8 - size
    low = reader.read_uint_be(fraction_bytes)
    if negative:
        low ^= (1 << (8 * fraction_bytes)) - 1
    encoded = (high << (8 * fraction_bytes)) | low
    if encoded & 3:
        raise ResumeTokenError(
            f"invalid KeyString double: decimal continuation marker {encoded & 3} on a double"
        )
    integer_part = high >> 1
    # encoded = (|x| + I + 1) * 256**fb; subtract exactly, then divide (a power of 2: exact).
    scaled = encoded - ((integer_part + 1) << (8 * fraction_bytes))
    magnitude = math.ldexp(float(scaled), -8 * fraction_bytes)
    if scaled <= 0 or int(magnitude) != integer_part:
        raise ResumeTokenError(
            f"invalid KeyString double: fraction bytes {low:#x} do not extend integer part "
            f"{integer_part}"
        )
    return -magnitude if negative else magnitude


def _read_small(reader: ByteReader, negative: bool) -> float:
    encoded = reader.read_uint_be(8)
    if negative:
        encoded ^= _MASK64
    top = encoded >> 62
    if top == 3:
        if encoded & 3:
            raise ResumeTokenError(
                f"invalid KeyString double: decimal continuation marker {encoded & 3} on a double"
            )
        magnitude = form.bits_double(encoded >> 2)
    elif top in (1, 2):
        scaled = encoded - (1 << 62)
        if scaled & 1:
            raise ResumeTokenError("invalid KeyString double: continuation flag set on a double")
        magnitude = form.bits_double(scaled >> 1) * 2.0**-256
    else:
        raise ResumeTokenError(
            f"invalid KeyString double: small-magnitude payload {encoded:#018x} is a decimal form"
        )
    if not 0.0 < magnitude < 1.0:
        raise ResumeTokenError(
            f"invalid KeyString double: payload {encoded:#018x} is not between 0 and 1"
        )
    return -magnitude if negative else magnitude


def _read_large(reader: ByteReader, negative: bool) -> float:
    encoded = reader.read_uint_be(8)
    if negative:
        encoded ^= _MASK64
    if encoded == _MASK64:
        return -math.inf if negative else math.inf
    if encoded & 1:
        raise ResumeTokenError("invalid KeyString double: continuation flag set on a double")
    magnitude = form.bits_double((encoded >> 1) | (1 << 62))
    if not 2.0**63 <= magnitude < math.inf:
        raise ResumeTokenError(
            f"invalid KeyString double: large-magnitude payload {encoded:#018x} decodes to "
            f"{magnitude!r}"
        )
    return -magnitude if negative else magnitude


def zero_of_type(type_code: int) -> int | Int64 | float:
    """Return the int32, int64 or double zero that CType 0x29 with ``type_code`` means."""
    if type_code == TYPE_INT32:
        return 0
    if type_code == TYPE_INT64:
        return Int64(0)
    return 0.0


def _bad_type(what: str, type_code: int) -> ResumeTokenError:
    names = {TYPE_INT32: "int32", TYPE_INT64: "int64", TYPE_DOUBLE: "double"}
    return ResumeTokenError(
        f"invalid KeyString number: {what} cannot have type {names.get(type_code, 'decimal')}; "
        f"expected a double type in the type bits"
    )
