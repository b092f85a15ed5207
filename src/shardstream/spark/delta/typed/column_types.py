"""Typed columns: the Arrow type a BSON value takes, how column types widen, and a value's
column value under a type.

The lattice, from relaxed BSON:

* int32 -> ``int32``, int64 -> ``int64``, double -> ``float64`` (each widens to the next:
  int32 -> int64 -> double); bool -> ``bool``; date -> ``timestamp[us, UTC]`` (millisecond
  values); binary -> ``binary``;
* string, ObjectId (hex), UUID (binary subtype 4, as text) and Decimal128 (as text: Arrow's
  decimal cannot hold every Decimal128) -> ``string``: they share the type, the exact BSON
  type staying in ``_doc``;
* a document -> a ``struct`` of its fields' types, an array -> a ``list`` of its elements'
  type, where their shape is consistent (a struct widens by gaining fields and by widening
  theirs); otherwise, and for every other BSON type (Timestamp, regex, code, MinKey, a date
  out of range, ...), the column is **JSON**: a ``string`` holding relaxed Extended JSON,
  which every value fits;
* null, an empty document and an empty array decide nothing.

A value whose type neither equals nor widens into its column's is *rescued* (kept in the
table's ``_rescued`` column): :func:`merged` returns :data:`CONFLICT`.  How a column holds a
value (and whether it can) is :mod:`shardstream.spark.delta.typed.column_values`'.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from typing import Any, Final, TypeAlias

import pyarrow as pa
from bson import json_util
from bson.binary import Binary
from bson.code import Code
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.objectid import ObjectId

KIND_KEY: Final = b"shardstream.kind"  # a JSON column's field metadata: {KIND_KEY: b"json"}
JSON_KIND: Final = b"json"
TIMESTAMP: Final = pa.timestamp("us", tz="UTC")
_INT32_RANGE: Final = range(-(2**31), 2**31)
_UUID_SUBTYPE: Final = 4
# Characters a Delta column (or struct field) name cannot hold without column mapping, and
# the quotes and dot that the MERGE's SQL would read as syntax.
_UNSAFE_NAME: Final = frozenset(' ,;{}()\n\t="`.')
RELAXED: Final = json_util.JSONOptions(
    json_mode=json_util.JSONMode.RELAXED, tz_aware=True, tzinfo=datetime.UTC
)


class Conflict:
    """The marker of a value that fits no widening of its column's type."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "CONFLICT"


CONFLICT: Final = Conflict()
JSON_COLUMN: Final = "json"
"""A column type: a string column holding relaxed Extended JSON, which every value fits."""
_JSON_MARK: Final = JSON_COLUMN

ValueType: TypeAlias = "pa.DataType | str | None"  # Arrow type, JSON_COLUMN, None (decides nothing)


def safe_name(name: str) -> bool:
    """Whether ``name`` can be a column or struct field name as it is."""
    return bool(name) and not any(char in _UNSAFE_NAME for char in name)


INT32: Final = pa.int32()
INT64: Final = pa.int64()
DOUBLE: Final = pa.float64()
STRING: Final = pa.string()
# Fast paths, by the value's exact class (a subclass such as Code takes the general way).
SCALAR_KINDS: Final[dict[type, pa.DataType]] = {
    bool: pa.bool_(),
    float: DOUBLE,
    str: STRING,
    Int64: INT64,
    ObjectId: STRING,
    Decimal128: STRING,
    datetime.datetime: TIMESTAMP,
    bytes: pa.binary(),
}
LISTS: Final = {kind: pa.list_(kind) for kind in {*SCALAR_KINDS.values(), INT32}}
# The classes whose values a scalar column holds as they are (an int32 column: in range).
HELD: Final[dict[pa.DataType, frozenset[type]]] = {
    INT32: frozenset({int}),
    INT64: frozenset({int, Int64}),
    DOUBLE: frozenset({int, Int64, float}),
    pa.bool_(): frozenset({bool}),
    STRING: frozenset({str, ObjectId, Decimal128}),
    TIMESTAMP: frozenset({datetime.datetime}),
    pa.binary(): frozenset({bytes}),
}
STRING_LIST: Final = LISTS[STRING]
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def int_kind(values: Any) -> pa.DataType:
    """int32 when every int of ``values`` is in its range, else int64."""
    return INT32 if min(values) >= INT32_MIN and max(values) <= INT32_MAX else INT64


def value_type(value: Any) -> ValueType:
    """The type ``value`` decides: an Arrow type, ``"json"``, or None (null, ``{}``, ``[]``)."""
    cls = type(value)
    kind = SCALAR_KINDS.get(cls)
    if kind is not None:
        return kind
    if cls is int:
        return INT32 if INT32_MIN <= value <= INT32_MAX else INT64
    if cls is list and value:
        classes = set(map(type, value))
        if len(classes) == 1:
            only = classes.pop()
            if only in SCALAR_KINDS:
                return LISTS[SCALAR_KINDS[only]]
            if only is int:
                return LISTS[int_kind(value)]
    if value is None:
        return None
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, Int64):
        return pa.int64()
    if isinstance(value, int):
        return pa.int32() if value in _INT32_RANGE else pa.int64()
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, Code):  # a str subclass, but JavaScript (with its scope), not text
        return _JSON_MARK
    if isinstance(value, str | ObjectId | Decimal128):
        return pa.string()
    if isinstance(value, Binary):  # a subtype 4 of another length than 16 is no UUID
        is_uuid = value.subtype == _UUID_SUBTYPE and len(value) == 16
        return pa.string() if is_uuid else pa.binary()
    if isinstance(value, bytes | uuid.UUID):
        return pa.string() if isinstance(value, uuid.UUID) else pa.binary()
    if type(value) is datetime.datetime:
        return TIMESTAMP
    if is_document(value):
        return _document_type(value)
    if isinstance(value, list):
        return _array_type(value)
    return _JSON_MARK


def is_document(value: Any) -> bool:
    return isinstance(value, Mapping) and not hasattr(value, "collection")  # a DBRef is JSON


def _document_type(document: Mapping[str, Any]) -> ValueType:
    fields = []
    for name, child in document.items():
        if not safe_name(name):
            return _JSON_MARK
        kind = value_type(child)
        if kind == _JSON_MARK:
            return _JSON_MARK
        if kind is not None:
            fields.append(pa.field(name, kind))
    return pa.struct(fields) if fields else None


def _array_type(values: list[Any]) -> ValueType:
    element: ValueType = None
    for value in values:
        found = merged(element, value_type(value))
        if found is CONFLICT or found == _JSON_MARK:
            return _JSON_MARK
        element = found
    if not isinstance(element, pa.DataType):
        return None
    # An empty document or array beside typed elements fits only a struct or list element.
    return pa.list_(element) if all(fits(value, element) for value in values) else _JSON_MARK


def merged(column: ValueType, value: ValueType) -> ValueType | Conflict:
    """The type a column of type ``column`` takes to hold a value of type ``value``.

    The same type, or a wider one (int32 < int64 < double; a struct with more fields); a JSON
    column holds anything; :data:`CONFLICT` when no widening covers both.
    """
    if value is None or column == value:
        return column
    if column is None:
        return value
    if is_json(column):
        return column
    if isinstance(column, str) or isinstance(value, str):
        return CONFLICT
    numeric = (pa.int32(), pa.int64(), pa.float64())
    if column in numeric and value in numeric:
        return max(column, value, key=numeric.index)
    if pa.types.is_struct(column) and pa.types.is_struct(value):
        return _merged_structs(column, value)
    if pa.types.is_list(column) and pa.types.is_list(value):
        element = merged(column.value_type, value.value_type)
        return element if isinstance(element, Conflict) else pa.list_(element)
    return CONFLICT


def _merged_structs(column: pa.StructType, value: pa.StructType) -> ValueType | Conflict:
    fields = {field.name: field.type for field in column}
    for field in value:
        found = merged(fields.get(field.name), field.type)
        if isinstance(found, Conflict | str):
            return CONFLICT
        fields[field.name] = found
    return pa.struct([pa.field(name, kind) for name, kind in fields.items()])


def is_json(kind: Any) -> bool:
    """Whether ``kind`` is the JSON column marker (a JSON field's type is a plain string)."""
    return isinstance(kind, str) and kind == _JSON_MARK


def fits(value: Any, kind: pa.DataType | str) -> bool:
    """Whether a column of type ``kind`` holds ``value``: null, or a value whose type is
    ``kind`` or widens into it, down to every nested value.

    A value that decides no type (``{}``, ``[]``, ``[None]``, ``{"a": None}``) fits only a
    column of its shape (a struct, a list): an ``int32`` column cannot hold ``{}``.  A struct
    leaves out a document's fields that decide no type and are not among its own.
    """
    if value is None or isinstance(kind, str):  # JSON_COLUMN holds anything
        return True
    held = HELD.get(kind)
    if held is not None and type(value) in held:
        return bool(kind != INT32 or INT32_MIN <= value <= INT32_MAX)
    if type(value) is list and value and pa.types.is_list(kind):
        held = HELD.get(kind.value_type)
        if held is not None and set(map(type, value)) <= held:
            return bool(kind.value_type != INT32 or int_kind(value) == INT32)
    if pa.types.is_struct(kind):
        fields = {field.name: field.type for field in kind}
        return is_document(value) and all(
            fits(child, fields[name]) if name in fields else value_type(child) is None
            for name, child in value.items()
        )
    if pa.types.is_list(kind):
        return isinstance(value, list) and all(fits(item, kind.value_type) for item in value)
    found = value_type(value)
    return found is not None and merged(kind, found) == kind
