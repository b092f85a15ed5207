"""Typed columns: the type each BSON value decides, how column types widen, column values."""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Any

import pyarrow as pa
import pytest
from bson import json_util
from bson.binary import Binary
from bson.code import Code
from bson.codec_options import DatetimeConversion
from bson.datetime_ms import DatetimeMS
from bson.dbref import DBRef
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from shardstream.resume_token import UNDEFINED, DBPointer, Symbol
from shardstream.spark.delta.typed.column_types import (
    CONFLICT,
    JSON_COLUMN,
    TIMESTAMP,
    fits,
    merged,
    value_type,
)
from shardstream.spark.delta.typed.column_values import column_value, relaxed_json
from tests.strategies import NAMES, SCALARS

# Dates past year 9999 parse back as DatetimeMS, as the sink decodes them.
LOADS = json_util.JSONOptions(datetime_conversion=DatetimeConversion.DATETIME_AUTO)
OID = ObjectId("0123456789abcdef01234567")
UUID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
DATETIMES = st.datetimes(datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31))
VALUES = st.recursive(
    st.one_of(SCALARS, DATETIMES),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(["a", "b"]), NAMES), children, max_size=4),
    ),
    max_leaves=10,
)
# Arrow types as value_type makes them, nested, for the lattice's properties.
SCALAR_TYPES = st.sampled_from(
    [pa.int32(), pa.int64(), pa.float64(), pa.bool_(), pa.string(), pa.binary(), TIMESTAMP]
)
TYPES = st.recursive(
    SCALAR_TYPES,
    lambda children: st.one_of(
        children.map(pa.list_),
        st.dictionaries(st.sampled_from("abc"), children, min_size=1, max_size=3).map(
            lambda fields: pa.struct(list(fields.items()))
        ),
    ),
    max_leaves=6,
)


# The type each kind of value decides (bool is no int; ints past int32 are int64).
KINDS: list[tuple[Any, list[Any]]] = [
    (pa.int32(), [7, -(2**31), 2**31 - 1]),
    (pa.int64(), [2**31, -(2**31) - 1, Int64(7)]),
    (pa.float64(), [1.5]),
    (pa.bool_(), [True, False]),
    (pa.string(), ["text", Symbol("s"), OID, Decimal128("1.10"), Binary(UUID.bytes, 4), UUID]),
    (pa.binary(), [Binary(b"\x00", 0), Binary(UUID.bytes, 3), Binary(b"short", 4), b"raw"]),
    (TIMESTAMP, [datetime.datetime(2024, 5, 1, 12, 30)]),
    (JSON_COLUMN, [DatetimeMS(2**62), Timestamp(5, 1), Regex("^a", "i"), Code("f()")]),
    (JSON_COLUMN, [Code("f()", {"x": 1}), MinKey(), MaxKey(), DBRef("coll", 1), UNDEFINED]),
    (JSON_COLUMN, [DBPointer("db.coll", OID)]),
    (None, [None, {}, [], [None], {"a": None}]),
]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(value, kind) for kind, values in KINDS for value in values],
    ids=repr,
)
def test_each_bson_kind_decides_its_type(value: Any, expected: Any) -> None:
    """Every BSON value kind takes its type in the lattice (bool is no int; out-of-range
    int32 values are int64; null and empty containers decide nothing)."""
    assert value_type(value) == expected


def test_documents_are_structs_of_their_typed_fields_unless_a_name_or_field_is_unsafe() -> None:
    """A document is a struct of its non-null fields; an unsafe name or a JSON-only field
    makes the whole document JSON."""
    document = {"n": 1, "s": "x", "skip": None, "inner": {"f": 2.5}}
    assert value_type(document) == pa.struct(
        [("n", pa.int32()), ("s", pa.string()), ("inner", pa.struct([("f", pa.float64())]))]
    )
    for name in ("a.b", "a b", "", "x=y", "q`"):
        assert value_type({name: 1}) == JSON_COLUMN, name
    assert value_type({"a": 1, "t": Timestamp(1, 1)}) == JSON_COLUMN


def test_arrays_are_lists_of_their_widened_element_type_or_json_when_mixed() -> None:
    """An array's element type is every element's type merged; no merge means JSON."""
    assert value_type([1, None, 2]) == pa.list_(pa.int32())
    assert value_type([1, Int64(2), 0.5]) == pa.list_(pa.float64())
    assert value_type([{"a": 1}, {"b": "x"}]) == pa.list_(
        pa.struct([("a", pa.int32()), ("b", pa.string())])
    )
    assert value_type([[1], [], [2**40]]) == pa.list_(pa.list_(pa.int64()))
    assert value_type([[], {}]) is None
    for mixed in ([1, "x"], [True, 1], [{"a": 1}, [1]], [Timestamp(1, 1)], [[], False], [{}, 1]):
        assert value_type(mixed) == JSON_COLUMN, mixed


def test_numbers_widen_int32_to_int64_to_double() -> None:
    """Integers and doubles widen up the chain, whichever side is the column."""
    chain = [pa.int32(), pa.int64(), pa.float64()]
    for low in range(3):
        for high in range(low, 3):
            assert merged(chain[low], chain[high]) == chain[high]
            assert merged(chain[high], chain[low]) == chain[high]


def test_structs_gain_fields_and_lists_widen_their_element() -> None:
    """A struct column takes the union of the fields (widened); a list its wider element."""
    column = pa.struct([("a", pa.int32())])
    value = pa.struct([("b", pa.string()), ("a", pa.int64())])
    assert merged(column, value) == pa.struct([("a", pa.int64()), ("b", pa.string())])
    assert merged(pa.list_(pa.int32()), pa.list_(pa.float64())) == pa.list_(pa.float64())


@pytest.mark.parametrize(
    ("column", "value"),
    [
        (pa.string(), pa.int32()),
        (pa.bool_(), pa.int32()),
        (pa.int64(), pa.bool_()),
        (pa.struct([("a", pa.int32())]), pa.list_(pa.int32())),
        (pa.struct([("a", pa.int32())]), pa.struct([("a", pa.string())])),
        (pa.list_(pa.string()), pa.list_(pa.int32())),
        (pa.binary(), pa.string()),
        (TIMESTAMP, pa.int64()),
        (pa.int32(), JSON_COLUMN),
    ],
    ids=str,
)
def test_types_no_widening_covers_conflict(column: Any, value: Any) -> None:
    """Types of different kinds (bool is not a number; a typed column takes no JSON value)
    have no common widening."""
    assert merged(column, value) is CONFLICT


@given(TYPES, TYPES)
def test_merging_types_is_commutative_up_to_field_order(first: Any, second: Any) -> None:
    """Either order of two types conflicts alike or gives the same type (struct fields
    come in first-appearance order, so only the order may differ)."""
    one, other = merged(first, second), merged(second, first)
    assert (one is CONFLICT) == (other is CONFLICT)
    if one is not CONFLICT:
        assert _sorted_fields(one) == _sorted_fields(other)


@given(TYPES, TYPES)
def test_merging_is_idempotent_and_an_upper_bound(first: Any, second: Any) -> None:
    """A type merged with itself or nothing is itself; a merge holds both its inputs."""
    assert merged(first, first) == first
    assert merged(first, None) == first
    assert merged(None, first) == first
    both = merged(first, second)
    if both is not CONFLICT:
        assert merged(both, first) == both
        assert merged(both, second) == both


def test_a_json_column_absorbs_everything() -> None:
    """Whatever type comes, a JSON column stays JSON."""
    for value in (pa.int32(), pa.struct([("a", pa.string())]), JSON_COLUMN, None):
        assert merged(JSON_COLUMN, value) == JSON_COLUMN


def test_column_values_convert_to_the_column_type() -> None:
    """ObjectId as hex, UUID and Decimal128 as their text, integers as doubles in a double
    column, dates as tz-aware UTC timestamps, and nested structs keep their fields."""
    assert column_value(OID, pa.string()) == "0123456789abcdef01234567"
    assert column_value(Binary(UUID.bytes, 4), pa.string()) == str(UUID)
    assert column_value(UUID, pa.string()) == str(UUID)
    assert column_value(Decimal128("-1.50E+3"), pa.string()) == str(Decimal128("-1.50E+3"))
    assert column_value(Int64(3), pa.float64()) == 3.0
    naive = datetime.datetime(2024, 5, 1, 12, 30, 0, 123000)
    stamp = column_value(naive, TIMESTAMP)
    assert stamp.utcoffset() == datetime.timedelta(0)
    assert stamp.replace(tzinfo=None) == naive
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    aware = naive.replace(tzinfo=plus_two)
    assert column_value(aware, TIMESTAMP) == aware
    kind = pa.struct([("a", pa.int64()), ("b", pa.list_(pa.string()))])
    assert column_value({"a": 1, "b": [OID]}, kind) == {"a": 1, "b": [str(OID)]}
    assert column_value({}, kind) == {"a": None, "b": None}


def test_json_columns_hold_relaxed_extended_json() -> None:
    """A JSON column's text is relaxed Extended JSON: numbers plain, types as wrappers,
    shardstream's own Symbol, Undefined and DBPointer included."""
    value = {"n": Int64(5), "t": Timestamp(7, 2), "d": datetime.datetime(2024, 1, 1)}
    text = column_value(value, JSON_COLUMN)
    assert json.loads(text)["n"] == 5
    assert json_util.loads(text) == value
    own = {"u": UNDEFINED, "p": DBPointer("db.c", OID), "s": Symbol("s")}
    assert json.loads(relaxed_json(own)) == {
        "u": {"$undefined": True},
        "p": {"$dbPointer": {"$ref": "db.c", "$id": {"$oid": str(OID)}}},
        "s": {"$symbol": "s"},
    }


@given(VALUES)
def test_every_typed_value_builds_an_arrow_array_of_its_type(value: Any) -> None:
    """A value fits the type it decides, and its column value is an Arrow value of it
    (a JSON value is Extended JSON text that parses back)."""
    kind = value_type(value)
    if kind is None:
        return
    assert fits(value, kind)
    if kind == JSON_COLUMN:
        json_util.loads(column_value(value, kind), json_options=LOADS)
    else:
        assert pa.array([column_value(value, kind)], kind).type == kind


STRUCT_A = pa.struct([("a", pa.int32())])
MISFITS: list[tuple[Any, list[Any]]] = [
    (pa.int32(), [{}, [None], "x", 2**40]),
    (pa.string(), [{}, []]),
    (STRUCT_A, [[], {"a": {}}, {"a": 1, "z": 2}]),
    (pa.list_(pa.int32()), [{}, [{}]]),
]


@pytest.mark.parametrize(
    ("value", "kind"), [(value, kind) for kind, values in MISFITS for value in values], ids=repr
)
def test_values_of_another_shape_do_not_fit(value: Any, kind: Any) -> None:
    """An empty document or array fits only a column of its shape, nested values included;
    a struct holds no field it lacks (unless the field decides no type)."""
    assert not fits(value, kind)


def test_structs_leave_out_fields_that_decide_nothing() -> None:
    """A document fits a struct lacking its null or empty fields; they are left out."""
    kind = pa.struct([("a", pa.int32())])
    value = {"a": 1, "z": {}, "y": [], "x": None}
    assert value_type(value) == kind
    assert fits(value, kind)
    assert column_value(value, kind) == {"a": 1}


def _sorted_fields(kind: Any) -> Any:
    if pa.types.is_struct(kind):
        return pa.struct(sorted((f.name, _sorted_fields(f.type)) for f in kind))
    if pa.types.is_list(kind):
        return pa.list_(_sorted_fields(kind.value_type))
    return kind
