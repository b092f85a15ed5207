"""Emulator: the server's order of BSON values, for ``sort``, ``$gt``-style filters and
``$expr``, and their ``$type`` names.

Values of different *type brackets* order by bracket (MinKey < null < numbers < strings <
documents < arrays < BinData < ObjectId < bool < date < Timestamp < regex < code < MaxKey);
values of one bracket by content: numbers by value across int, long, double and decimal
(NaN below every other number and equal to itself), strings by UTF-8 bytes, documents field
by field (each field's bracket, then its name, then its value; a document that runs out
first sorts first), BinData by length, then subtype, then bytes.

:func:`sort_key` turns a value into a tuple that Python orders the same way, so a sort is
one ``sorted`` call and a comparison one tuple comparison.  The package imports nothing else
from shardstream, so this mirrors ``shardstream.match.order`` (the client-side ``$match``
order) rather than using it; tests/emulator checks that the two agree.

See also src/mongo/bson/bsontypes.h (``canonicalizeBSONType``) and
src/mongo/bson/bsonelement.cpp (``compareElementValues``).
"""

from __future__ import annotations

import calendar
import datetime
import math
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any, Final

from bson.binary import Binary
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

from shardstream.emulator.faults import CommandError

SortKey = tuple[Any, ...]
# The key of a missing value (the server's EOO): below null, above MinKey.
MISSING_KEY: Final[SortKey] = (0,)
NULL_BRACKET: Final = 5
NUMBER_BRACKET: Final = 10
NAN_KEY: Final[SortKey] = (NUMBER_BRACKET, 0)  # a double or decimal NaN: below every number
# re flags as a regex's option letters, in the order BSON stores them.
_FLAG_LETTERS: Final = (
    ("i", re.IGNORECASE), ("l", re.LOCALE), ("m", re.MULTILINE),
    ("s", re.DOTALL), ("u", re.UNICODE), ("x", re.VERBOSE),
)  # fmt: skip


# What a comparison operator makes of compare()'s sign, for find filters and expressions.
ORDERED: Final[dict[str, Callable[[int], bool]]] = {
    "$gt": lambda c: c > 0,
    "$gte": lambda c: c >= 0,
    "$lt": lambda c: c < 0,
    "$lte": lambda c: c <= 0,
}


def sort_key(value: Any) -> SortKey:
    """A tuple that orders as the server orders ``value`` among all BSON values.

    Raises:
        CommandError: ``BadValue`` for a Python value that is not a decoded BSON value.
    """
    if value is None:
        return (NULL_BRACKET,)
    if isinstance(value, bool):  # before numbers: bool is an int in Python
        return (40, int(value))
    if isinstance(value, int | float | Decimal128):
        number = _number(value)
        # NaN sorts below every number; the marker keeps it out of numeric comparisons.
        return NAN_KEY if math.isnan(number) else (NUMBER_BRACKET, 1, number)
    if isinstance(value, Code):  # before str: Code subclasses it
        if value.scope is None:
            return (60, str(value))
        return (65, str(value), _fields_key(value.scope.items()))
    if isinstance(value, str):  # code point order is UTF-8 byte order
        return (15, value)
    if isinstance(value, DBRef):  # a document on the wire
        return (20, _fields_key(value.as_doc().items()))
    if isinstance(value, Mapping):
        return (20, _fields_key(value.items()))
    if isinstance(value, list | tuple):
        return (25, _fields_key((str(i), item) for i, item in enumerate(value)))
    return _scalar_key(value)


def _scalar_key(value: Any) -> SortKey:
    if isinstance(value, bytes):  # Binary subclasses bytes and carries its subtype
        return (30, len(value), getattr(value, "subtype", 0), bytes(value))
    if isinstance(value, uuid.UUID):
        return (30, 16, 4, value.bytes)
    if isinstance(value, ObjectId):
        return (35, value.binary)
    if isinstance(value, DatetimeMS):
        return (45, int(value))
    if isinstance(value, datetime.datetime):
        millis = calendar.timegm(value.utctimetuple()) * 1000 + value.microsecond // 1000
        return (45, millis)
    if isinstance(value, Timestamp):
        return (47, value.time, value.inc)
    if isinstance(value, Regex | re.Pattern):
        pattern = value.pattern.decode() if isinstance(value.pattern, bytes) else value.pattern
        flags = value.flags if isinstance(value.flags, int) else 0
        return (50, str(pattern), "".join(c for c, bit in _FLAG_LETTERS if flags & bit))
    if isinstance(value, MinKey):
        return (-1,)
    if isinstance(value, MaxKey):
        return (127,)
    raise CommandError(2, "BadValue", f"emulator cannot order a {type(value).__name__} value")


def _number(value: int | float | Decimal128) -> int | float | Decimal:
    # Python compares int, float and Decimal exactly, as the server compares numbers.
    if isinstance(value, Decimal128):
        number = value.to_decimal()
        return Decimal("NaN") if number.is_nan() else number
    return value


def _fields_key(items: Iterable[tuple[str, Any]]) -> tuple[tuple[int, str, SortKey], ...]:
    keys = []
    for name, item in items:
        key = sort_key(item)
        keys.append((key[0], name, key))
    return tuple(keys)


def compare(left: Any, right: Any) -> int:
    """-1, 0 or 1 as the server orders ``left`` against ``right`` (across brackets too)."""
    a, b = sort_key(left), sort_key(right)
    return (a > b) - (a < b)


def bson_type_name(value: Any) -> str:
    """The ``$type`` name of a decoded BSON value."""
    if isinstance(value, Code):  # before str: Code subclasses it
        return "javascript" if value.scope is None else "javascriptWithScope"
    if isinstance(value, int) and not isinstance(value, bool | Int64):
        # bson encodes a Python int outside int32's range as an int64.
        return "int" if -(2**31) <= value < 2**31 else "long"
    for kind, name in _TYPE_NAMES:
        if isinstance(value, kind):
            return name
    raise CommandError(2, "BadValue", f"no BSON type for {type(value).__name__}")


_TYPE_NAMES: Final[tuple[tuple[type | tuple[type, ...], str], ...]] = (
    (bool, "bool"),
    (Int64, "long"),
    (float, "double"),
    (str, "string"),
    ((dict, DBRef), "object"),
    (list, "array"),
    ((Binary, bytes), "binData"),
    (ObjectId, "objectId"),
    ((datetime.datetime, DatetimeMS), "date"),
    (type(None), "null"),
    ((Regex, re.Pattern), "regex"),
    (Timestamp, "timestamp"),
    (Decimal128, "decimal"),
    (MinKey, "minKey"),
    (MaxKey, "maxKey"),
)
