"""Layer 3: BSON value semantics for client-side ``$match``: types, ordering and paths.

Mirrors the server's ``canonicalizeBSONType`` and ``compareElementValues`` (bsontypes.h,
bsonelement.cpp) and ``BSONElementIterator`` (matcher/path.cpp), over values as pymongo
decodes them.  :data:`MISSING` plays the part of the server's EOO element: what a path
that leads nowhere yields.
"""

from __future__ import annotations

import calendar
import math
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, Final, cast

from bson.code import Code
from bson.datetime_ms import DatetimeMS
from bson.dbref import DBRef
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

from shardstream.resume_token import UNDEFINED, DBPointer, Symbol


class _Missing:
    """The value of a path that leads nowhere; use the :data:`MISSING` singleton."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()

# BSON type codes as $type spells them (the manual's "BSON Types" page).
TYPE_ALIASES: Final = {
    "double": 1, "string": 2, "object": 3, "array": 4, "binData": 5, "undefined": 6,
    "objectId": 7, "bool": 8, "date": 9, "null": 10, "regex": 11, "dbPointer": 12,
    "javascript": 13, "symbol": 14, "javascriptWithScope": 15, "int": 16, "timestamp": 17,
    "long": 18, "decimal": 19, "minKey": -1, "maxKey": 127,
}  # fmt: skip
NUMBER_TYPES: Final = frozenset({1, 16, 18, 19})
NULL_BRACKET: Final = 5
# bsontypes.h canonicalizeBSONType: type code -> sort bracket; EOO (0) and Undefined share one.
_CANONICAL: Final = {
    -1: -1, 0: 0, 6: 0, 10: 5, 1: 10, 16: 10, 18: 10, 19: 10, 2: 15, 14: 15, 3: 20, 4: 25,
    5: 30, 7: 35, 8: 40, 9: 45, 17: 47, 11: 50, 12: 55, 13: 60, 15: 65, 127: 127,
}  # fmt: skip
# pymongo's letters for re flags (bson/__init__.py _encode_regex), in BSON's sorted order.
_FLAG_LETTERS: Final = (
    ("i", re.IGNORECASE), ("l", re.LOCALE), ("m", re.MULTILINE),
    ("s", re.DOTALL), ("u", re.UNICODE), ("x", re.VERBOSE),
)  # fmt: skip
_PY_FLAGS: Final = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}
_INT64_RANGE: Final = range(-(2**63), 2**63)


def bson_type(value: Any) -> int:
    """The BSON type code pymongo would encode ``value`` as (0 for :data:`MISSING`).

    Raises:
        TypeError: ``value`` is not something pymongo can encode.
    """
    if value is MISSING:
        return 0
    if value is None:
        return 10
    if value is UNDEFINED:
        return 6
    if isinstance(value, bool):  # before int: bool is an int subclass
        return 8
    if isinstance(value, int):
        if value not in _INT64_RANGE:
            raise TypeError(f"integer {value!r} does not fit in 64 bits")
        # pymongo writes an int as int32 when it fits, Int64 always as int64.
        return 18 if isinstance(value, Int64) or not -(2**31) <= value < 2**31 else 16
    if isinstance(value, float):
        return 1
    if isinstance(value, Decimal128):
        return 19
    if isinstance(value, Code):  # before str: Code is a str subclass
        return 13 if value.scope is None else 15
    if isinstance(value, str):
        return 14 if isinstance(value, Symbol) else 2
    if isinstance(value, Mapping | DBRef):
        return 3
    if isinstance(value, list | tuple):
        return 4
    if isinstance(value, bytes | uuid.UUID):  # bytes covers Binary
        return 5
    for kind, code in _SIMPLE_TYPES:
        if isinstance(value, kind):
            return code
    raise TypeError(f"{type(value).__name__} value {value!r} is not a BSON value")


_SIMPLE_TYPES: Final[tuple[tuple[type | tuple[type, ...], int], ...]] = (
    (ObjectId, 7), ((datetime, DatetimeMS), 9), ((Regex, re.Pattern), 11), (DBPointer, 12),
    (Timestamp, 17), (MinKey, -1), (MaxKey, 127),
)  # fmt: skip


def canonical_type(value: Any) -> int:
    """The server's sort bracket of ``value``: values of different brackets never compare equal."""
    return _CANONICAL[bson_type(value)]


def check_bson(value: Any) -> None:
    """Raise TypeError unless ``value`` (and everything inside it) is a BSON value."""
    bson_type(value)
    if isinstance(value, Mapping):
        for name, item in value.items():
            if not isinstance(name, str):
                raise TypeError(f"field name {name!r} is not a string")
            check_bson(item)
    elif is_array(value):
        for item in value:
            check_bson(item)


def is_array(value: Any) -> bool:
    """Whether ``value`` is a BSON array."""
    return isinstance(value, list | tuple)


def as_document(value: Any) -> Mapping[str, Any] | None:
    """``value`` as an embedded document (a DBRef is one on the wire), or None."""
    if isinstance(value, Mapping):
        return value
    return value.as_doc() if isinstance(value, DBRef) else None


def is_number(value: Any) -> bool:
    """Whether ``value`` is a BSON number (bool is not one, though Python says so)."""
    return isinstance(value, int | float | Decimal128) and not isinstance(value, bool)


def is_nan(value: Any) -> bool:
    """Whether ``value`` is a double or decimal NaN."""
    if isinstance(value, float):
        return math.isnan(value)
    return isinstance(value, Decimal128) and value.to_decimal().is_nan()


def truncated_int64(value: Any) -> int | None:
    """A number rounded toward zero, or None if not a finite number that fits in 64 bits."""
    if not is_number(value):
        return None
    number = value.to_decimal() if isinstance(value, Decimal128) else value
    if isinstance(number, float | Decimal) and not math.isfinite(number):
        return None
    result = int(number)  # int() of a float or Decimal truncates toward zero
    return result if result in _INT64_RANGE else None


def exact_int64(value: Any) -> int | None:
    """A number with no fractional part as an int, or None (non-integral, NaN, too large)."""
    result = truncated_int64(value)
    if result is None:
        return None
    number = value.to_decimal() if isinstance(value, Decimal128) else value
    return result if number == result else None


def true_value(value: Any) -> bool:
    """BSONElement::trueValue: numbers are true when non-zero, null false, all else true."""
    if value is None or value is MISSING or value is UNDEFINED or isinstance(value, bool):
        return bool(value)
    if is_number(value):
        return (value.to_decimal() if isinstance(value, Decimal128) else value) != 0
    return True


def regex_source(value: Regex[Any] | re.Pattern[Any]) -> tuple[str, str]:
    """A regex value's pattern and the flag letters pymongo would store with it."""
    pattern = value.pattern
    text = pattern.decode() if isinstance(pattern, bytes) else str(pattern)
    flags = value.flags if isinstance(value.flags, int) else 0
    return text, "".join(letter for letter, bit in _FLAG_LETTERS if flags & bit)


def compile_regex(pattern: str, flags: str) -> re.Pattern[str]:
    """Compile a query regex with Python's ``re`` standing in for PCRE.

    Raises:
        ValueError: an invalid flag letter, an embedded NUL, or a pattern ``re`` rejects.
    """
    for letter in flags:
        # 'u' is accepted and ignored: the server's PCRE always runs in UTF-8 mode.
        if letter not in "imsxu":
            raise ValueError(f"invalid flag in regex options: {letter}")
    if "\x00" in pattern:
        raise ValueError("Regular expression cannot contain an embedded null byte")
    py_flags = 0
    for letter in flags:
        py_flags |= _PY_FLAGS.get(letter, 0)
    try:
        return re.compile(pattern, py_flags)
    except re.error as exc:
        raise ValueError(f"Regular expression is invalid: {exc}") from exc


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
        return _sign(_number(left), _number(right))
    if bracket == 65:  # code with scope: the code, then the scope document
        return _sign(str(left), str(right)) or _compare_fields(
            left.scope.items(), right.scope.items()
        )
    if bracket == 25:
        return _compare_fields(_indexed(left), _indexed(right))
    return _compare_fields(_document(left).items(), _document(right).items())


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
        return _millis(value)
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


def _indexed(array: Sequence[Any]) -> Iterator[tuple[str, Any]]:
    return ((str(position), item) for position, item in enumerate(array))


def _document(value: Any) -> Mapping[str, Any]:
    document = as_document(value)
    assert document is not None, value
    return document


def _number(value: Any) -> int | float | Decimal:
    # Python compares int, float and Decimal exactly, as compare_numbers.h does.
    return value.to_decimal() if isinstance(value, Decimal128) else cast("int | float", value)


def _millis(value: datetime | DatetimeMS) -> int:
    if isinstance(value, DatetimeMS):
        return int(value)
    offset = value.utcoffset()  # naive datetimes are UTC, as pymongo encodes them
    if offset is not None:
        value = value - offset
    return calendar.timegm(value.timetuple()) * 1000 + value.microsecond // 1000


def _sign(left: Any, right: Any) -> int:
    return int(left > right) - int(left < right)


def iter_path(document: Mapping[str, Any], parts: Sequence[str], expand: bool) -> Iterator[Any]:
    """Yield the values a dotted path reaches, as the server's BSONElementIterator does.

    Arrays met before the last component are traversed (each element that is a document is
    searched for the rest of the path, and a numeric component also indexes the array); an
    array at the end yields its elements when ``expand`` and then itself.  A path that ends
    in a missing field or runs into a scalar yields :data:`MISSING`.
    """
    value: Any = document
    for index, part in enumerate(parts):
        container = as_document(value)
        if container is None:  # a scalar (or null) before the path ends
            yield MISSING
            return
        value = container.get(part, MISSING)
        if is_array(value):
            yield from _iter_array(value, parts[index + 1 :], expand)
            return
    yield value


def _iter_array(array: Sequence[Any], rest: Sequence[str], expand: bool) -> Iterator[Any]:
    if not rest:
        if expand:
            yield from array
        yield array
        return
    for position, element in enumerate(array):
        document = as_document(element)
        if document is not None:
            yield from iter_path(document, rest, expand)
        if rest[0] != str(position):  # not also an array index ("a.1" on [x, y])
            continue
        if len(rest) == 1:
            yield element
        elif document is not None:
            yield from iter_path(document, rest[1:], expand)
        elif is_array(element):
            yield from _iter_array(element, rest[1:], expand)
