"""Tests for the KeyString V1 Decimal128 codec (shardstream.resume_token.keystring.decimal128).

The expected bytes come from the server's ``key_string.cpp`` (see the module docstring) and
from the team's reference notes (shared/docs/resume_token.md section 3.1); the properties
checked are the ones the server relies on: decode(encode(x)) gives back the exact BID bits,
equal numbers give equal bytes whatever their type or cohort, and byte order is numeric
order.
"""

from __future__ import annotations

import contextlib
import math
import struct
from decimal import Decimal

import pytest
from bson.decimal128 import Decimal128
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.keystring import decimal128_bid as bid
from shardstream.resume_token.keystring import double_form as form
from shardstream.resume_token.keystring.byte_reader import ByteReader
from shardstream.resume_token.keystring.decimal128 import encode_decimal128
from shardstream.resume_token.keystring.decimal128_decoder import (
    decode_decimal128,
    decode_decimal128_zero,
)
from shardstream.resume_token.keystring.type_bits import TypeBitsReader, TypeBitsWriter

_SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_SENTINEL = (1, 0, 1)  # type bits appended after a value, to prove the decoder stops in time


def encode(value: Decimal128) -> tuple[bytes, TypeBitsWriter]:
    out = bytearray()
    bits = TypeBitsWriter()
    encode_decimal128(value, out, bits)
    return bytes(out), bits


def bit_list(bits: TypeBitsWriter) -> list[int]:
    return [(bits.value >> i) & 1 for i in range(bits.count)]


def reader_for(bits: list[int]) -> TypeBitsReader:
    writer = TypeBitsWriter()
    for bit in bits:
        writer.append_bit(bit)
    return TypeBitsReader(writer.value.to_bytes((writer.count + 7) // 8, "little"))


def decode(data: bytes, bits: list[int]) -> Decimal128:
    """Decode like the caller will: CType, 2 numeric bits, then hand over to the module."""
    type_bits = reader_for([*bits, *_SENTINEL])
    assert type_bits.read_bits(2) == 0b11
    if data[0] == 0x29:
        value = decode_decimal128_zero(type_bits, type_bits.read_bits(3))
        assert len(data) == 1
    else:
        reader = ByteReader(data, 1)
        value = decode_decimal128(data[0], reader, type_bits)
        assert reader.at_end(), f"{reader.remaining} byte(s) left over in {data.hex()}"
    assert tuple(type_bits.read_bit() for _ in _SENTINEL) == _SENTINEL
    return value


def round_trip(value: Decimal128) -> bytes:
    data, bits = encode(value)
    decoded = decode(data, bit_list(bits))
    assert decoded.bid == value.bid, f"{value} -> {data.hex()} -> {decoded}"
    return data


def encode_float(value: float) -> bytes:
    out = bytearray()
    form.append_double(out, value, form.DCM_EQUAL_TO_DOUBLE)
    return bytes(out)


def encode_int(value: int) -> bytes:
    out = bytearray()
    if value == 0:
        out.append(0x29)
    elif value == -(1 << 63):  # the server writes int64 min as the double -2**63
        form.append_large_double(out, float(value), form.DCM_EQUAL_TO_DOUBLE)
    else:
        form.append_preshifted_integer(out, abs(value) << 1, value < 0)
    return bytes(out)


# --- known vectors ---------------------------------------------------------------------------

EXPONENT_31 = [1, 1, 0, 1, 1, 1, 1, 1]  # decimal, then biased exponent 6175 & 63 = 31


@pytest.mark.parametrize(
    ("text", "hex_bytes", "bits"),
    [
        ("1.5", "2B 03 80 00 00 00 00 00 00", EXPONENT_31),
        ("0.1", "2A FE E6 66 66 66 66 66 66", EXPONENT_31),
        ("6", "2B 0C", [1, 1, 1, 0, 0, 0, 0, 0]),  # biased exponent 6176 & 63 = 32
        ("1.50", "2B 03 80 00 00 00 00 00 00", [1, 1, 0, 1, 1, 1, 1, 0]),
        ("-1.5", "27 FC 7F FF FF FF FF FF FF", EXPONENT_31),
        ("NaN", "1E", [1, 1]),
        ("Infinity", "33 FF FF FF FF FF FF FF FF", [1, 1]),
        ("-Infinity", "1F 00 00 00 00 00 00 00 00", [1, 1]),
        # 0E0: biased exponent 6176 = 0b1_1000_0010_0000 -> code 0x1A + 1, then 12 bits 2080.
        ("0", "29", [1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]),
    ],
)
def test_known_vectors(text: str, hex_bytes: str, bits: list[int]) -> None:
    data, written = encode(Decimal128(text))
    assert data == bytes.fromhex(hex_bytes)
    assert bit_list(written) == bits
    assert decode(data, bits).bid == Decimal128(text).bid


def test_decodes_fifteen_digit_point_one() -> None:
    value = decode(bytes.fromhex("2AFEE6666666666666"), EXPONENT_31)
    assert str(value) == "0.1"


@pytest.mark.parametrize(
    ("value", "hex_bytes"),
    [
        (1.0, "2B 02"),
        (128.0, "2C 01 00"),
        (-300.0, "26 FD A7"),
        (5.5, "2B 0B 80 00 00 00 00 00 00"),
        (-2.75, "27 FA 3F FF FF FF FF FF FF"),
        (-(2.0**63), "1F F8 3F FF FF FF FF FF FF"),
        (math.inf, "33 FF FF FF FF FF FF FF FF"),
        (0.0, "29"),
    ],
)
def test_private_double_writer_matches_documented_vectors(value: float, hex_bytes: str) -> None:
    assert encode_float(value) == bytes.fromhex(hex_bytes)


# --- every branch, round trip ----------------------------------------------------------------

BRANCH_CASES = {
    # exactly a double (DCM 0)
    "1.5": "2B",
    "0.5": "2A",
    "1180591620717411303424": "33",  # 2**70: large double without continuation
    "1.7976931348623157E+308": "33",
    # at most 15 digits (DCM 2), also hidden behind trailing zeros
    "0.1": "2A",
    "1.23456789012345": "2B",
    "0.1000000000000000000000000000000000": "2A",
    "123456789.123456": "2E",
    # decimal continuation (DCM 1 and 3)
    "0.09999999999999999999": "2A",
    "1.234567890123456789": "2B",
    "0.1000000000000000000000000000000001": "2A",
    "0.9999999999999999999999999999999999": "2A",
    "1.000000000000000000000000000000001": "2B",
    "3.141592653589793238462643383279503": "2B",
    # tiny: below the smallest subnormal (raw), in the subnormal range, below 2**-255
    "1E-6176": "2A",
    "1.234E-6000": "2A",
    "4.9E-324": "2A",
    "5E-324": "2A",
    "1E-310": "2A",
    "1.234567890123456789E-320": "2A",
    "2.225073858507201E-308": "2A",
    "1E-300": "2A",
    "1.5E-77": "2A",
    # huge: at or above DBL_MAX but not a double
    "9.999999999999999999999999999999999E+6144": "33",
    "1E+6144": "33",
    "1.8E+308": "33",
    "1.797693134862315708145274237317044E+308": "33",
    # at or above 2**63: a continuation even for few digits
    "1E+30": "33",
    "12345678901234567890.123": "33",
    "9223372036854775808.5": "33",
    # between 2**53 and 2**63: exact integer part, DCM byte when 7 bytes, continuation
    "9007199254740993": "31",
    "9007199254740993.5": "31",
    "36028797018963968.5": "32",
    "9223372036854775807.5": "32",
    "123456789012345678.9": "32",
    "9223372036854775807": "32",
    "1.0000000000000001E+16": "31",
}


@pytest.mark.parametrize("text", sorted(BRANCH_CASES))
@pytest.mark.parametrize("sign", ["", "-"])
def test_branch_round_trip(text: str, sign: str) -> None:
    data = round_trip(Decimal128(sign + text))
    expected = int(BRANCH_CASES[text], 16)
    assert data[0] == (expected if not sign else 0x29 * 2 - expected)


def test_payload_shapes() -> None:
    """Each branch writes the payload length and markers the server's writer does."""
    fifteen = encode(Decimal128("0.1"))[0]
    below = encode(Decimal128("1.234567890123456789"))[0]  # < 1.23456789012346
    above = encode(Decimal128("0.1000000000000000000000000000000001"))[0]
    assert (len(fifteen), fifteen[-1] & 3) == (9, 2)
    assert (len(below), below[8] & 3) == (17, 1)
    assert (len(above), above[8] & 3) == (17, 3)
    raw_tiny = encode(Decimal128("1E-6176"))[0]
    assert (len(raw_tiny), raw_tiny[1] >> 6) == (17, 0)
    scaled_tiny = encode(Decimal128("1E-310"))[0]
    assert (len(scaled_tiny), scaled_tiny[1] >> 6, scaled_tiny[8] & 1) == (17, 1, 1)
    huge = encode(Decimal128("1.8E+308"))[0]
    assert (len(huge), huge[1] >> 7) == (17, 1)
    large = encode(Decimal128("1E+30"))[0]
    assert (len(large), large[1] >> 7, large[8] & 1) == (17, 0, 1)
    seven_bytes = encode(Decimal128("9007199254740993.5"))[0]
    assert (len(seven_bytes), seven_bytes[8]) == (17, 3)
    assert encode(Decimal128("-9007199254740993.5"))[0][8] == 0xFC
    assert encode(Decimal128("9007199254740993"))[0] == encode_int(2**53 + 1)


@pytest.mark.parametrize("text", ["NaN", "-NaN", "sNaN", "-sNaN"])
def test_every_nan_encodes_as_the_nan_ctype(text: str) -> None:
    assert encode(Decimal128(text))[0] == b"\x1e"
    assert str(decode(b"\x1e", [1, 1])) == "NaN"


def test_every_zero_cohort_round_trips() -> None:
    for negative in (False, True):
        for biased in range(bid.MAX_BIASED_EXPONENT + 1):
            value = bid.from_words((bid.SIGN_BIT if negative else 0) | (biased << 49), 0)
            data, bits = encode(value)
            assert data == b"\x29"
            assert bits.count == 17
            assert decode(data, bit_list(bits)).bid == value.bid


@pytest.mark.parametrize("text", ["0E-6176", "-0E+6111", "0.00", "-0", "0E+6111", "-0E-6176"])
def test_named_zero_cohorts(text: str) -> None:
    assert round_trip(Decimal128(text)) == b"\x29"


def test_cohorts_share_bytes_but_not_type_bits() -> None:
    one_and_half = [Decimal128(t) for t in ("1.5", "1.50", "1.500", "1.500000000000000000000")]
    encodings = [encode(value) for value in one_and_half]
    assert len({data for data, _ in encodings}) == 1
    assert len({tuple(bit_list(bits)) for _, bits in encodings}) == len(one_and_half)
    for value in one_and_half:
        round_trip(value)


# --- random decimals -------------------------------------------------------------------------


@st.composite
def finite_decimals(draw: st.DrawFn) -> Decimal128:
    """Finite non-zero decimals of any length, weighted towards the interesting magnitudes."""
    digits = draw(st.integers(1, 34))
    coef = draw(st.integers(10 ** (digits - 1), 10**digits - 1))
    if draw(st.booleans()):
        coef = int(str(coef)[: draw(st.integers(1, digits))].ljust(digits, "0"))
    magnitude = draw(
        st.one_of(
            st.integers(-6176 + 33, 6144),
            st.integers(-20, 20),
            st.integers(-330, -300),
            st.integers(-80, -70),
            st.integers(300, 310),
            st.integers(15, 20),
        )
    )
    exponent = min(max(magnitude - digits + 1, bid.MIN_EXPONENT), bid.MAX_EXPONENT)
    return Decimal128(bid.make_decimal(draw(st.booleans()), coef, exponent))


def as_exact(value: Decimal128) -> Decimal:
    return value.to_decimal()


@_SETTINGS
@given(finite_decimals())
def test_random_decimals_round_trip(value: Decimal128) -> None:
    round_trip(value)


@_SETTINGS
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_decimals_equal_to_doubles_share_their_bytes(value: float) -> None:
    exact = Decimal(value)
    if len(exact.as_tuple().digits) > 34:
        exact = bid.TIES_EVEN.plus(exact)  # not a decimal128: compare the rounded value
        expected = None
    else:
        expected = encode_float(value)
    decimal = Decimal128(exact)
    data = round_trip(decimal)
    if expected is not None:
        assert data == expected


@_SETTINGS
@given(finite_decimals(), finite_decimals())
def test_byte_order_is_numeric_order(left: Decimal128, right: Decimal128) -> None:
    check_order(as_exact(left), encode(left)[0], as_exact(right), encode(right)[0])


@_SETTINGS
@given(
    finite_decimals(),
    st.one_of(
        st.floats(allow_nan=False).map(lambda x: (Decimal(x), encode_float(x))),
        st.integers(-(1 << 63), (1 << 63) - 1).map(lambda n: (Decimal(n), encode_int(n))),
    ),
)
def test_order_against_doubles_and_ints(decimal: Decimal128, other: tuple[Decimal, bytes]) -> None:
    exact, data = other
    if exact.is_infinite():
        assert (encode(decimal)[0] < data) == (exact > 0)
        return
    check_order(as_exact(decimal), encode(decimal)[0], exact, data)


@pytest.mark.parametrize(
    "texts",
    [
        ["0.09999999999999999999", "0.1", "0.1000000000000000000001", "0.1000000000000000055511"],
        ["1.797693134862315708145274237317043E+308", "1.8E+308", "1E+6144", "Infinity"],
        ["1E-6176", "2E-6176", "1E-400", "4.9E-324", "5E-324", "1E-310", "2.3E-308", "1E-77"],
        ["9007199254740992", "9007199254740992.5", "9007199254740993", "9223372036854775807.9"],
        ["0", "1E-6176", "0.5", "1", "1.000000000000000000000000000000001", "1E+30"],
    ],
)
def test_hand_picked_order(texts: list[str]) -> None:
    for sign in (1, -1):
        values = [Decimal128(("-" if sign < 0 else "") + text) for text in texts]
        encoded = [encode(value)[0] for value in values]
        assert encoded == sorted(encoded, reverse=sign < 0)
        assert len(set(encoded)) == len(encoded)


def check_order(left: Decimal, left_bytes: bytes, right: Decimal, right_bytes: bytes) -> None:
    if left < right:
        assert left_bytes < right_bytes, f"{left} < {right} but {left_bytes.hex()} >= ..."
    elif left > right:
        assert left_bytes > right_bytes, f"{left} > {right} but {left_bytes.hex()} <= ..."
    else:
        assert left_bytes == right_bytes


@_SETTINGS
@given(st.integers(1, 10**34 - 1), st.integers(bid.MIN_EXPONENT, bid.MAX_EXPONENT))
def test_conversion_to_double_rounds_toward_zero(coef: int, exponent: int) -> None:
    result, inexact = bid.to_double_toward_zero(coef, exponent)
    exact = Decimal(coef).scaleb(exponent, bid.TIES_EVEN)
    assert Decimal(result) <= exact
    assert inexact == (Decimal(result) != exact)
    if result < bid.DBL_MAX:
        assert Decimal(math.nextafter(result, math.inf)) > exact


# --- invalid input ---------------------------------------------------------------------------

NUMERIC_CTYPES = [c for c in range(0x1E, 0x34) if c != 0x29]


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from([*NUMERIC_CTYPES, 0x29, 0x00, 0x3C]),
    st.binary(max_size=20),
    st.lists(st.integers(0, 1), max_size=10),
)
def test_random_payloads_only_raise_resume_token_errors(
    ct: int, payload: bytes, bits: list[int]
) -> None:
    with contextlib.suppress(ResumeTokenError):
        decode_decimal128(ct, ByteReader(payload), reader_for(bits))


@settings(max_examples=100, deadline=None)
@given(st.integers(-3, 10), st.lists(st.integers(0, 1), max_size=14))
def test_random_zero_codes_only_raise_resume_token_errors(first: int, bits: list[int]) -> None:
    try:
        value = decode_decimal128_zero(reader_for(bits), first)
    except ResumeTokenError:
        assert not 2 <= first <= 7 or len(bits) < 12
    else:
        assert value.to_decimal().is_zero()


def _replace(data: bytes, offset: int, new: bytes) -> bytes:
    return data[:offset] + new + data[offset + len(new) :]


def _without_continuation_flag(data: bytes) -> bytes:
    """The 8-byte tiny-double form of ``data`` with its continuation bit cleared."""
    return data[:8] + bytes([data[8] & 0xFE])


@pytest.mark.parametrize(
    ("data", "bits"),
    [
        # an integer part of zero is no decimal (adjustDecimalExponent wants non-zero)
        (bytes.fromhex("2B00"), EXPONENT_31),
        # a tiny double form without its continuation flag (server: 50823)
        (_without_continuation_flag(encode(Decimal128("1E-310"))[0]), EXPONENT_31),
        # a continuation that no longer fits in 34 digits (server: 50815)
        (
            _replace(encode(Decimal128("0.9999999999999999999999999999999999"))[0], 9, b"\xff" * 8),
            [1, 1, 0, 0, 0, 0, 0, 0],
        ),
        # exponent bits that name no cohort of 1.5 (biased 6143..6175: 63 and 0..31 mod 64)
        (bytes.fromhex("2B0380000000000000"), [1, 1, 1, 0, 1, 0, 0, 0]),
        # a raw huge decimal whose coefficient is past 34 digits, i.e. a zero
        (bytes.fromhex("338001FFFFFFFFFFFF") + b"\xff" * 8, EXPONENT_31),
        # the same with a non-canonical combination field (also a zero)
        (bytes.fromhex("33E000000000000000") + b"\x00" * 8, EXPONENT_31),
        # truncated payloads
        (bytes.fromhex("2B03"), EXPONENT_31),
        (encode(Decimal128("1E+30"))[0][:12], EXPONENT_31),
        # the zero CType is not decoded here
        (b"\x29", EXPONENT_31),
    ],
)
def test_invalid_payloads_raise(data: bytes, bits: list[int]) -> None:
    with pytest.raises(ResumeTokenError):
        decode_decimal128(data[0], ByteReader(data, 1), reader_for(bits))


def test_missing_exponent_bits_raise() -> None:
    data = encode(Decimal128("1.5"))[0]
    type_bits = TypeBitsReader(bytes([0b11]))  # only 8 bits, all used by the caller's 2 + 6
    type_bits.read_bits(8)
    with pytest.raises(ResumeTokenError):
        decode_decimal128(data[0], ByteReader(data, 1), type_bits)


def test_double_bits_helpers_agree_with_struct() -> None:
    assert form.double_bits(1.5) == struct.unpack(">Q", struct.pack(">d", 1.5))[0]
    assert form.bits_double(0x3FB9999999999999) == 0.09999999999999999
