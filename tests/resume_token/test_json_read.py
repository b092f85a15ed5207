"""The compiled Extended JSON reader against token_json's Python parser, its reference.

Whatever the text, the C half either gives exactly the Python parser's value (the same
classes all the way down, the same field order) or leaves the text to it; and it decides
the common case itself, or it would speed nothing up.
"""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

import pytest
from bson.int64 import Int64
from bson.objectid import ObjectId
from hypothesis import given
from hypothesis import strategies as st

from shardstream.resume_token import token_json
from shardstream.resume_token._json_read import loads as compiled_loads
from shardstream.resume_token.json_input import MAX_JSON_DEPTH
from shardstream.resume_token.token_json import dumps, python_loads
from tests.strategies import COMMON_JSON_VALUES, altered_canonical_texts, bson_values

UNSURE = object()


def compiled(text: Any) -> Any:
    return compiled_loads(text, UNSURE, Int64, ObjectId, token_json._naive_date, MAX_JSON_DEPTH)


def same(left: Any, right: Any) -> bool:
    """Equal values of the same classes, documents with their fields in the same order."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, float) and math.isnan(left):
        return math.isnan(right)
    return bool(left == right)


def agrees(text: str) -> Any:
    """The compiled result, after checking it against the reference's."""
    found = compiled(text)
    try:
        expected = python_loads(text)
    except Exception:
        assert found is UNSURE, f"C read text the reference refuses: {text!r}"
        return found
    assert found is UNSURE or same(found, expected), text
    return found


@given(bson_values())
def test_any_bson_value_in_canonical_text_reads_as_the_reference_reads_it(value: Any) -> None:
    agrees(dumps({"v": value}))


@given(COMMON_JSON_VALUES)
def test_documents_of_the_common_types_are_read_in_c(value: Any) -> None:
    """Numbers, strings (any character, escaped), ids, dates, documents and arrays."""
    assert agrees(dumps({"v": value})) is not UNSURE


@given(st.text(max_size=40))
def test_any_text_reads_as_the_reference_reads_it_or_is_left_to_it(text: str) -> None:
    agrees(text)


@given(altered_canonical_texts())
def test_cut_or_altered_canonical_text_reads_as_the_reference_reads_it(text: str) -> None:
    agrees(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"\\u0024numberInt": "5"}',  # an escaped "$" is still a type wrapper
        '{"$numberInt": "5", "a": 1}',  # a "$" name beside another: json_util's
        '{"a": 1, "a": {"$numberLong": "7"}}',  # a repeated name: the last value
        '{"s": "\\ud83d\\ude00 \\u00e9\\n\\"\\/"}',  # a surrogate pair, escapes
        '{"s": "\\ud83d"}',  # a lone surrogate: Python's
        '{"d": {"$date": {"$numberLong": "-62135596800001"}}}',  # before year 1: DatetimeMS
        '{"d": {"$date": {"$numberInt": "1"}}}',
        '{"x": {"$numberDouble": "-Infinity"}, "y": {"$numberDouble": "NaN"}}',
        '{"o": {"$oid": "not hex"}}',  # the reference raises
        '{"n": 1}',  # a bare number: Python's
        " [true, false, null, {}, []] ",
        '{"a": 1} x',
        "",
        "\ud800",
    ],
)
def test_edge_texts_read_as_the_reference_reads_them(text: str) -> None:
    agrees(text)


def test_text_nested_past_the_limit_is_left_to_the_reference_which_refuses_it() -> None:
    deepest = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert same(agrees(deepest), json.loads(deepest))
    too_deep = "[" + deepest + "]"
    assert compiled(too_deep) is UNSURE
    with pytest.raises(ValueError, match="nested at most"):
        token_json.loads(too_deep)


@pytest.mark.parametrize(
    "millis",
    [
        -62135596800000,  # 0001-01-01T00:00:00.000, the first date a datetime holds
        -62135596799999,
        -86400001,  # a day and a millisecond before the epoch: floor, not truncation
        -1,
        0,
        951782400000,  # 2000-02-29, a leap day of a year divisible by 400
        4107542399999,  # 2100-02-28T23:59:59.999 (2100 is no leap year)
        253402300799999,  # 9999-12-31T23:59:59.999, the last
        253402300800000,  # past it: DatetimeMS, from the Python half
        -62135596800001,
    ],
)
def test_dates_built_in_c_are_the_references_datetimes(millis: int) -> None:
    """Dates within datetime's years are built in C (no call into Python): the same naive
    UTC datetime as the reference's epoch + timedelta, at every edge of the calendar."""
    text = f'{{"d": {{"$date": {{"$numberLong": "{millis}"}}}}}}'
    found = agrees(text)
    assert found is not UNSURE
    expected = python_loads(text)["d"]
    assert same(found["d"], expected)
    if isinstance(expected, datetime.datetime):
        assert expected == datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=millis)


@pytest.mark.parametrize(
    "hex_id", ["0123456789abcdef01234567", "0123456789ABCDEF01234567", "ffffffffffffffffffffffff"]
)
def test_ids_read_from_their_hex_digits_in_c_are_the_references(hex_id: str) -> None:
    found = agrees(f'{{"o": {{"$oid": "{hex_id}"}}}}')
    assert found == {"o": ObjectId(hex_id)}
    assert type(found["o"]) is ObjectId


@pytest.mark.parametrize(
    "hex_id", ["0123456789abcdef0123456", "0123456789abcdef0123456g", "é" * 24]
)
def test_ids_that_are_not_24_hex_digits_are_left_to_object_id_which_refuses_them(
    hex_id: str,
) -> None:
    assert compiled(f'{{"o": {{"$oid": "{hex_id}"}}}}') is UNSURE
