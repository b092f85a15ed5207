"""A typed column's values a whole column at a time: whether all fit, and their Arrow array.

:mod:`shardstream.spark.delta.typed.column_values` checks and converts one value at a time; a
batch's column is thousands of values, nearly always of one class that the column holds
as it is.  :func:`all_fit` and :func:`column_array` first look at the set of the values'
classes (one pass in C) and let pyarrow convert the whole list; only a column where that
does not settle it (a value of another class, a subclass, a JSON column, a struct's
document with a field the struct lacks) goes value by value, with the same rules, so the
outcome is the same either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, Final

import pyarrow as pa

from shardstream.spark.delta.typed.column_types import (
    DOUBLE,
    HELD,
    INT32,
    INT32_MAX,
    INT32_MIN,
    JSON_COLUMN,
    STRING,
)
from shardstream.spark.delta.typed.column_values import converter, fitter

_NONE: Final = type(None)
_ARROW_ERRORS: Final = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError)


def arrow_type(kind: pa.DataType | str) -> pa.DataType:
    """The Arrow type of a column type (a JSON column is a string)."""
    return STRING if isinstance(kind, str) else kind


def gathered(documents: Sequence[Any], names: Sequence[str]) -> list[Sequence[Any]]:
    """Each of ``names``' values over ``documents`` (None: absent, or the document is None).

    Documents that all hold every name (a collection's usual case) are read by one
    ``itemgetter`` call each and transposed by ``zip``, both in C.
    """
    if not names:
        return []
    if None in documents:
        blank = dict.fromkeys(names)
        documents = [blank if document is None else document for document in documents]
    try:
        rows = list(map(itemgetter(*names), documents))
    except KeyError:  # a document lacks a name
        return [[None if d is None else d.get(name) for d in documents] for name in names]
    return [rows] if len(names) == 1 else list(zip(*rows, strict=True)) or [() for _ in names]


def all_fit(values: Sequence[Any], kind: pa.DataType | str) -> bool:
    """Whether a column of type ``kind`` holds every one of ``values``."""
    if _classes_fit(values, kind):
        return True
    holds = fitter(kind)
    return all(map(holds, values))


def column_array(values: Sequence[Any], kind: pa.DataType | str) -> tuple[pa.Array, list[int]]:
    """``values`` as a column of type ``kind`` holds them, and the indexes of those it does
    not hold (null in the array: the caller rescues them)."""
    array = None if isinstance(kind, str) else _fast_array(values, kind)
    if array is not None:
        return array, []
    holds, convert = fitter(kind), converter(kind)
    column: list[Any] = []
    misfits: list[int] = []
    for index, value in enumerate(values):
        if holds(value):
            column.append(convert(value))
        else:
            column.append(None)
            misfits.append(index)
    return pa.array(column, arrow_type(kind)), misfits


def _non_null_classes(values: Sequence[Any]) -> set[type]:
    classes = set(map(type, values))
    classes.discard(_NONE)
    return classes


def _scalars_fit(values: Sequence[Any], kind: pa.DataType, classes: set[type]) -> bool | None:
    """Whether a scalar column holds ``values`` by their classes (None: not a scalar type)."""
    held = HELD.get(kind)
    if held is None:
        return None
    if not classes <= held:
        return False
    if kind == INT32 and classes:  # Python's int is unbounded; the column's is not
        ints = [value for value in values if value is not None]
        return bool(min(ints) >= INT32_MIN and max(ints) <= INT32_MAX)
    return True


def _struct_children(values: Sequence[Any], kind: pa.StructType) -> list[Sequence[Any]] | None:
    """A struct column's documents' fields, one list per struct field (None rows give
    None), or None when a document has a field the struct lacks (fine only when that field
    decides nothing: the value-by-value way judges it)."""
    documents = [value for value in values if value is not None]
    names = [field.name for field in kind]
    if not set(names).issuperset(set().union(*documents)):
        return None
    return gathered(values, names)


def _classes_fit(values: Sequence[Any], kind: pa.DataType | str) -> bool:
    """True when the values' classes alone show that every value fits (False: not known)."""
    if isinstance(kind, str):
        return kind == JSON_COLUMN
    classes = _non_null_classes(values)
    if not classes:
        return True
    scalar = _scalars_fit(values, kind, classes)
    if scalar is not None:
        return scalar
    if pa.types.is_struct(kind):
        children = _struct_children(values, kind) if classes == {dict} else None
        return children is not None and all(
            _classes_fit(child, field.type) for child, field in zip(children, kind, strict=True)
        )
    if pa.types.is_list(kind):
        return classes == {list} and _classes_fit(_flattened(values), kind.value_type)
    return False


def _flattened(values: Sequence[Any]) -> list[Any]:
    return [element for value in values if value is not None for element in value]


def _fast_array(values: Sequence[Any], kind: pa.DataType) -> pa.Array | None:
    """The column's array when the values' classes show they all fit and pyarrow takes them
    (None: the caller goes value by value)."""
    classes = _non_null_classes(values)
    if not classes:
        return pa.nulls(len(values), kind)
    try:
        scalar = _scalars_fit(values, kind, classes)
        if scalar is not None:
            if not scalar:
                return None
            plain = {STRING: str, DOUBLE: float}.get(kind)
            if plain is not None and classes != {plain}:
                # ObjectId and Decimal128 as their text; ints as doubles (Arrow's own
                # conversion refuses ints a double cannot hold exactly)
                values = [v if v is None or type(v) is plain else plain(v) for v in values]
            return pa.array(values, kind)
        if pa.types.is_struct(kind):
            children = _struct_children(values, kind) if classes == {dict} else None
            if children is None:
                return None
            arrays = []
            for child, field in zip(children, kind, strict=True):
                array = _fast_array(child, field.type)
                if array is None:
                    return None
                arrays.append(array)
            return pa.StructArray.from_arrays(arrays, fields=list(kind), mask=_nulls(values))
        if pa.types.is_list(kind) and classes == {list}:
            elements = _fast_array(_flattened(values), kind.value_type)
            if elements is None:
                return None
            offsets = [0]
            total = 0
            for value in values:
                total += 0 if value is None else len(value)
                offsets.append(total)
            return pa.ListArray.from_arrays(
                pa.array(offsets, pa.int32()), elements, type=kind, mask=_nulls(values)
            )
    except _ARROW_ERRORS:
        return None
    return None


def _nulls(values: Sequence[Any]) -> pa.Array | None:
    if None not in values:
        return None
    return pa.array([value is None for value in values], pa.bool_())
