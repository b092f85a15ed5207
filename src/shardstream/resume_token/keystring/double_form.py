"""Double-shaped KeyString V1 payloads and the exact decimal arithmetic behind them.

Shared by :mod:`numeric` (real doubles, DCM 0) and :mod:`decimal128`.  A
Decimal128 that is close to a double is stored in the double's byte form plus a 2-bit *decimal
continuation marker* (DCM), so the server's double writers (``_appendDoubleWithoutTypeBits``,
``_appendSmallDouble``, ``_appendLargeDouble`` and ``_appendPreshiftedIntegerPortion`` in
``key_string.cpp``) live here, with DCM support.

It also emulates, with :mod:`decimal` and exact integer arithmetic, the few Intel BID library
calls the server makes through ``Decimal128`` (``decimal128.cpp``): the decimal-to-double
conversion rounded toward zero, the double-to-decimal conversion to 34 or 15 digits, and
``normalize``.  Python's :mod:`decimal` follows the same IEEE 754-2008 rules (correct rounding,
preferred exponents), so the values and cohorts agree.
"""

from __future__ import annotations

import math
import struct
from decimal import (
    ROUND_CEILING,
    ROUND_DOWN,
    ROUND_FLOOR,
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    Inexact,
)
from typing import Final

from bson.decimal128 import Decimal128

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.keystring import ctype

# DecimalContinuationMarker values (key_string.h).
DCM_EQUAL_TO_DOUBLE: Final = 0
DCM_CONTINUATION_BELOW_15_DIGITS: Final = 1
DCM_EQUAL_TO_15_DIGITS: Final = 2
DCM_CONTINUATION_ABOVE_15_DIGITS: Final = 3

MASK64: Final = (1 << 64) - 1
MAX_COEFFICIENT: Final = 10**34 - 1
# Biased exponent of a Decimal128 whose last digit is in the units place (kExponentBias).
EXPONENT_BIAS: Final = 6176
MAX_BIASED_EXPONENT: Final = 12287
TINIEST_2BIT_DCM: Final = math.ldexp(1.0, -255)  # smaller doubles keep only a 1-bit DCM
TINY_SHIFT: Final = 256  # exponent shift that lifts tiny doubles out of the subnormal range
MIN_LARGE: Final = 2.0**63
MAX_INT_FOR_DOUBLE: Final = 2.0**53
DBL_MIN: Final = 2.2250738585072014e-308
DBL_MAX: Final = 1.7976931348623157e308

MAX_EXPONENT: Final = MAX_BIASED_EXPONENT - EXPONENT_BIAS  # 6111
MIN_EXPONENT: Final = -EXPONENT_BIAS  # -6176
SIGN_BIT: Final = 1 << 63
NAN_HIGH: Final = 0x7C << 56  # high BID word of a quiet NaN (kPositiveNaN)
INFINITY_HIGH: Final = 0x78 << 56
_ZERO_LOWEST_EXPONENT: Final = Decimal("0E-6176")  # kLargestNegativeExponentZero


def context(rounding: str) -> Context:
    """Return a Decimal128 (IEEE decimal128) arithmetic context with the given rounding."""
    return Context(prec=34, Emax=6144, Emin=-6143, clamp=1, rounding=rounding, traps=[])


TOWARD_ZERO: Final = context(ROUND_DOWN)
TIES_EVEN: Final = context(ROUND_HALF_EVEN)
UPWARD: Final = context(ROUND_CEILING)
DOWNWARD: Final = context(ROUND_FLOOR)

# 2**256 and 2**-256 rounded toward zero to 34 digits, as the server's constants.
TINY_UP_FACTOR: Final = TOWARD_ZERO.plus(Decimal(2.0**TINY_SHIFT))
TINY_DOWN_FACTOR: Final = TOWARD_ZERO.plus(Decimal(2.0**-TINY_SHIFT))


def away_from_zero(negative: bool) -> Context:
    """Return the context that rounds magnitudes up (the server's ``roundAwayFromZero``)."""
    return DOWNWARD if negative else UPWARD


def unpack_bid(high: int, low: int) -> tuple[str, bool, int, int]:
    """Split BID words into (kind, negative, coefficient, biased exponent).

    ``kind`` is "nan", "inf" or "finite"; a non-canonical finite value reads as a zero, as in
    the Intel library (``Decimal128::getBiasedExponent`` / ``isZero``).
    """
    negative = bool(high & SIGN_BIT)
    top = (high >> 58) & 0x1F
    if top == 0x1F:
        return "nan", negative, 0, 0
    if top == 0x1E:
        return "inf", negative, 0, 0
    if (high >> 61) & 0b11 == 0b11:
        return "finite", negative, 0, (high >> 47) & 0x3FFF
    coef = ((high & ((1 << 49) - 1)) << 64) | low
    return "finite", negative, (coef if coef <= MAX_COEFFICIENT else 0), (high >> 49) & 0x3FFF


def from_words(high: int, low: int) -> Decimal128:
    """Return the Decimal128 with the given high and low BID words."""
    return Decimal128.from_bid(low.to_bytes(8, "little") + high.to_bytes(8, "little"))


def make_decimal(negative: bool, coef: int, exponent: int) -> Decimal:
    """Return the decimal ``(-1)**negative * coef * 10**exponent``, cohort kept."""
    return Decimal((int(negative), tuple(map(int, str(coef))), exponent))


def parts(value: Decimal) -> tuple[bool, int, int]:
    """Return (negative, coefficient, exponent) of a finite decimal."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ResumeTokenError(f"expected a finite decimal, found {value!r}")
    return bool(sign), int("".join(map(str, digits))), exponent


def words(value: Decimal) -> tuple[int, int]:
    """Return the (high, low) BID words of a finite decimal in the Decimal128 range."""
    negative, coef, exponent = parts(value)
    high = (SIGN_BIT if negative else 0) | ((exponent + EXPONENT_BIAS) << 49) | (coef >> 64)
    return high, coef & MASK64


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
    out += ((value ^ MASK64) if invert else value).to_bytes(8, "big")


def normalize(value: Decimal) -> Decimal:
    """Add 0E-6176, widening the coefficient to 34 digits (``Decimal128::normalize``)."""
    return TIES_EVEN.add(value, _ZERO_LOWEST_EXPONENT)


def add_continuation(value: Decimal, continuation: int) -> Decimal | None:
    """Widen ``value`` to 34 digits and add ``continuation`` units in its last place.

    Returns None when the sum would need rounding, which the server rejects.
    """
    value = normalize(value)
    negative, _, exponent = parts(value)
    ctx = context(ROUND_HALF_EVEN)
    total = ctx.add(value, make_decimal(negative, continuation, exponent))
    return None if ctx.flags[Inexact] else total


def with_exponent_bits(value: Decimal, stored: int) -> Decimal | None:
    """Return the cohort of non-zero ``value`` whose biased exponent is ``stored`` mod 64.

    A value spans at most 34 adjacent exponents (its coefficient grows from its shortest form
    up to 34 digits), fewer than 64, so at most one matches.  That is the exponent the
    server's up-or-down search in ``adjustDecimalExponent`` lands on whenever it succeeds,
    whatever cohort it starts from.
    """
    negative, coef, exponent = parts(value)
    while coef % 10 == 0:
        coef //= 10
        exponent += 1
    highest = min(exponent, MAX_EXPONENT)
    lowest = max(exponent - (34 - len(str(coef))), MIN_EXPONENT)
    target = highest - (highest + EXPONENT_BIAS - stored) % 64
    if target < lowest:
        return None
    return make_decimal(negative, coef * 10 ** (exponent - target), target)


def to_double_toward_zero(coef: int, exponent: int) -> tuple[float, bool]:
    """Convert ``coef * 10**exponent`` (``coef >= 0``) to a double, rounding toward zero.

    Returns the magnitude and whether the conversion was inexact.  Like the Intel library
    with round-toward-zero, a value past the finite range gives the largest finite double.
    """
    if coef == 0:
        return 0.0, False
    num, den = (coef * 10**exponent, 1) if exponent >= 0 else (coef, 10**-exponent)
    binary_exp = num.bit_length() - den.bit_length()  # floor(log2(value)) or one more
    if (num << max(-binary_exp, 0)) < (den << max(binary_exp, 0)):
        binary_exp -= 1
    if binary_exp > 1023:
        return DBL_MAX, True
    # Scale so the quotient keeps the 53 bits of a normal double, or fewer for a subnormal.
    shift = 52 - max(binary_exp, -1022)
    if shift >= 0:
        quotient, remainder = divmod(num << shift, den)
    else:
        quotient, remainder = divmod(num, den << -shift)
    return math.ldexp(quotient, -shift), remainder != 0


def from_double(value: float, rounding: Context, *, fifteen_digits: bool = False) -> Decimal:
    """Convert a double to 34 digits, or 15, like ``Decimal128(double, precision, roundMode)``.

    The 15-digit form quantizes the 34-digit conversion with the server's exponent estimate
    ``floor(base2Exp * 0.30103) - 14``, retrying one decade up when 16 digits come out.  Both
    steps round in the same direction, which is all the server ever asks for here.
    """
    converted = rounding.plus(Decimal(value))
    if not fifteen_digits or value == 0.0 or not math.isfinite(value):
        return converted
    decade = ((math.frexp(value)[1] - 1) * 30103) // 100000
    result = converted.quantize(Decimal(f"1E{decade - 14}"), context=rounding)
    if parts(result)[1] >= 10**15:
        result = converted.quantize(Decimal(f"1E{decade - 13}"), context=rounding)
    return result


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
        encoded = ((double_bits(value) << 1) & MASK64 & ~SIGN_BIT) | (dcm != DCM_EQUAL_TO_DOUBLE)
    else:
        encoded = MASK64
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
