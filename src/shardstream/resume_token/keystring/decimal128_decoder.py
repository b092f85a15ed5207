"""KeyString V1 Decimal128 values read back, byte-identical to the server's reading.

Emulates the decimal branches of ``src/mongo/db/storage/key_string/key_string.cpp``'s
decoder ``toBsonValue`` with ``readDecimalContinuation`` and ``adjustDecimalExponent``, and
``TypeBits::readDecimalZero``; the layout is :mod:`~shardstream.resume_token.keystring.
decimal128`'s (the encoder).
"""

from __future__ import annotations

import math
from decimal import Decimal

from bson.decimal128 import Decimal128

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.keystring import ctype
from shardstream.resume_token.keystring import decimal128_bid as bid
from shardstream.resume_token.keystring import double_form as form
from shardstream.resume_token.keystring.byte_reader import ByteReader
from shardstream.resume_token.keystring.decimal128 import (
    EXPONENT_BITS,
    FIRST_ZERO_CODE,
    NEGATIVE_ZERO_OFFSET,
)
from shardstream.resume_token.keystring.type_bits import TypeBitsReader

__all__ = ["decode_decimal128", "decode_decimal128_zero"]


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
        return bid.from_words(bid.NAN_HIGH, 0)
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
    if not 0 <= first_three <= 7 or code < FIRST_ZERO_CODE:
        raise ResumeTokenError(
            f"invalid KeyString zero type bits: expected a decimal zero code 0b11010..0b11111, "
            f"found {first_three!r} after 0b11"
        )
    which_zero = ((code - FIRST_ZERO_CODE) << 12) | type_bits.read_bits(12)
    negative = which_zero >= NEGATIVE_ZERO_OFFSET
    biased = which_zero - NEGATIVE_ZERO_OFFSET if negative else which_zero
    return bid.from_words((bid.SIGN_BIT if negative else 0) | (biased << 49), 0)


def _read64(reader: ByteReader, inverted: bool) -> int:
    """Read 8 big-endian bytes, flipping every bit when ``inverted`` (negative values)."""
    value = reader.read_uint_be(8)
    return value ^ bid.MASK64 if inverted else value


def _decode_large(negative: bool, reader: ByteReader, type_bits: TypeBitsReader) -> Decimal128:
    """Decode CType 0x1F / 0x33: a large double, an infinity or a raw huge decimal."""
    encoded = _read64(reader, negative)
    has_continuation = False
    if not encoded & bid.SIGN_BIT:  # a double, with the implied top exponent bit dropped
        has_continuation = bool(encoded & 1)
        bin_ = form.bits_double((encoded >> 1) | (1 << 62))
    elif encoded == bid.MASK64:
        bin_ = math.inf
    else:  # _appendHugeDecimalWithoutTypeBits: the raw value with the top bit forced on
        high = (encoded & ~bid.SIGN_BIT) | (bid.SIGN_BIT if negative else 0)
        low = _read64(reader, negative)
        kind, sign, coef, biased = bid.unpack_bid(high, low)
        if kind != "finite":  # like the server: no exponent adjustment for NaN or infinity
            return bid.from_words(high, low)
        return _with_stored_exponent(
            bid.make_decimal(sign, coef, biased - bid.EXPONENT_BIAS), type_bits
        )
    if negative:
        bin_ = -bin_
    if not math.isfinite(bin_):
        if has_continuation:
            raise ResumeTokenError(
                "invalid KeyString decimal: expected a finite double before a decimal "
                f"continuation, found {bin_!r}"
            )
        return bid.from_words(
            (bid.SIGN_BIT if negative else 0)
            | (bid.NAN_HIGH if bin_ != bin_ else bid.INFINITY_HIGH),
            0,
        )
    dec = bid.from_double(bin_, bid.away_from_zero(negative))
    if has_continuation:
        dec = _read_continuation(reader, negative, dec)
    return _with_stored_exponent(dec, type_bits)


def _decode_small(negative: bool, reader: ByteReader, type_bits: TypeBitsReader) -> Decimal128:
    """Decode CType 0x28 / 0x2A, whose top two payload bits pick the form."""
    encoded = _read64(reader, negative)
    prefix = encoded >> 62
    if prefix == 0:  # a decimal below the smallest subnormal, stored raw
        _, _, coef, biased = bid.unpack_bid(encoded, _read64(reader, negative))
        return _with_stored_exponent(
            bid.make_decimal(negative, coef, biased - bid.EXPONENT_BIAS), type_bits
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
        dec = bid.TOWARD_ZERO.multiply(
            bid.TOWARD_ZERO.plus(Decimal(scaled_bin)), form.TINY_DOWN_FACTOR
        )
    else:
        dec = bid.UPWARD.plus(Decimal(scaled_bin * 2.0**-form.TINY_SHIFT))
    dec = _read_continuation(reader, negative, dec)
    return _with_stored_exponent(dec.copy_negate() if negative else dec, type_bits)


def _decode_int(
    size: int, negative: bool, reader: ByteReader, type_bits: TypeBitsReader
) -> Decimal128:
    """Decode CTypes 0x20..0x27 / 0x2B..0x32: an integer part of ``size`` bytes, maybe more."""
    encoded = reader.read_uint_be(size) ^ (((1 << (8 * size)) - 1) if negative else 0)
    integer = encoded >> 1
    if not encoded & 1:
        return _with_stored_exponent(bid.make_decimal(negative, integer, 0), type_bits)
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
        dec = bid.from_double(bin_, bid.UPWARD, fifteen_digits=True)
    elif dcm == form.DCM_EQUAL_TO_DOUBLE:
        dec = bid.UPWARD.plus(Decimal(bin_))
    else:
        start = bid.UPWARD.plus(Decimal(bin_)) if exact_integer is None else Decimal(exact_integer)
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
    stored = type_bits.read_bits(EXPONENT_BITS)
    result = None if value.is_zero() else form.with_exponent_bits(value, stored)
    if result is None:
        raise ResumeTokenError(
            f"invalid KeyString decimal: expected a non-zero value with a cohort whose biased "
            f"exponent is {stored} mod 64, found {value}"
        )
    return bid.from_words(*bid.words(result))
