"""The order of BSON values for client-side ``$match`` comparisons.

Mirrors ``compareElementValues`` (bsonelement.cpp) and ``BSONObj::woCompare``: values
of different type brackets order by bracket, values of one bracket by their content.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any, cast

from shardstream.match.values import (
    as_document,
    canonical_type,
    is_nan,
    number_value,
    regex_source,
)
from shardstream.resume_token.bson_values import date_millis


def compare(left: Any, right: Any) -> int:
    """-1, 0 or 1 as the server orders two values: by bracket first, then within it."""
    bracket, other = canonical_type(left), canonical_type(right)
    if bracket != other:
        return -1 if bracket < other else 1
    if bracket in (10, 20, 25, 65):
        return _compare_same(bracket, left, right)
    return _sign(_sort_key(bracket, left), _sort_key(bracket, right))


def _compare_same(bracket: int, left: Any, right: Any) -> int:
    if bracket == 10:
        left_nan, right_nan = is_nan(left), is_nan(right)
        if left_nan or right_nan:  # NaN sorts below every number and equals itself
            return 0 if left_nan and right_nan else (-1 if left_nan else 1)
        return _sign(number_value(left), number_value(right))
    if bracket == 65:  # code with scope: the code, then the scope document
        return _sign(str(left), str(right)) or _compare_fields(
            left.scope.items(), right.scope.items()
        )
    return _compare_fields(_fields(left), _fields(right))


def _sort_key(bracket: int, value: Any) -> Any:
    """An order-preserving key for brackets whose values compare as plain tuples."""
    if bracket in (15, 60):  # UTF-8 byte order is code point order, so str order serves
        return str(value)
    if bracket == 30:  # BinData: length, then subtype, then bytes
        data, subtype = (
            (value.bytes, 4)
            if isinstance(value, uuid.UUID)
            else (bytes(value), getattr(value, "subtype", 0))
        )
        return (len(data), subtype, data)
    if bracket == 35:
        return value.binary
    if bracket == 40:
        return int(value)
    if bracket == 45:
        return date_millis(value)
    if bracket == 47:
        return (value.time, value.inc)
    if bracket == 50:
        return regex_source(value)
    if bracket == 55:  # DBPointer: namespace length, namespace, then the ObjectId
        namespace = value.namespace.encode()
        return (len(namespace), namespace, value.oid.binary)
    return 0  # MinKey, MaxKey, null, missing/undefined: one value per bracket


def _compare_fields(left: Iterable[tuple[str, Any]], right: Iterable[tuple[str, Any]]) -> int:
    # BSONObj::woCompare: per field the type bracket, then the name, then the value;
    # a document that runs out first sorts first.  Field order therefore matters.
    right_items = iter(right)
    for name, value in left:
        other = next(right_items, None)
        if other is None:
            return 1
        other_name, other_value = other
        result = (
            _sign(canonical_type(value), canonical_type(other_value))
            or _sign(name, other_name)
            or compare(value, other_value)
        )
        if result:
            return result
    return -1 if next(right_items, None) is not None else 0


def _fields(value: Any) -> Iterable[tuple[str, Any]]:
    return cast("Mapping[str, Any]", as_document(value, arrays=True)).items()


def _sign(left: Any, right: Any) -> int:
    return int(left > right) - int(left < right)
