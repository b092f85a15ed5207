"""The leaf tests of client-side ``$match``: one value against one operand.

Comparison within a type bracket, regex, ``$type`` and ``$mod``, each as the server's
expression_leaf.cpp evaluates it; :mod:`shardstream.match.evaluator` parses a query
and combines these.  Every builder checks its operand when the pipeline is compiled and
raises ConfigurationError there, never while events flow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.regex import Regex

from shardstream.errors import ConfigurationError
from shardstream.match import values as bv
from shardstream.match.order import compare
from shardstream.resume_token import UNDEFINED

Test: TypeAlias = Callable[[Any], bool]

_COMPARE: Final[dict[str, Callable[[int], bool]]] = {
    "$eq": lambda c: c == 0,
    "$lt": lambda c: c < 0,
    "$lte": lambda c: c <= 0,
    "$gt": lambda c: c > 0,
    "$gte": lambda c: c >= 0,
}
COMPARISONS: Final = frozenset(_COMPARE)


def comparison_test(operator: str, rhs: Any) -> Test:
    """``{path: {operator: rhs}}`` for a comparison: within ``rhs``'s type bracket only."""
    try:
        bv.check_bson(rhs)
    except TypeError as exc:
        raise ConfigurationError(f"{operator} needs a BSON value: {exc}") from exc
    if rhs is UNDEFINED:
        raise ConfigurationError("cannot compare to undefined")
    rhs_bracket, rhs_nan, accept = bv.canonical_type(rhs), bv.is_nan(rhs), _COMPARE[operator]
    missing_passes = operator in ("$eq", "$lte", "$gte")

    def test(value: Any) -> bool:
        bracket = bv.canonical_type(value)
        if bracket != rhs_bracket:
            # Type bracketing: no match across brackets, but for null vs missing and the keys.
            if bracket + rhs_bracket == bv.NULL_BRACKET:
                return value is bv.MISSING and missing_passes
            if isinstance(rhs, MaxKey | MinKey):
                return operator in (("$lt", "$lte") if isinstance(rhs, MaxKey) else ("$gt", "$gte"))
            return False
        if operator != "$eq" and (rhs_nan or bv.is_nan(value)):
            # NaN equals NaN but is neither below nor above anything.
            return operator in ("$lte", "$gte") and rhs_nan and bv.is_nan(value)
        return accept(compare(value, rhs))

    return test


def regex_document_test(spec: Mapping[str, Any]) -> Test:
    """``{$regex: ..., $options: ...}``."""
    # Flags come with a Regex value or from $options, not both (parseRegexDocument).
    pattern, flags = "", ""
    for key, value in spec.items():
        if key not in ("$regex", "$options"):
            continue
        if key == "$regex" and isinstance(value, Regex | re.Pattern):
            pattern, own = bv.regex_source(value)
        elif isinstance(value, str):
            pattern, own = (value, "") if key == "$regex" else (pattern, value)
        else:
            raise ConfigurationError(f"{key} has to be a string, got {value!r}")
        if flags and (own or key == "$options"):
            raise ConfigurationError("options set in both $regex and $options")
        flags = own or flags
    return regex_test(pattern, flags)


def regex_test(pattern: str, flags: str) -> Test:
    """A regex with its flags, as a stored value or an operand."""
    try:
        compiled = bv.compile_regex(pattern, flags)
    except ValueError as exc:
        raise ConfigurationError(f"{exc} (in /{pattern}/{flags})") from exc

    def test(value: Any) -> bool:
        # Strings are searched; a stored regex matches only the identical regex.
        if isinstance(value, str) and bv.bson_type(value) in (2, 14):
            return compiled.search(value) is not None
        if isinstance(value, Regex | re.Pattern):
            return bv.regex_source(value) == (pattern, flags)
        return False

    return test


def type_test(argument: Any) -> Test:
    """``$type``: a type code, alias or array of them."""
    codes = bv.type_codes(argument)
    return lambda value: value is not bv.MISSING and bv.bson_type(value) in codes


def mod_test(argument: Any) -> Test:
    """``$mod: [divisor, remainder]``."""
    # Operands truncate toward zero, like a dividend (ModMatchExpression).
    operands = [bv.truncated_int64(item) for item in argument] if bv.is_array(argument) else []
    if len(operands) != 2 or None in operands:
        raise ConfigurationError(f"malformed mod: needs [divisor, remainder], got {argument!r}")
    divisor, remainder = operands
    if divisor == 0:
        raise ConfigurationError("divisor cannot be 0")

    def test(value: Any) -> bool:
        dividend = bv.truncated_int64(value)
        if dividend is None or divisor is None:
            return False
        # C++ '%': the remainder takes the dividend's sign (overflow::safeMod).
        result = 0 if divisor == -1 else abs(dividend) % abs(divisor)
        return (-result if dividend < 0 else result) == remainder

    return test
