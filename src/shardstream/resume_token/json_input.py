"""Limits on Extended JSON input: how deep it may nest, and what parsing it can raise.

Every reader of user-typed or file-read Extended JSON (``token decode``/``encode``, the
start options, ``replay --input-format ejson``) checks the nesting first and catches
:data:`EXTENDED_JSON_ERRORS`, so bad text becomes one of shardstream's errors naming the
input, never a traceback.
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Final

from bson.errors import BSONError

# The server's hard nesting limit for any BSON it accepts: validateBSON takes 200 levels of
# documents inside the top-level one (BSONDepth::kDefaultMaxAllowableDepth in
# src/mongo/bson/bson_depth.h; bson_validate_test's MaxNestingDepth: nest(200) is valid,
# nest(201) fails with Overflow), so 201 JSON objects counting the outermost. Stored user
# documents stop 20 levels earlier (getMaxDepthForUserStorage), leaving room for the oplog
# entry's own levels around them, so no entry or token the server writes nests deeper.
BSON_MAX_NESTED_LEVELS: Final = 200
# Canonical Extended JSON spells one BSON value as up to 3 levels of objects:
# {"$dbPointer": {"$ref": ..., "$id": {"$oid": ...}}}.
EXTENDED_JSON_VALUE_LEVELS: Final = 3
# Deep enough for anything the server can produce, far below Python's recursion limit
# (1000), which the json parser and every recursive walk of the parsed value would hit.
MAX_JSON_DEPTH: Final = 1 + BSON_MAX_NESTED_LEVELS + EXTENDED_JSON_VALUE_LEVELS

# Everything json.loads and json_util's type parsers raise on bad text, found by fuzzing
# their wrappers: JSONDecodeError and binascii.Error are ValueErrors, InvalidId a
# BSONError, decimal.Overflow and decimal.InvalidOperation (every
# decimal.DecimalException) ArithmeticErrors, KeyError a LookupError;
# AttributeError and TypeError come from wrappers holding values of the wrong type.
# RecursionError is the last resort: MAX_JSON_DEPTH is checked first so it is not met.
EXTENDED_JSON_ERRORS: Final = (
    ValueError,
    TypeError,
    LookupError,
    AttributeError,
    ArithmeticError,
    BSONError,
    RecursionError,
)

# A JSON string (its escapes included), then anything that is not a bracket.
_JSON_STRING: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_A_BRACKET: Final = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP: Final = {"{": 1, "[": 1, "}": -1, "]": -1}


def json_depth_over_limit(text: str, limit: int = MAX_JSON_DEPTH) -> int | None:
    """How deep ``text``'s objects and arrays nest, when that is more than ``limit``; else None.

    O(n) and mostly in C: text with at most ``limit`` opening brackets cannot be deeper
    (two ``str.count`` calls); otherwise strings are cut out and the brackets summed.
    Brackets after an unterminated string still count, which can only flag text the
    JSON parser would refuse anyway.
    """
    if text.count("{") + text.count("[") <= limit:
        return None
    brackets = _NOT_A_BRACKET.sub("", _JSON_STRING.sub("", text))
    depth = max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)
    return depth if depth > limit else None


def depth_problem(text: str) -> str | None:
    """What is wrong with ``text``'s nesting, as a message fragment, or None when it is fine."""
    depth = json_depth_over_limit(text)
    if depth is None:
        return None
    return f"expected JSON nested at most {MAX_JSON_DEPTH} levels deep, got {depth} levels"
