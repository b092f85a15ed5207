"""Properties of the codec over random input (Hypothesis).

* decode(encode(x)) == x, BSON types included, for token data of every version
  with document keys of every BSON type;
* token byte order equals KeyString value order;
* random bytes, hex and type bits only ever raise ResumeTokenError.
"""

from __future__ import annotations

import json
import math
import uuid
from fractions import Fraction
from typing import Any

from bson import json_util
from bson.binary import Binary
from bson.code import Code
from bson.datetime_ms import DatetimeMS
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from shardstream.errors import ResumeTokenError
from shardstream.resume_token import (
    UNDEFINED,
    DBPointer,
    ResumeToken,
    ResumeTokenData,
    Symbol,
    decode_token,
    encode_token,
)
from shardstream.resume_token.keystring.codec import encode_values
from shardstream.resume_token.keystring.type_bits import TypeBitsWriter
from shardstream.resume_token.token_json import (
    JSON_OPTIONS,
    dumps,
    loads,
    token_data_to_document,
)
from tests.strategies import INT32, INT64, OBJECT_IDS, TEXT, TIMESTAMPS, UUIDS, token_data

TIME = Timestamp(1700000000, 7)


def _typed(data: ResumeTokenData) -> str:
    """A rendering that tells apart every BSON type (int vs long, NaN, -0.0, Symbol...)."""
    return dumps(token_data_to_document(data))


@given(token_data())
def test_round_trip_keeps_values_and_types(data: ResumeTokenData) -> None:
    token = encode_token(data)
    assert token.data == token.data.upper()
    decoded = decode_token(token)
    assert _typed(decoded) == _typed(data)
    assert encode_token(decoded) == token
    assert encode_token(decoded).type_bits == token.type_bits


def _event_token(value: Any) -> ResumeToken:
    return encode_token(
        ResumeTokenData(
            cluster_time=TIME,
            event_identifier={"operationType": "insert", "documentKey": {"_id": value}},
        )
    )


NUMBERS = st.one_of(INT32, INT64, st.floats(allow_nan=False))


def _exact(value: Any) -> Fraction | float:
    return value if math.isinf(value) else Fraction(value)


@given(NUMBERS, NUMBERS)
def test_numbers_order_by_value_across_types(left: Any, right: Any) -> None:
    left_key, right_key = _event_token(left).sort_key, _event_token(right).sort_key
    a, b = _exact(left), _exact(right)
    assert (left_key < right_key) == (a < b)
    assert (left_key == right_key) == (a == b)


@given(TEXT, TEXT)
def test_strings_order_by_utf8_bytes(left: str, right: str) -> None:
    left_key, right_key = _event_token(left).sort_key, _event_token(right).sort_key
    assert (left_key < right_key) == (left.encode() < right.encode())


@given(st.binary(max_size=300), st.binary(max_size=300))
def test_bin_data_orders_by_length_then_bytes(left: bytes, right: bytes) -> None:
    left_key, right_key = _event_token(left).sort_key, _event_token(right).sort_key
    assert (left_key < right_key) == ((len(left), left) < (len(right), right))


def test_named_examples_sort_as_the_issue_states() -> None:
    assert _event_token(1) < _event_token(1.5) < _event_token(Int64(2))
    assert _event_token("a") < _event_token("ab")
    assert _event_token(b"\xff") < _event_token(b"\x00\x00")
    assert _event_token(1) == _event_token(1.0) == _event_token(Int64(1))


def test_bson_types_sort_in_canonical_type_order() -> None:
    ordered = [
        MinKey(),
        UNDEFINED,
        None,
        -1.5,
        "string",
        {"a": 1},
        [1],
        Binary(b"x", 0),
        ObjectId("65a1b2c3d4e5f60718293a4b"),
        False,
        True,
        DatetimeMS(0),
        Timestamp(1, 1),
        Regex("a", "i"),
        DBPointer("db.c", ObjectId("65a1b2c3d4e5f60718293a4b")),
        Code("x"),
        Code("x", {}),
        MaxKey(),
    ]
    keys = [_event_token(value).sort_key for value in ordered]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)
    assert _event_token(Symbol("s")).sort_key == _event_token("s").sort_key


def _decoded_or_error(token: ResumeToken | str) -> ResumeTokenData | ResumeTokenError:
    """Decode, turning the one allowed failure into a value; any other exception escapes."""
    try:
        return decode_token(token)
    except ResumeTokenError as exc:
        error = exc
    message = str(error)
    assert "expected" in message or "invalid" in message, message
    return error


@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=8)))
def test_random_bytes_only_raise_resume_token_error(raw: bytes, type_bits: bytes | None) -> None:
    assert _decoded_or_error(ResumeToken(raw.hex().upper(), type_bits))


@given(st.text(max_size=40))
def test_random_text_only_raises_resume_token_error(text: str) -> None:
    assert _decoded_or_error(text)


@given(token_data(), st.data())
def test_damaged_real_tokens_only_raise_resume_token_error(
    data: ResumeTokenData, draw: st.DataObject
) -> None:
    raw = bytearray.fromhex(encode_token(data).data)
    position = draw.draw(st.integers(0, len(raw) - 1))
    if draw.draw(st.booleans()):
        raw[position] = draw.draw(st.integers(0, 255))
    else:
        del raw[position:]
    assert _decoded_or_error(ResumeToken(raw.hex().upper(), encode_token(data).type_bits))


@given(
    TIMESTAMPS,
    st.one_of(st.none(), UUIDS),
    st.sampled_from(["insert", "update", "replace", "delete", "x\x00y", ""]),
    st.integers(0, 300),
    st.booleans(),
    OBJECT_IDS,
)
def test_object_id_template_matches_the_general_encoder(
    time: Timestamp,
    uuid_value: uuid.UUID | None,
    operation_type: str,
    txn_op_index: int,
    from_invalidate: bool,
    object_id: ObjectId,
) -> None:
    data = ResumeTokenData(
        cluster_time=time,
        uuid=uuid_value,
        txn_op_index=txn_op_index,
        from_invalidate=from_invalidate,
        event_identifier={"operationType": operation_type, "documentKey": {"_id": object_id}},
    )
    general = bytearray()
    bits = TypeBitsWriter()
    encode_values(
        [time, 2, 128, txn_op_index, from_invalidate, uuid_value, data.event_identifier],
        general,
        bits,
    )
    general.append(0x04)
    token = encode_token(data)
    assert token.data == general.hex().upper()
    assert token.type_bits == bits.serialize()
    assert decode_token(token) == data


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_loads_parses_a_canonical_date_as_json_util_does(millis: int) -> None:
    # loads has its own (faster) $date parser; it must give json_util's value and type,
    # a naive UTC datetime in range and a DatetimeMS outside it.
    text = json.dumps({"d": {"$date": {"$numberLong": str(millis)}}})
    ours, theirs = loads(text)["d"], json_util.loads(text, json_options=JSON_OPTIONS)["d"]
    assert type(ours) is type(theirs)
    assert ours == theirs
