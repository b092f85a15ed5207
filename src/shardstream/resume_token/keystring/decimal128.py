"""KeyString V1 encoding of BSON Decimal128, byte-identical to the server (reading it back:
``decimal128_decoder``).

Emulates ``src/mongo/db/storage/key_string/key_string.cpp``: the encoder
``_appendNumberDecimal`` with its helpers ``_appendDoubleWithoutTypeBits``,
``_appendSmallDouble``, ``_appendLargeDouble``, ``_appendPreshiftedIntegerPortion``,
``_appendTinyDecimalWithoutTypeBits`` and ``_appendHugeDecimalWithoutTypeBits``, and
``TypeBits::appendDecimalZero`` / ``appendDecimalExponent``.

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

from shardstream.resume_token.keystring import ctype
from shardstream.resume_token.keystring import decimal128_bid as bid
from shardstream.resume_token.keystring import double_form as form
from shardstream.resume_token.keystring.type_bits import TypeBitsWriter

__all__ = ["EXPONENT_BITS", "FIRST_ZERO_CODE", "NEGATIVE_ZERO_OFFSET", "encode_decimal128"]

_DECIMAL_TYPE: Final = 0b11  # TypeBits::kDecimal
EXPONENT_BITS: Final = 6  # TypeBits::kStoredDecimalExponentBits
FIRST_ZERO_CODE: Final = 0x1A  # kDecimalZero0xxx; codes 0x1A..0x1F carry 3 high bits
NEGATIVE_ZERO_OFFSET: Final = bid.MAX_BIASED_EXPONENT + 1  # negative zeros count from 12288


def encode_decimal128(value: Decimal128, out: bytearray, type_bits: TypeBitsWriter) -> None:
    """Append the CType byte and payload of ``value`` to ``out``, its type bits to ``type_bits``.

    Args:
        value: any Decimal128, including NaN, infinities and all zero cohorts.
        out: the KeyString buffer.
        type_bits: receives 1,1 (+ 6 exponent bits when finite non-zero), or for a zero the
            5-bit code 0x1A + (E >> 12) and 12 bits of E, E = biased exponent (+12288 if
            negative), exactly as ``_appendNumberDecimal`` appends them.
    """
    encoded = value.bid  # the BID words, low first, little-endian
    kind, negative, coef, biased = bid.unpack_bid(
        int.from_bytes(encoded[8:], "little"), int.from_bytes(encoded[:8], "little")
    )
    if kind == "finite" and coef == 0:
        which_zero = biased + (NEGATIVE_ZERO_OFFSET if negative else 0)
        type_bits.append_bits(FIRST_ZERO_CODE + (which_zero >> 12), 5)
        type_bits.append_bits(which_zero & 0xFFF, 12)
        out.append(ctype.NUMERIC_ZERO)
        return
    type_bits.append_bits(_DECIMAL_TYPE, 2)
    if kind == "nan":
        out.append(ctype.NUMERIC_NAN)
    elif kind == "inf":
        form.append_large_double(out, -math.inf if negative else math.inf, 0)
    else:
        type_bits.append_bits(biased & ((1 << EXPONENT_BITS) - 1), EXPONENT_BITS)
        _append_finite(out, negative, coef, biased - bid.EXPONENT_BIAS)


def _append_finite(out: bytearray, negative: bool, coef: int, exponent: int) -> None:
    """Append a finite non-zero decimal, choosing the server's branch by its double ``bin``."""
    dec = bid.make_decimal(negative, coef, exponent)
    magnitude, inexact = bid.to_double_toward_zero(coef, exponent)
    bin_ = -magnitude if negative else magnitude
    if not inexact:  # the decimal is a double: 1.5, 6, 2**70 ...
        form.append_double(out, bin_, form.DCM_EQUAL_TO_DOUBLE)
        return
    if magnitude < form.DBL_MIN:
        _append_tiny(out, negative, dec.copy_abs(), magnitude)
        return
    if magnitude >= bid.DBL_MAX:  # every decimal past the double range truncates to DBL_MAX
        norm = bid.normalize(dec.copy_abs())
        high, low = bid.words(norm)
        # The forced top bit sorts these between the largest double and infinity (all ones).
        out.append(
            ctype.NUMERIC_NEGATIVE_LARGE_MAGNITUDE
            if negative
            else ctype.NUMERIC_POSITIVE_LARGE_MAGNITUDE
        )
        form.put64(out, high | bid.SIGN_BIT, negative)
        form.put64(out, low, negative)
        return
    away = bid.away_from_zero(negative)
    above = form.DCM_CONTINUATION_ABOVE_15_DIGITS
    if magnitude >= form.MIN_LARGE or magnitude < form.TINIEST_2BIT_DCM:
        # These forms have a 1-bit DCM only, so even 15-digit values need a continuation.
        append = form.append_large_double if magnitude >= 1 else form.append_small_double
        append(out, bin_, above)
        stored = bid.from_double(bin_, away)
    elif magnitude >= form.MAX_INT_FOR_DOUBLE:
        # bin may have lost integer digits here, so write the exact integer part instead.
        scale = 10 ** max(-exponent, 0)
        integer, fraction = divmod(coef * 10 ** max(exponent, 0), scale)
        form.append_preshifted_integer(out, (integer << 1) | (fraction != 0), negative)
        if not fraction:
            return
        if integer < 1 << 55:  # 7 integer bytes: one byte for the DCM completes 8
            out.append(above ^ 0xFF if negative else above)
        stored = bid.make_decimal(negative, integer, 0)
    elif coef < 10**15:  # at most 15 digits: bin rounded to 15 digits gives dec back
        form.append_double(out, bin_, form.DCM_EQUAL_TO_15_DIGITS)
        return
    else:
        fifteen = bid.from_double(bin_, away, fifteen_digits=True)
        if fifteen == dec:  # trailing zeros hid a 15-digit value
            form.append_double(out, bin_, form.DCM_EQUAL_TO_15_DIGITS)
            return
        below = (dec < fifteen) != negative
        form.append_double(out, bin_, form.DCM_CONTINUATION_BELOW_15_DIGITS if below else above)
        stored = bid.from_double(bin_, away)
    difference = bid.TIES_EVEN.subtract(dec, bid.normalize(stored))
    form.put64(out, bid.parts(difference)[1] & bid.MASK64, negative)


def _append_tiny(out: bytearray, negative: bool, magnitude: Decimal, bin_magnitude: float) -> None:
    """Append a decimal below DBL_MIN that is no double (``_appendTinyDecimalWithoutTypeBits``)."""
    out.append(
        ctype.NUMERIC_NEGATIVE_SMALL_MAGNITUDE
        if negative
        else ctype.NUMERIC_POSITIVE_SMALL_MAGNITUDE
    )
    if bin_magnitude == 0.0:  # below the smallest subnormal: the raw decimal (prefix 0b00)
        norm = bid.normalize(magnitude)
        high, low = bid.words(norm)
        form.put64(out, high, negative)
        form.put64(out, low, negative)
        return
    # Scale in the decimal domain, rounding down at each step so the continuation is >= 0.
    scaled = bid.TOWARD_ZERO.multiply(magnitude, form.TINY_UP_FACTOR)
    scaled_bin = bid.to_double_toward_zero(*bid.parts(scaled)[1:])[0]
    scaled_bin = max(scaled_bin, bin_magnitude * 2.0**form.TINY_SHIFT)
    form.put64(out, ((form.double_bits(scaled_bin) << 1) | 1) + (1 << 62), negative)
    stored = bid.TOWARD_ZERO.multiply(
        bid.TOWARD_ZERO.plus(Decimal(scaled_bin)), form.TINY_DOWN_FACTOR
    )
    difference = bid.TIES_EVEN.subtract(magnitude, bid.normalize(stored))
    form.put64(out, bid.parts(difference)[1] & bid.MASK64, negative)
