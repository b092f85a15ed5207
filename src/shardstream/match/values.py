"""BSON value semantics for client-side ``$match``: types, ordering and paths.

Mirrors the server's ``canonicalizeBSONType`` and ``compareElementValues`` (bsontypes.h,
bsonelement.cpp) and ``BSONElementIterator`` (matcher/path.cpp), over values as pymongo
decodes them.  :data:`MISSING` plays the part of the server's EOO element: what a path
that leads nowhere yields.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
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

from shardstream.errors import ConfigurationError
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
_INT64_MIN: Final = -(2**63)


def bson_type(value: Any) -> int:
    """The BSON type code pymongo would encode ``value`` as (0 for :data:`MISSING`).

    Raises:
        TypeError: ``value`` is not something pymongo can encode.
    """
    if value is MISSING or value is None or value is UNDEFINED:
        return 0 if value is MISSING else 10 if value is None else 6
    if isinstance(value, int) and not isinstance(value, bool):
        if not _INT64_MIN <= value < -_INT64_MIN:  # not 'in range()': slow for int subclasses
            raise TypeError(f"integer {value!r} does not fit in 64 bits")
        # pymongo writes an int as int32 when it fits, Int64 always as int64.
        return 18 if isinstance(value, Int64) or not -(2**31) <= value < 2**31 else 16
    for kind, code in _TYPES:  # in order: bool before int, Code and Symbol before str
        if isinstance(value, kind):
            return 15 if code == 13 and getattr(value, "scope", None) is not None else code
    raise TypeError(f"{type(value).__name__} value {value!r} is not a BSON value")


_TYPES: Final[tuple[tuple[type | tuple[type, ...], int], ...]] = (
    (bool, 8), (float, 1), (Decimal128, 19), (Code, 13), (Symbol, 14), (str, 2),
    ((Mapping, DBRef), 3), ((list, tuple), 4), ((bytes, uuid.UUID), 5), (ObjectId, 7),
    ((datetime, DatetimeMS), 9), ((Regex, re.Pattern), 11), (DBPointer, 12), (Timestamp, 17),
    (MinKey, -1), (MaxKey, 127),
)  # fmt: skip


def type_codes(argument: Any) -> frozenset[int]:
    """The BSON type codes a ``$type`` argument names: codes, aliases or "number", or a list.

    Raises:
        ConfigurationError: an unknown alias, or a number that is no type code (0 included:
            a missing field has no type, ``$exists: false`` asks for it).
    """
    codes: set[int] = set()
    for item in argument if is_array(argument) else [argument]:
        code = exact_int64(item) if is_number(item) else None
        code = TYPE_ALIASES.get(item) if isinstance(item, str) else code
        if item == "number":
            codes |= NUMBER_TYPES
        elif code is not None and code in TYPE_ALIASES.values():
            codes.add(code)
        else:
            raise ConfigurationError(f"$type needs BSON type codes or aliases, got {item!r}")
    return frozenset(codes)


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


def as_document(value: Any, *, arrays: bool = False) -> Mapping[str, Any] | None:
    """``value`` as an embedded document (a DBRef is one on the wire), or None.

    With ``arrays``, an array counts too, as the document ``{"0": ..., "1": ...}``.
    """
    if isinstance(value, Mapping):
        return value
    if arrays and is_array(value):
        return {str(position): item for position, item in enumerate(value)}
    return value.as_doc() if isinstance(value, DBRef) else None


def is_number(value: Any) -> bool:
    """Whether ``value`` is a BSON number (bool is not one, though Python says so)."""
    return isinstance(value, int | float | Decimal128) and not isinstance(value, bool)


def is_nan(value: Any) -> bool:
    """Whether ``value`` is a double or decimal NaN."""
    return isinstance(value, float | Decimal128) and math.isnan(number_value(value))


def truncated_int64(value: Any) -> int | None:
    """A number rounded toward zero, or None if not a finite number that fits in 64 bits."""
    if not is_number(value) or not math.isfinite(number_value(value)):
        return None
    result = int(number_value(value))  # int() of a float or Decimal truncates toward zero
    return result if _INT64_MIN <= result < -_INT64_MIN else None


def exact_int64(value: Any) -> int | None:
    """A number with no fractional part as an int, or None (non-integral, NaN, too large)."""
    result = truncated_int64(value)
    return result if result is not None and number_value(value) == result else None


def true_value(value: Any) -> bool:
    """BSONElement::trueValue: numbers are true when non-zero, null false, all else true."""
    if value is None or value is MISSING or value is UNDEFINED or isinstance(value, bool):
        return bool(value)
    return number_value(value) != 0 if is_number(value) else True


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
    try:
        return re.compile(pattern, sum(_PY_FLAGS.get(letter, 0) for letter in set(flags)))
    except re.error as exc:
        raise ValueError(f"Regular expression is invalid: {exc}") from exc


def number_value(value: Any) -> int | float | Decimal:
    """A number as a Python value that compares exactly with the others."""
    # Python compares int, float and Decimal exactly, as compare_numbers.h does.  A signalling
    # NaN is quieted: BSON orders every NaN alike, and Decimal would raise on comparing it.
    if isinstance(value, Decimal128):
        number = value.to_decimal()
        return Decimal("NaN") if number.is_snan() else number
    return cast("int | float", value)


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
