"""Double-shaped KeyString V1 payloads.

Shared by :mod:`numeric` (real doubles, DCM 0) and :mod:`decimal128`.  A
Decimal128 that is close to a double is stored in the double's byte form plus a 2-bit *decimal
continuation marker* (DCM), so the server's double writers (``_appendDoubleWithoutTypeBits``,
``_appendSmallDouble``, ``_appendLargeDouble`` and ``_appendPreshiftedIntegerPortion`` in
``key_string.cpp``) live here, with DCM support (the continuation added to a decimal, the
cohort a stored exponent picks).  The Intel BID library calls behind them:
:mod:`decimal128_bid`.
"""

from __future__ import annotations

import math
import struct
from decimal import (
    ROUND_HALF_EVEN,
    Decimal,
    Inexact,
)
from typing import Final

from shardstream.resume_token.keystring import ctype
from shardstream.resume_token.keystring import decimal128_bid as bid

# DecimalContinuationMarker values (key_string.h).
DCM_EQUAL_TO_DOUBLE: Final = 0
DCM_CONTINUATION_BELOW_15_DIGITS: Final = 1
DCM_EQUAL_TO_15_DIGITS: Final = 2
DCM_CONTINUATION_ABOVE_15_DIGITS: Final = 3

TINIEST_2BIT_DCM: Final = math.ldexp(1.0, -255)  # smaller doubles keep only a 1-bit DCM
TINY_SHIFT: Final = 256  # exponent shift that lifts tiny doubles out of the subnormal range
MIN_LARGE: Final = 2.0**63
MAX_INT_FOR_DOUBLE: Final = 2.0**53
DBL_MIN: Final = 2.2250738585072014e-308


# 2**256 and 2**-256 rounded toward zero to 34 digits, as the server's constants.
TINY_UP_FACTOR: Final = bid.TOWARD_ZERO.plus(Decimal(2.0**TINY_SHIFT))
TINY_DOWN_FACTOR: Final = bid.TOWARD_ZERO.plus(Decimal(2.0**-TINY_SHIFT))


def double_bits(value: float) -> int:
    """Return the IEEE 754 bit pattern of ``value``."""
    bits: int = struct.unpack(">Q", struct.pack(">d", value))[0]
    return bits


def bits_double(bits: int) -> float:
    """Return the double whose IEEE 754 bit pattern is ``bits``."""
    value: float = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
    return value


def put64(out: bytearray, value: int, invert: bool) -> None:
    """Append ``value`` as 8 big-endian bytes, every bit flipped when ``invert``."""
    out += ((value ^ bid.MASK64) if invert else value).to_bytes(8, "big")


def add_continuation(value: Decimal, continuation: int) -> Decimal | None:
    """Widen ``value`` to 34 digits and add ``continuation`` units in its last place.

    Returns None when the sum would need rounding, which the server rejects.
    """
    value = bid.normalize(value)
    negative, _, exponent = bid.parts(value)
    ctx = bid.context(ROUND_HALF_EVEN)
    total = ctx.add(value, bid.make_decimal(negative, continuation, exponent))
    return None if ctx.flags[Inexact] else total


def with_exponent_bits(value: Decimal, stored: int) -> Decimal | None:
    """Return the cohort of non-zero ``value`` whose biased exponent is ``stored`` mod 64.

    A value spans at most 34 adjacent exponents (its coefficient grows from its shortest form
    up to 34 digits), fewer than 64, so at most one matches.  That is the exponent the
    server's up-or-down search in ``adjustDecimalExponent`` lands on whenever it succeeds,
    whatever cohort it starts from.
    """
    negative, coef, exponent = bid.parts(value)
    while coef % 10 == 0:
        coef //= 10
        exponent += 1
    highest = min(exponent, bid.MAX_EXPONENT)
    lowest = max(exponent - (34 - len(str(coef))), bid.MIN_EXPONENT)
    target = highest - (highest + bid.EXPONENT_BIAS - stored) % 64
    if target < lowest:
        return None
    return bid.make_decimal(negative, coef * 10 ** (exponent - target), target)


def append_preshifted_integer(out: bytearray, value: int, negative: bool) -> None:
    """Append ``value`` (the magnitude shifted left 1) in the fewest bytes that hold it.

    This is the server's ``_appendPreshiftedIntegerPortion``: the CType counts the bytes, up
    from 0x2B for positive values and down from 0x27, with inverted bytes, for negative ones.
    """
    size = (value.bit_length() + 7) // 8
    if negative:
        out.append(ctype.NUMERIC_NEGATIVE_1_BYTE_INT - (size - 1))
        out += (value ^ ((1 << (8 * size)) - 1)).to_bytes(size, "big")
    else:
        out.append(ctype.NUMERIC_POSITIVE_1_BYTE_INT + (size - 1))
        out += value.to_bytes(size, "big")


def append_small_double(out: bytearray, value: float, dcm: int) -> None:
    """Append a double with 0 < |value| < 1 and its DCM (the server's ``_appendSmallDouble``)."""
    negative = value < 0
    magnitude = -value if negative else value
    out.append(
        ctype.NUMERIC_NEGATIVE_SMALL_MAGNITUDE
        if negative
        else ctype.NUMERIC_POSITIVE_SMALL_MAGNITUDE
    )
    if magnitude >= TINIEST_2BIT_DCM:
        encoded = (double_bits(magnitude) << 2) | dcm  # top bits come out as 0b11
    else:
        # Scaling by 2**256 keeps 53 significant bits; the prefixes 0b01/0b10 sort these
        # below the 0b11 form and above the raw decimals of _appendTinyDecimal (0b00).
        encoded = (double_bits(magnitude * 2.0**TINY_SHIFT) << 1) | (dcm != DCM_EQUAL_TO_DOUBLE)
        encoded += 1 << 62
    put64(out, encoded, negative)


def append_large_double(out: bytearray, value: float, dcm: int) -> None:
    """Append a double with |value| >= 2**63, or an infinity (``_appendLargeDouble``).

    Only a 1-bit DCM fits: whether a decimal continuation follows.
    """
    out.append(
        ctype.NUMERIC_POSITIVE_LARGE_MAGNITUDE
        if value > 0
        else ctype.NUMERIC_NEGATIVE_LARGE_MAGNITUDE
    )
    if math.isfinite(value):
        # The top exponent bit is always 1 here, so dropping it frees the low bit for the DCM.
        encoded = ((double_bits(value) << 1) & bid.MASK64 & ~bid.SIGN_BIT) | (
            dcm != DCM_EQUAL_TO_DOUBLE
        )
    else:
        encoded = bid.MASK64
    put64(out, encoded, value < 0)


def append_double(out: bytearray, value: float, dcm: int) -> None:
    """Append the KeyString V1 form of a double with a DCM (``_appendDoubleWithoutTypeBits``).

    With ``dcm`` 0 this is exactly how the server writes a BSON double.
    """
    negative = value < 0
    magnitude = -value if negative else value
    if not magnitude >= 1.0:
        if magnitude > 0.0:
            append_small_double(out, value, dcm)
        elif value == 0.0:
            out.append(ctype.NUMERIC_ZERO)
        else:
            out.append(ctype.NUMERIC_NAN)
        return
    if magnitude >= MIN_LARGE:
        append_large_double(out, value, dcm)
        return
    integer_part = int(magnitude)
    if integer_part == magnitude and dcm == DCM_EQUAL_TO_DOUBLE:
        append_preshifted_integer(out, integer_part << 1, negative)
        return
    # Fractional form: always 8 bytes; the high bytes look like the integer form of 2I+1.
    fraction_bytes = (64 - (integer_part << 1).bit_length()) // 8
    out.append(
        ctype.NUMERIC_NEGATIVE_8_BYTE_INT + fraction_bytes
        if negative
        else ctype.NUMERIC_POSITIVE_8_BYTE_INT - fraction_bytes
    )
    encoded = int(math.ldexp(magnitude, 8 * fraction_bytes))
    encoded += (integer_part + 1) << (8 * fraction_bytes)
    put64(out, encoded | dcm, negative)
