"""Part of stage 1: the MQL comparisons the server's oplog ``$match`` applies to entries.

The filter of change_stream_filter_helpers.cpp is a query: its predicates follow MQL's
rules, not Python's.  A ``$regex`` matches only strings, or an array holding one that
matches; ``$eq`` against a scalar also matches an array holding it; a dotted path
(``o.drop``) looks into a document, or into each document of an array (implicit array
traversal); numbers compare by value across types, never with booleans.  An entry whose
fields have odd types is matched (or not) exactly as the server would, so that the
transform then refuses what the server refuses, and skips what it skips.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from bson.decimal128 import Decimal128
from bson.timestamp import Timestamp

_REGEX_SPECIALS: Final = frozenset("*+|()^?[].\\/$")
_NULL_OPTIME_TS: Final = Timestamp(0, 0)


def escape_regex(text: str) -> str:
    """Escape ``text`` the way the server does before putting it in a regex."""
    return "".join("\\" + ch if ch in _REGEX_SPECIALS else ch for ch in text)


def matches(value: Any, pattern: re.Pattern[str]) -> bool:
    """``{field: {$regex}}``: a string that matches, or an array holding one.

    Only BSON strings (and symbols, which decode as ``str`` too): ``type is str`` rules out
    ``bson.code.Code``, a ``str`` subclass the server's regex never matches.
    """
    if type(value) is str:
        return pattern.search(value) is not None
    return isinstance(value, list) and any(
        type(element) is str and pattern.search(element) is not None for element in value
    )


def op_is(op: Any, name: str) -> bool:
    """``{op: name}``: the string itself, or an array holding it (never JavaScript code)."""
    if type(op) is str:
        return op == name
    return isinstance(op, list) and any(type(item) is str and item == name for item in op)


def documents(value: Any) -> list[Mapping[str, Any]]:
    """What a dotted path ``<field>.<name>`` looks into: the document, or an array's documents."""
    if isinstance(value, Mapping):
        return [value]
    if isinstance(value, list):
        return [element for element in value if isinstance(element, Mapping)]
    return []


def mql_eq(value: Any, predicate: Callable[[Any], bool]) -> bool:
    """An ``$eq`` against a scalar: true if the value, or any element of an array value, matches."""
    if isinstance(value, list):
        return any(predicate(element) for element in value)
    return predicate(value)


def is_true(value: Any) -> bool:
    """``$eq: true`` on one value."""
    return value is True


def number_equals(value: Any, target: int) -> bool:
    """Numbers compare by value across int32, int64, double and decimal; bool is not a number."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return value == target
    if isinstance(value, Decimal128):
        number = value.to_decimal()
        return number.is_finite() and number == target
    return False


def is_one(value: Any) -> bool:
    """``$eq: 1`` on one value."""
    return number_equals(value, 1)


def is_null_optime(optime: Any) -> bool:
    """Whether ``optime`` equals the null optime ``{ts: Timestamp(0, 0), t: -1}``.

    Embedded documents compare field by field in order, so ``{t, ts}`` is a different value.
    """
    if not isinstance(optime, Mapping) or list(optime) != ["ts", "t"]:
        return False
    ts = optime["ts"]
    return isinstance(ts, Timestamp) and ts == _NULL_OPTIME_TS and number_equals(optime["t"], -1)
