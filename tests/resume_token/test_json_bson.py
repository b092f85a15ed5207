"""The compiled BSON writer of a document's canonical text (``_json_bson.c``) against its
reference, ``bson.encode(token_json.loads(text))``.

Whatever the text, the C half either writes exactly the reference's bytes or leaves the
text to it (None); and it decides the common case itself, or it would speed nothing up.
"""

from __future__ import annotations

from typing import Any

import bson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardstream.resume_token import token_json
from shardstream.resume_token._json_read import document_bson as compiled_bson
from shardstream.resume_token.json_input import MAX_JSON_DEPTH
from shardstream.resume_token.token_json import document_bson, dumps
from shardstream.transform.raw.extended_json import bson_to_json
from tests.strategies import COMMON_JSON_VALUES, altered_canonical_texts, bson_values


def compiled(text: Any) -> bytes | None:
    return compiled_bson(text, MAX_JSON_DEPTH)


def agrees(text: str) -> bytes | None:
    """The compiled result, after checking it against the reference's."""
    found = compiled(text)
    try:
        expected = bson.encode(token_json.loads(text))
    except Exception:
        assert found is None, f"C wrote text the reference refuses: {text!r}"
        return found
    assert found is None or found == expected, text
    return found


@given(bson_values())
def test_any_bson_value_in_canonical_text_writes_as_the_reference_writes_it(value: Any) -> None:
    agrees(dumps({"v": value}))


@given(bson_values())
def test_the_raw_writers_text_writes_as_the_reference_writes_it(value: Any) -> None:
    """The text the lakehouse's state holds: the compiled Extended JSON writer's."""
    try:
        raw = bson.encode({"v": value})
    except (bson.errors.InvalidDocument, OverflowError):
        return  # a value pymongo cannot encode: no such document
    agrees(bson_to_json(raw))


@given(COMMON_JSON_VALUES)
def test_documents_of_the_common_types_are_written_in_c(value: Any) -> None:
    """Numbers, strings (any character, escaped), ids, dates, documents and arrays."""
    assert agrees(dumps({"v": value})) is not None
    assert agrees(bson_to_json(bson.encode({"v": value}))) is not None


@given(st.text(max_size=40))
def test_any_text_writes_as_the_reference_writes_it_or_is_left_to_it(text: str) -> None:
    agrees(text)


@given(altered_canonical_texts())
def test_cut_or_altered_canonical_text_writes_as_the_reference_or_is_left_to_it(
    text: str,
) -> None:
    agrees(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": {"\\u0024numberInt": "5"}}',  # an escaped "$" is still a type wrapper
        '{"a": {"$numberInt": "5", "b": 1}}',  # a "$" name beside another: json_util's
        '{"a": {"b": 1, "$oid": "0123456789abcdef01234567"}}',
        '{"a": 1, "a": {"$numberLong": "7"}}',  # a repeated name: the last value, first place
        '{"a": 1, "_id": 2, "b": {"c": 1, "_id": 3}}',  # bson.encode moves a top-level _id
        '{"a": {"$numberInt": "2147483648"}}',  # out of int32: Python makes an int64
        '{"a": {"$numberInt": "+5"}}',
        '{"a": {"$numberInt": "007"}}',
        '{"a": {"$numberLong": "-9223372036854775809"}}',
        '{"a": {"$numberDouble": "1_0"}}',
        '{"a": {"$numberDouble": "-0.0"}, "b": {"$numberDouble": "1e400"}}',
        '{"x": {"$numberDouble": "-Infinity"}, "y": {"$numberDouble": "NaN"}}',
        '{"o": {"$oid": "ABCDEF0123456789ABCDEF01"}}',
        '{"o": {"$oid": "not hex"}}',  # the reference raises
        '{"d": {"$date": {"$numberLong": "-62135596800001"}}}',  # before year 1: DatetimeMS
        '{"d": {"$date": {"$numberLong": "253402300800000"}}}',
        '{"d": {"$date": {"$numberInt": "1"}}}',
        '{"d": {"$date": "2026-01-01T00:00:00Z"}}',
        '{"s": "\\ud83d\\ude00 \\u00e9\\n\\"\\/\\u0000"}',  # a pair, escapes, a NUL in a value
        '{"\\u0000": 1}',  # a NUL in a name: BSON cannot
        '{"s": "\\ud83d"}',  # a lone surrogate: Python's
        '{"$oid": "0123456789abcdef01234567"}',  # a wrapper, not a document
        '{"b": {"$binary": {"base64": "AA==", "subType": "00"}}}',
        '{"n": 1}',  # a bare number: Python's
        '{"a": [true, false, null, {}, []]}',
        '{"a": [1,]}',
        '{"a": 1} x',
        "[]",
        "",
        "\ud800",
    ],
)
def test_edge_texts_write_as_the_reference_writes_them(text: str) -> None:
    agrees(text)


def test_the_common_wrappers_are_written_in_c() -> None:
    text = (
        '{"i": {"$numberInt": "-5"}, "l": {"$numberLong": "9223372036854775807"}, '
        '"d": {"$numberDouble": "NaN"}, "o": {"$oid": "0123456789abcdef01234567"}, '
        '"t": {"$date": {"$numberLong": "-62135596800001"}}, "e": {}, "a": [[], "x"]}'
    )
    assert agrees(text) is not None


def test_text_nested_past_the_limit_is_left_to_the_reference_which_refuses_it() -> None:
    deepest = '{"a": ' * (MAX_JSON_DEPTH - 1) + "{}" + "}" * (MAX_JSON_DEPTH - 1)
    assert agrees(deepest) is not None
    too_deep = '{"a": ' + deepest + "}"
    assert compiled(too_deep) is None
    with pytest.raises(ValueError, match="nested at most"):
        document_bson(too_deep)


@given(COMMON_JSON_VALUES, COMMON_JSON_VALUES)
def test_a_top_level_id_anywhere_writes_as_the_reference_writes_it(
    first: Any, identity: Any
) -> None:
    agrees(dumps({"a": first, "_id": identity}))
    assert agrees(dumps({"_id": identity, "a": first})) is not None


def test_document_bson_gives_the_references_bytes_where_c_is_unsure() -> None:
    text = '{"a": {"$numberInt": "2147483648"}, "b": {"$numberDecimal": "1.5"}}'
    assert compiled(text) is None
    assert document_bson(text) == bson.encode(token_json.loads(text))
