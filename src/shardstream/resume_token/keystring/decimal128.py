"""KeyString V1 encoding and decoding of BSON Decimal128, byte-identical to the server.

Emulates ``src/mongo/db/storage/key_string/key_string.cpp``: the encoder
``_appendNumberDecimal`` with its helpers ``_appendDoubleWithoutTypeBits``,
``_appendSmallDouble``, ``_appendLargeDouble``, ``_appendPreshiftedIntegerPortion``,
``_appendTinyDecimalWithoutTypeBits`` and ``_appendHugeDecimalWithoutTypeBits``; the decimal
branches of the decoder ``toBsonValue`` with ``readDecimalContinuation`` and
``adjustDecimalExponent``; and ``TypeBits::appendDecimalZero`` / ``appendDecimalExponent`` /
``readDecimalZero``.

A decimal sorts by value against every other number, so it borrows the byte form of ``bin``,
the decimal rounded toward zero to a double, and adds a 2-bit *decimal continuation marker*
(DCM): 0 = exactly ``bin``; 2 = ``bin`` rounded away from zero to 15 digits; 1 / 3 = below /
above that, with an 8-byte continuation (the coefficient of the decimal minus ``bin``
rounded away from zero to 34 digits).  Decimals outside the normal double range are stored
raw (huge, and tiny ones below the smallest subnormal) or scaled by 2**256 (subnormal range).
The type bits carry the low 6 bits of the biased exponent, which pick the cohort back out
(1.50 vs 1.5); zeros carry their whole sign and exponent in 17 type bits instead.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Final

from bson.decimal128 import Decimal128

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.keystring import ctype
from shardstream.resume_token.keystring import double_form as form
from shardstream.resume_token.keystring.byte_reader import ByteReader
from shardstream.resume_token.keystring.type_bits import TypeBitsReader, TypeBitsWriter

__all__ = ["decode_decimal128", "decode_decimal128_zero", "encode_decimal128"]

_DECIMAL_TYPE: Final = 0b11  # TypeBits::kDecimal
_EXPONENT_BITS: Final = 6  # TypeBits::kStoredDecimalExponentBits
_FIRST_ZERO_CODE: Final = 0x1A  # kDecimalZero0xxx; codes 0x1A..0x1F carry 3 high bits
_NEGATIVE_ZERO_OFFSET: Final = form.MAX_BIASED_EXPONENT + 1  # negative zeros count from 12288


def encode_decimal128(value: Decimal128, out: bytearray, type_bits: TypeBitsWriter) -> None:
    """Append the CType byte and payload of ``value`` to ``out``, its type bits to ``type_bits``.

    Args:
        value: any Decimal128, including NaN, infinities and all zero cohorts.
        out: the KeyString buffer.
        type_bits: receives 1,1 (+ 6 exponent bits when finite non-zero), or for a zero the
            5-bit code 0x1A + (E >> 12) and 12 bits of E, E = biased exponent (+12288 if
            negative), exactly as ``_appendNumberDecimal`` appends them.
    """
    bid = value.bid
    kind, negative, coef, biased = form.unpack_bid(
        int.from_bytes(bid[8:], "little"), int.from_bytes(bid[:8], "little")
    )
    if kind == "finite" and coef == 0:
        which_zero = biased + (_NEGATIVE_ZERO_OFFSET if negative else 0)
        type_bits.append_bits(_FIRST_ZERO_CODE + (which_zero >> 12), 5)
        type_bits.append_bits(which_zero & 0xFFF, 12)
        out.append(ctype.NUMERIC_ZERO)
        return
    type_bits.append_bits(_DECIMAL_TYPE, 2)
    if kind == "nan":
        out.append(ctype.NUMERIC_NAN)
    elif kind == "inf":
        form.append_large_double(out, -math.inf if negative else math.inf, 0)
    else:
        type_bits.append_bits(biased & ((1 << _EXPONENT_BITS) - 1), _EXPONENT_BITS)
        _append_finite(out, negative, coef, biased - form.EXPONENT_BIAS)


def _append_finite(out: bytearray, negative: bool, coef: int, exponent: int) -> None:
    """Append a finite non-zero decimal, choosing the server's branch by its double ``bin``."""
    dec = form.make_decimal(negative, coef, exponent)
    magnitude, inexact = form.to_double_toward_zero(coef, exponent)
    bin_ = -magnitude if negative else magnitude
    if not inexact:  # the decimal is a double: 1.5, 6, 2**70 ...
        form.append_double(out, bin_, form.DCM_EQUAL_TO_DOUBLE)
        return
    if magnitude < form.DBL_MIN:
        _append_tiny(out, negative, dec.copy_abs(), magnitude)
        return
    if magnitude >= form.DBL_MAX:  # every decimal past the double range truncates to DBL_MAX
        norm = form.normalize(dec.copy_abs())
        high, low = form.words(norm)
        # The forced top bit sorts these between the largest double and infinity (all ones).
        out.append(
            ctype.NUMERIC_NEGATIVE_LARGE_MAGNITUDE
            if negative
            else ctype.NUMERIC_POSITIVE_LARGE_MAGNITUDE
        )
        form.put64(out, high | form.SIGN_BIT, negative)
        form.put64(out, low, negative)
        return
    away = form.away_from_zero(negative)
    above = form.DCM_CONTINUATION_ABOVE_15_DIGITS
    if magnitude >= form.MIN_LARGE or magnitude < form.TINIEST_2BIT_DCM:
        # These forms have a 1-bit DCM only, so even 15-digit values need a continuation.
        append = form.append_large_double if magnitude >= 1 else form.append_small_double
        append(out, bin_, above)
        stored = form.from_double(bin_, away)
    elif magnitude >= form.MAX_INT_FOR_DOUBLE:
        # bin may have lost integer digits here, so write the exact integer part instead.
        scale = 10 ** max(-exponent, 0)
        integer, fraction = divmod(coef * 10 ** max(exponent, 0), scale)
        form.append_preshifted_integer(out, (integer << 1) | (fraction != 0), negative)
        if not fraction:
            return
        if integer < 1 << 55:  # 7 integer bytes: one byte for the DCM completes 8
            out.append(above ^ 0xFF if negative else above)
        stored = form.make_decimal(negative, integer, 0)
    elif coef < 10**15:  # at most 15 digits: bin rounded to 15 digits gives dec back
        form.append_double(out, bin_, form.DCM_EQUAL_TO_15_DIGITS)
        return
    else:
        fifteen = form.from_double(bin_, away, fifteen_digits=True)
        if fifteen == dec:  # trailing zeros hid a 15-digit value
            form.append_double(out, bin_, form.DCM_EQUAL_TO_15_DIGITS)
            return
        below = (dec < fifteen) != negative
        form.append_double(out, bin_, form.DCM_CONTINUATION_BELOW_15_DIGITS if below else above)
        stored = form.from_double(bin_, away)
    difference = form.TIES_EVEN.subtract(dec, form.normalize(stored))
    form.put64(out, form.parts(difference)[1] & form.MASK64, negative)


def _append_tiny(out: bytearray, negative: bool, magnitude: Decimal, bin_magnitude: float) -> None:
    """Append a decimal below DBL_MIN that is no double (``_appendTinyDecimalWithoutTypeBits``)."""
    out.append(
        ctype.NUMERIC_NEGATIVE_SMALL_MAGNITUDE
        if negative
        else ctype.NUMERIC_POSITIVE_SMALL_MAGNITUDE
    )
    if bin_magnitude == 0.0:  # below the smallest subnormal: the raw decimal (prefix 0b00)
        norm = form.normalize(magnitude)
        high, low = form.words(norm)
        form.put64(out, high, negative)
        form.put64(out, low, negative)
        return
    # Scale in the decimal domain, rounding down at each step so the continuation is >= 0.
    scaled = form.TOWARD_ZERO.multiply(magnitude, form.TINY_UP_FACTOR)
    scaled_bin = form.to_double_toward_zero(*form.parts(scaled)[1:])[0]
    scaled_bin = max(scaled_bin, bin_magnitude * 2.0**form.TINY_SHIFT)
    form.put64(out, ((form.double_bits(scaled_bin) << 1) | 1) + (1 << 62), negative)
    stored = form.TOWARD_ZERO.multiply(
        form.TOWARD_ZERO.plus(Decimal(scaled_bin)), form.TINY_DOWN_FACTOR
    )
    difference = form.TIES_EVEN.subtract(magnitude, form.normalize(stored))
    form.put64(out, form.parts(difference)[1] & form.MASK64, negative)


def decode_decimal128(ct: int, reader: ByteReader, type_bits: TypeBitsReader) -> Decimal128:
    """Decode the payload of a non-zero numeric CType whose type bits said "decimal".

    Args:
        ct: the CType byte, already consumed (NaN 0x1E, 0x1F..0x28 or 0x2A..0x33).
        reader: positioned on the payload.
        type_bits: positioned after the 2 numeric bits; the 6 exponent bits are read here.

    Returns:
        The exact Decimal128, cohort included.

    Raises:
        ResumeTokenError: truncated or invalid payload, or type bits the server rejects.
    """
    if ct == ctype.NUMERIC_NAN:
        return form.from_words(form.NAN_HIGH, 0)
    negative = ct < ctype.NUMERIC_ZERO
    if ct in (ctype.NUMERIC_NEGATIVE_LARGE_MAGNITUDE, ctype.NUMERIC_POSITIVE_LARGE_MAGNITUDE):
        return _decode_large(negative, reader, type_bits)
    if ct in (ctype.NUMERIC_NEGATIVE_SMALL_MAGNITUDE, ctype.NUMERIC_POSITIVE_SMALL_MAGNITUDE):
        return _decode_small(negative, reader, type_bits)
    if ctype.NUMERIC_NEGATIVE_8_BYTE_INT <= ct <= ctype.NUMERIC_NEGATIVE_1_BYTE_INT:
        return _decode_int(ctype.NUMERIC_NEGATIVE_1_BYTE_INT - ct + 1, True, reader, type_bits)
    if ctype.NUMERIC_POSITIVE_1_BYTE_INT <= ct <= ctype.NUMERIC_POSITIVE_8_BYTE_INT:
        return _decode_int(ct - ctype.NUMERIC_POSITIVE_1_BYTE_INT + 1, False, reader, type_bits)
    raise ResumeTokenError(
        f"invalid KeyString decimal: expected a non-zero numeric CType (0x1E..0x28 or "
        f"0x2A..0x33), found 0x{ct:02X}"
    )


def decode_decimal128_zero(type_bits: TypeBitsReader, first_three: int) -> Decimal128:
    """Decode a decimal zero (CType 0x29) from its type bits.

    Args:
        type_bits: positioned after the 5-bit zero code; 12 more bits are read.
        first_three: the 3 bits after the leading 1,1 (2..7 for a decimal zero).

    Returns:
        The zero with its sign and exponent (one of 2 * 12288 cohorts).

    Raises:
        ResumeTokenError: the 5-bit code is not a decimal zero (0b11010..0b11111).
    """
    code = 0b11000 | first_three
    if not 0 <= first_three <= 7 or code < _FIRST_ZERO_CODE:
        raise ResumeTokenError(
            f"invalid KeyString zero type bits: expected a decimal zero code 0b11010..0b11111, "
            f"found {first_three!r} after 0b11"
        )
    which_zero = ((code - _FIRST_ZERO_CODE) << 12) | type_bits.read_bits(12)
    negative = which_zero >= _NEGATIVE_ZERO_OFFSET
    biased = which_zero - _NEGATIVE_ZERO_OFFSET if negative else which_zero
    return form.from_words((form.SIGN_BIT if negative else 0) | (biased << 49), 0)


def _read64(reader: ByteReader, inverted: bool) -> int:
    """Read 8 big-endian bytes, flipping every bit when ``inverted`` (negative values)."""
    value = reader.read_uint_be(8)
    return value ^ form.MASK64 if inverted else value


def _decode_large(negative: bool, reader: ByteReader, type_bits: TypeBitsReader) -> Decimal128:
    """Decode CType 0x1F / 0x33: a large double, an infinity or a raw huge decimal."""
    encoded = _read64(reader, negative)
    has_continuation = False
    if not encoded & form.SIGN_BIT:  # a double, with the implied top exponent bit dropped
        has_continuation = bool(encoded & 1)
        bin_ = form.bits_double((encoded >> 1) | (1 << 62))
    elif encoded == form.MASK64:
        bin_ = math.inf
    else:  # _appendHugeDecimalWithoutTypeBits: the raw value with the top bit forced on
        high = (encoded & ~form.SIGN_BIT) | (form.SIGN_BIT if negative else 0)
        low = _read64(reader, negative)
        kind, sign, coef, biased = form.unpack_bid(high, low)
        if kind != "finite":  # like the server: no exponent adjustment for NaN or infinity
            return form.from_words(high, low)
        return _with_stored_exponent(
            form.make_decimal(sign, coef, biased - form.EXPONENT_BIAS), type_bits
        )
    if negative:
        bin_ = -bin_
    if not math.isfinite(bin_):
        if has_continuation:
            raise ResumeTokenError(
                "invalid KeyString decimal: expected a finite double before a decimal "
                f"continuation, found {bin_!r}"
            )
        return form.from_words(
            (form.SIGN_BIT if negative else 0)
            | (form.NAN_HIGH if bin_ != bin_ else form.INFINITY_HIGH),
            0,
        )
    dec = form.from_double(bin_, form.away_from_zero(negative))
    if has_continuation:
        dec = _read_continuation(reader, negative, dec)
    return _with_stored_exponent(dec, type_bits)


def _decode_small(negative: bool, reader: ByteReader, type_bits: TypeBitsReader) -> Decimal128:
    """Decode CType 0x28 / 0x2A, whose top two payload bits pick the form."""
    encoded = _read64(reader, negative)
    prefix = encoded >> 62
    if prefix == 0:  # a decimal below the smallest subnormal, stored raw
        _, _, coef, biased = form.unpack_bid(encoded, _read64(reader, negative))
        return _with_stored_exponent(
            form.make_decimal(negative, coef, biased - form.EXPONENT_BIAS), type_bits
        )
    if prefix == 3:  # a double of at least 2**-255 with a 2-bit DCM
        return _from_dcm(
            form.bits_double(encoded >> 2), encoded & 3, None, negative, reader, type_bits
        )
    # 0b01 / 0b10: scaled by 2**256 to stay normal; a decimal here always has a continuation.
    if not encoded & 1:
        raise ResumeTokenError(
            "invalid KeyString decimal: expected a decimal continuation after a tiny double, "
            f"found none (payload {encoded:016X})"
        )
    scaled_bin = form.bits_double((encoded - (1 << 62)) >> 1)
    if scaled_bin < form.DBL_MIN * 2.0**form.TINY_SHIFT:
        # Subnormal range: rounded down in the decimal domain, as the encoder did.
        dec = form.TOWARD_ZERO.multiply(
            form.TOWARD_ZERO.plus(Decimal(scaled_bin)), form.TINY_DOWN_FACTOR
        )
    else:
        dec = form.UPWARD.plus(Decimal(scaled_bin * 2.0**-form.TINY_SHIFT))
    dec = _read_continuation(reader, negative, dec)
    return _with_stored_exponent(dec.copy_negate() if negative else dec, type_bits)


def _decode_int(
    size: int, negative: bool, reader: ByteReader, type_bits: TypeBitsReader
) -> Decimal128:
    """Decode CTypes 0x20..0x27 / 0x2B..0x32: an integer part of ``size`` bytes, maybe more."""
    encoded = reader.read_uint_be(size) ^ (((1 << (8 * size)) - 1) if negative else 0)
    integer = encoded >> 1
    if not encoded & 1:
        return _with_stored_exponent(form.make_decimal(negative, integer, 0), type_bits)
    # A fraction follows, filling the payload up to 8 bytes; an 8-byte integer implies DCM 3.
    fraction_bytes = 8 - size
    fraction = reader.read_uint_be(fraction_bytes)
    if negative:
        fraction ^= (1 << (8 * fraction_bytes)) - 1
    fraction |= integer << (8 * fraction_bytes)
    bin_ = math.ldexp(float(fraction & ~3), -8 * fraction_bytes)
    dcm = fraction & 3 if fraction_bytes else form.DCM_CONTINUATION_ABOVE_15_DIGITS
    exact_integer = integer if integer > form.MAX_INT_FOR_DOUBLE else None
    return _from_dcm(bin_, dcm, exact_integer, negative, reader, type_bits)


def _from_dcm(
    bin_: float,
    dcm: int,
    exact_integer: int | None,
    negative: bool,
    reader: ByteReader,
    type_bits: TypeBitsReader,
) -> Decimal128:
    """Rebuild a decimal from a double-form magnitude ``bin_`` and its DCM."""
    if dcm == form.DCM_EQUAL_TO_15_DIGITS:
        dec = form.from_double(bin_, form.UPWARD, fifteen_digits=True)
    elif dcm == form.DCM_EQUAL_TO_DOUBLE:
        dec = form.UPWARD.plus(Decimal(bin_))
    else:
        start = form.UPWARD.plus(Decimal(bin_)) if exact_integer is None else Decimal(exact_integer)
        dec = _read_continuation(reader, negative, start)
    return _with_stored_exponent(dec.copy_negate() if negative else dec, type_bits)


def _read_continuation(reader: ByteReader, inverted: bool, value: Decimal) -> Decimal:
    """``readDecimalContinuation``: add 64 more coefficient bits to a 34-digit ``value``."""
    continuation = _read64(reader, inverted)
    total = form.add_continuation(value, continuation) if value.is_finite() else None
    if total is None:
        raise ResumeTokenError(
            f"invalid KeyString decimal: expected a continuation that extends {value} exactly "
            f"within 34 digits, found {continuation:#x}"
        )
    return total


def _with_stored_exponent(value: Decimal, type_bits: TypeBitsReader) -> Decimal128:
    """``adjustDecimalExponent``: give ``value`` the cohort named by 6 type bits."""
    stored = type_bits.read_bits(_EXPONENT_BITS)
    result = None if value.is_zero() else form.with_exponent_bits(value, stored)
    if result is None:
        raise ResumeTokenError(
            f"invalid KeyString decimal: expected a non-zero value with a cohort whose biased "
            f"exponent is {stored} mod 64, found {value}"
        )
    return form.from_words(*form.words(result))
