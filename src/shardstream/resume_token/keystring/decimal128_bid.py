"""The Intel BID library calls the server makes through ``Decimal128`` (``decimal128.cpp``),
emulated with :mod:`decimal` and exact integer arithmetic: a Decimal128's BID words and
their parts, the decimal-to-double conversion rounded toward zero, the double-to-decimal
conversion to 34 or 15 digits, and ``normalize``.  Python's :mod:`decimal` follows the same
IEEE 754-2008 rules (correct rounding, preferred exponents), so the values and cohorts
agree.  The KeyString forms built on them: :mod:`double_form`.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_DOWN, ROUND_FLOOR, ROUND_HALF_EVEN, Context, Decimal
from typing import Final

from bson.decimal128 import Decimal128

from shardstream.errors import ResumeTokenError

MASK64: Final = (1 << 64) - 1
MAX_COEFFICIENT: Final = 10**34 - 1
# Biased exponent of a Decimal128 whose last digit is in the units place (kExponentBias).
EXPONENT_BIAS: Final = 6176
MAX_BIASED_EXPONENT: Final = 12287
MAX_EXPONENT: Final = MAX_BIASED_EXPONENT - EXPONENT_BIAS  # 6111
MIN_EXPONENT: Final = -EXPONENT_BIAS  # -6176
SIGN_BIT: Final = 1 << 63
NAN_HIGH: Final = 0x7C << 56  # high BID word of a quiet NaN (kPositiveNaN)
INFINITY_HIGH: Final = 0x78 << 56
DBL_MAX: Final = 1.7976931348623157e308
_ZERO_LOWEST_EXPONENT: Final = Decimal("0E-6176")  # kLargestNegativeExponentZero


def context(rounding: str) -> Context:
    """Return a Decimal128 (IEEE decimal128) arithmetic context with the given rounding."""
    return Context(prec=34, Emax=6144, Emin=-6143, clamp=1, rounding=rounding, traps=[])


TOWARD_ZERO: Final = context(ROUND_DOWN)
TIES_EVEN: Final = context(ROUND_HALF_EVEN)
UPWARD: Final = context(ROUND_CEILING)
DOWNWARD: Final = context(ROUND_FLOOR)


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


def normalize(value: Decimal) -> Decimal:
    """Add 0E-6176, widening the coefficient to 34 digits (``Decimal128::normalize``)."""
    return TIES_EVEN.add(value, _ZERO_LOWEST_EXPONENT)


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
