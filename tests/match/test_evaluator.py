"""Client-side ``$match`` on change events, checked case by case against MongoDB's semantics.

Each table names where its expectations come from: a page of the MongoDB manual
(https://www.mongodb.com/docs/manual/...) or a server source or test file in
github.com/mongodb/mongo at 8.0 (src/mongo/db/matcher/..., jstests/core/query/...).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import bson
import pytest
from bson.binary import Binary
from bson.code import Code
from bson.datetime_ms import DatetimeMS
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from bson.regex import Regex
from bson.timestamp import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from shardstream.errors import ConfigurationError
from shardstream.match import values as bv
from shardstream.match.evaluator import compile_match, compile_pipeline
from shardstream.match.order import compare
from shardstream.resume_token import UNDEFINED, DBPointer, Symbol
from shardstream.resume_token.keystring.codec import append_value
from shardstream.resume_token.keystring.type_bits import TypeBitsWriter
from tests.strategies import SCALARS

NAN = float("nan")
OID_1, OID_2 = ObjectId("650000000000000000000001"), ObjectId("650000000000000000000002")


def case(query: dict[str, Any], doc: dict[str, Any], expected: bool, name: str) -> Any:
    return pytest.param(query, doc, expected, id=name)


def check(query: dict[str, Any], doc: dict[str, Any], expected: bool) -> None:
    assert compile_match(query)(doc) is expected
    # The same event as pymongo hands it over undecoded must match alike.
    assert compile_match(query)(RawBSONDocument(bson.encode(doc))) is expected


# Paths, implicit array traversal and equality: manual "Query on Embedded/Nested Documents",
# "Query an Array", "Query an Array of Embedded Documents"; src/mongo/db/matcher/path.cpp.
PATHS = [
    case({"a": 1}, {"a": 1}, True, "scalar-equal"),
    case({"a": 1}, {"a": 2}, False, "scalar-differs"),
    case({"a": 1}, {"a": [0, 1]}, True, "equal-to-an-element"),
    case({"a": [0, 1]}, {"a": [0, 1]}, True, "equal-to-the-whole-array"),
    case({"a": [1, 0]}, {"a": [0, 1]}, False, "array-order-matters"),
    case({"a": [0, 1]}, {"a": [[0, 1], 2]}, True, "array-equal-to-an-element"),
    case({"a": 1}, {"a": [[1]]}, False, "traversal-is-one-level-deep"),
    case({"a.b": 1}, {"a": {"b": 1}}, True, "dotted-embedded"),
    case({"a.b": 1}, {"a": [{"b": 0}, {"b": 1}]}, True, "dotted-through-array"),
    case({"a.b": 1}, {"a": [{"b": [0, 1]}]}, True, "dotted-into-leaf-array"),
    case({"a.b": 1}, {"a": [[{"b": 1}]]}, False, "no-traversal-of-nested-arrays-mid-path"),
    case({"a.b.c": 1}, {"a": [{"b": [{"c": 1}]}]}, True, "two-arrays-on-the-path"),
    case({"a.b": 1}, {"a": 1}, False, "scalar-mid-path"),
    case({"a.0": 5}, {"a": [5, 6]}, True, "numeric-component-indexes"),
    case({"a.1": 5}, {"a": [5, 6]}, False, "numeric-component-wrong-index"),
    case({"a.0": 5}, {"a": {"0": 5}}, True, "numeric-component-as-field-name"),
    case({"a.0": 7}, {"a": [{"0": 7}]}, True, "numeric-field-inside-element"),
    case({"a.0.b": 1}, {"a": [{"b": 1}, {"b": 2}]}, True, "index-then-field"),
    case({"a.1.b": 1}, {"a": [{"b": 1}, {"b": 2}]}, False, "index-then-field-other-element"),
    case({"a.0.0": 1}, {"a": [[1, 2]]}, True, "index-into-nested-array"),
    case({"a.01": 5}, {"a": [0, 5]}, False, "leading-zero-is-not-an-index"),
    # "Equality matches on the whole embedded document require an exact match of the
    # specified <value> document, including the field order."
    case({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 2}}, True, "document-equal"),
    case({"a": {"b": 1, "c": 2}}, {"a": {"c": 2, "b": 1}}, False, "document-field-order"),
    case({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, False, "document-extra-field"),
    case({"a": {"b": 1}}, {"a": {"b": 1.0}}, True, "document-numbers-by-value"),
    case({"a": {}}, {"a": {}}, True, "empty-document"),
    case({"ref": {"$ref": "c", "$id": 1}}, {"ref": {"$ref": "c", "$id": 1}}, True, "dbref"),
    case({"ref.$id": 1}, {"ref": {"$ref": "c", "$id": 1}}, True, "path-into-dbref"),
]

# Numbers compare by value across int, long, double and decimal; other types never equal
# across brackets.  Manual "Comparison/Sort Order"; src/mongo/base/compare_numbers.h.
NUMBERS = [
    case({"a": 1}, {"a": 1.0}, True, "int-double"),
    case({"a": Decimal128("1")}, {"a": 1}, True, "decimal-int"),
    case({"a": Decimal128("1.00")}, {"a": Int64(1)}, True, "decimal-trailing-zeros-long"),
    case({"a": Int64(1)}, {"a": 1.0}, True, "long-double"),
    case({"a": Decimal128("0.1")}, {"a": 0.1}, False, "decimal-vs-inexact-double"),
    case({"a": Int64(2**53 + 1)}, {"a": float(2**53)}, False, "long-beyond-double-precision"),
    case({"a": NAN}, {"a": NAN}, True, "nan-equals-nan"),
    case({"a": NAN}, {"a": Decimal128("NaN")}, True, "double-nan-equals-decimal-nan"),
    case({"a": {"$lt": 0}}, {"a": Decimal128("sNaN")}, False, "signalling-nan-is-nan"),
    case({"a": {"$lte": NAN}}, {"a": Decimal128("-sNaN")}, True, "signalling-nan-lte-nan"),
    case({"a": -0.0}, {"a": 0}, True, "negative-zero"),
    case({"a": "1"}, {"a": 1}, False, "string-vs-number"),
    case({"a": True}, {"a": 1}, False, "bool-is-not-a-number"),
    case({"a": OID_1}, {"a": OID_1}, True, "object-id"),
    case({"a": datetime(2024, 1, 1, tzinfo=UTC)}, {"a": datetime(2024, 1, 1)}, True, "date"),
    case({"a": DatetimeMS(0)}, {"a": datetime(1970, 1, 1)}, True, "datetime-ms"),
    # pymongo stores milliseconds, dropping the rest of the microseconds.
    case(
        {"a": datetime(2024, 1, 1, microsecond=1999)},
        {"a": DatetimeMS(1704067200001)},
        True,
        "date-truncated-to-milliseconds",
    ),
    case(
        {"a": datetime(2024, 1, 1, microsecond=1000)},
        {"a": datetime(2024, 1, 1, microsecond=2000)},
        False,
        "date-milliseconds-differ",
    ),
    case({"a": Timestamp(5, 1)}, {"a": Timestamp(5, 1)}, True, "timestamp"),
    case({"a": Binary(b"x", 0)}, {"a": b"x"}, True, "bytes-are-bindata-subtype-0"),
    case({"a": Binary(b"x", 5)}, {"a": b"x"}, False, "bindata-subtype-differs"),
    case({"a": MinKey()}, {"a": MinKey()}, True, "min-key"),
    case({"a": MaxKey()}, {"a": MinKey()}, False, "max-key-vs-min-key"),
]

# Null matches null and missing.  Manual "Query for Null or Missing Fields";
# jstests/core/query/null_query_semantics.js (8.0: a dotted path that finds no document
# inside an array of scalars yields nothing, so {"a.b": null} does not match it).
NULLS = [
    case({"a": None}, {}, True, "null-matches-missing"),
    case({"a": None}, {"a": None}, True, "null-matches-null"),
    case({"a": None}, {"a": 0}, False, "null-vs-zero"),
    case({"a": None}, {"a": [1, None]}, True, "null-element"),
    case({"a": None}, {"a": [1, 2]}, False, "array-without-null"),
    case({"a.b": None}, {"a": 4}, True, "dotted-null-on-scalar"),
    case({"a.b": None}, {"a": {}}, True, "dotted-null-on-empty-document"),
    case({"a.b": None}, {"a": [{"b": 3}, {}]}, True, "dotted-null-element-lacks-field"),
    case({"a.b": None}, {"a": [{"b": 1}, {"b": 3}]}, False, "dotted-null-all-present"),
    case({"a.b": None}, {"a": [1, "string", 4]}, False, "dotted-null-scalar-array"),
    case({"a.b": None}, {"a": []}, False, "dotted-null-empty-array"),
    case({"a": {"$ne": None}}, {}, False, "ne-null-missing"),
    case({"a": {"$ne": None}}, {"a": 4}, True, "ne-null-present"),
    case({"a.b": {"$ne": None}}, {"a": [1, 2]}, True, "dotted-ne-null-scalar-array"),
    case({"a": {"$in": [None, 4]}}, {}, True, "in-null-matches-missing"),
    case({"a": {"$nin": [None, 4]}}, {}, False, "nin-null-missing"),
    case({"a": {"$nin": [None, 4]}}, {"a": 5}, True, "nin-null-other"),
    case({"a": {"$gte": None}}, {}, True, "gte-null-matches-missing"),
    case({"a": {"$lte": None}}, {"a": None}, True, "lte-null-matches-null"),
    case({"a": {"$gt": None}}, {}, False, "gt-null-never"),
    case({"a": {"$lt": None}}, {"a": None}, False, "lt-null-never"),
    case({"a": {"$type": "null"}}, {}, False, "type-null-not-missing"),
    case({"a": {"$type": "null"}}, {"a": None}, True, "type-null"),
    case({"a": {"$elemMatch": {"$eq": None}}}, {"a": [1, None]}, True, "elem-match-null"),
    case({"a": {"$elemMatch": {"$eq": None}}}, {"a": None}, False, "elem-match-needs-array"),
    case({"a": {"$elemMatch": {"b": None}}}, {"a": [[]]}, True, "elem-match-array-element"),
    case({"a": {"$elemMatch": {"b": None}}}, {"a": [{"b": 1}, {}]}, True, "elem-match-object"),
    case({"a": {"$elemMatch": {"b": None}}}, {"a": [{}]}, True, "elem-match-empty-document"),
]

# Comparisons only within a type bracket.  Manual $gt / $lt pages and "Comparison/Sort
# Order"; src/mongo/db/matcher/expression_leaf.cpp (MinKey/MaxKey, NaN special cases).
COMPARISONS = [
    case({"a": {"$gt": 1}}, {"a": 2}, True, "gt"),
    case({"a": {"$gt": 1}}, {"a": 1}, False, "gt-equal"),
    case({"a": {"$gt": 1}}, {"a": Decimal128("1.5")}, True, "gt-decimal"),
    case({"a": {"$gt": 1}}, {"a": "2"}, False, "gt-bracketing-string"),
    case({"a": {"$gt": "a"}}, {"a": 5}, False, "gt-bracketing-number"),
    case({"a": {"$lt": 10}}, {"a": None}, False, "lt-bracketing-null"),
    case({"a": {"$lt": 10}}, {}, False, "lt-missing"),
    case({"a": {"$gte": 2}}, {"a": 2.0}, True, "gte-double"),
    case({"a": {"$lte": Decimal128("2")}}, {"a": Int64(2)}, True, "lte-decimal-long"),
    case({"a": {"$gt": 1}}, {"a": [0, 5]}, True, "gt-any-element"),
    case({"a": {"$gt": 1}}, {"a": [0, 1]}, False, "gt-no-element"),
    # "Query an Array": {dim_cm: {$gt: 15, $lt: 20}} may pass on two different elements.
    case({"a": {"$gt": 1, "$lt": 5}}, {"a": [0, 10]}, True, "compound-on-two-elements"),
    case({"a": {"$gt": 1, "$lt": 5}}, {"a": 10}, False, "compound-on-a-scalar"),
    case({"a": {"$gt": NAN}}, {"a": 1}, False, "gt-nan"),
    case({"a": {"$lt": 1}}, {"a": NAN}, False, "nan-lt"),
    case({"a": {"$gte": NAN}}, {"a": NAN}, True, "gte-nan-nan"),
    case({"a": {"$lte": NAN}}, {"a": 1}, False, "lte-nan"),
    case({"a": {"$gt": [1]}}, {"a": [2]}, True, "gt-whole-array"),
    case({"a": {"$gt": {"b": 1}}}, {"a": {"b": 2}}, True, "gt-document-value"),
    case({"a": {"$gt": {"b": 1}}}, {"a": {"c": 0}}, True, "gt-document-field-name"),
    case({"a": {"$lt": "b"}}, {"a": "B"}, True, "strings-binary-order"),
    case({"a": {"$gt": "z"}}, {"a": "é"}, True, "strings-utf8-order"),
    case({"a": {"$lt": MaxKey()}}, {"a": "x"}, True, "lt-max-key"),
    case({"a": {"$gt": MinKey()}}, {"a": None}, True, "gt-min-key"),
    case({"a": {"$lt": MaxKey()}}, {}, True, "lt-max-key-even-missing"),
    case({"a": {"$gt": datetime(2024, 1, 1)}}, {"a": datetime(2024, 6, 1)}, True, "date-gt"),
    case({"a": {"$gt": datetime(2024, 1, 1)}}, {"a": Timestamp(2**31, 0)}, False, "date-vs-ts"),
    case({"ts": {"$gte": Timestamp(10, 1)}}, {"ts": Timestamp(10, 2)}, True, "timestamp-gte"),
    case({"a": {"$lt": OID_2}}, {"a": OID_1}, True, "object-id-order"),
    case({"a": {"$gt": Binary(b"\x09", 0)}}, {"a": b"\x00\x00"}, True, "bindata-length-first"),
    case({"a": {"$gt": False}}, {"a": True}, True, "bool-order"),
    case({"a": {"$gt": False}}, {"a": 1}, False, "bool-bracketing"),
    case({"a": {"$eq": 1}}, {"a": [2, 1]}, True, "explicit-eq"),
]

# $in / $nin / $ne: manual pages of each; $ne and $nin are the negations, so they match
# documents without the field.
MEMBERSHIP = [
    case({"a": {"$in": [1, 2]}}, {"a": [5, 2]}, True, "in-element"),
    case({"a": {"$in": [[1, 2]]}}, {"a": [1, 2]}, True, "in-whole-array"),
    case({"a": {"$in": [re.compile("^x")]}}, {"a": "xy"}, True, "in-regex"),
    case({"a": {"$in": [1.0]}}, {"a": Int64(1)}, True, "in-by-value"),
    case({"a": {"$in": []}}, {"a": 1}, False, "in-empty"),
    case({"a": {"$nin": []}}, {}, True, "nin-empty"),
    case({"a": {"$nin": [1]}}, {}, True, "nin-missing"),
    case({"a": {"$nin": [1]}}, {"a": [1, 2]}, False, "nin-element"),
    case({"a": {"$nin": [1]}}, {"a": [2, 3]}, True, "nin-no-element"),
    case({"a": {"$ne": 1}}, {}, True, "ne-missing"),
    case({"a": {"$ne": 1}}, {"a": [1, 2]}, False, "ne-element"),
    case({"a": {"$ne": 1}}, {"a": 1.0}, False, "ne-by-value"),
    case({"a": {"$ne": 1}}, {"a": "1"}, True, "ne-other-type"),
]

# $exists and $type: manual pages of each (BSON type codes and aliases on "BSON Types").
EXISTS_AND_TYPE = [
    case({"a": {"$exists": True}}, {"a": None}, True, "exists-null"),
    case({"a": {"$exists": True}}, {}, False, "exists-missing"),
    case({"a": {"$exists": True}}, {"a": []}, True, "exists-empty-array"),
    case({"a": {"$exists": False}}, {}, True, "not-exists"),
    case({"a": {"$exists": False}}, {"a": None}, False, "not-exists-null"),
    case({"a": {"$exists": 0}}, {}, True, "exists-zero-is-false"),
    case({"a": {"$exists": "false"}}, {"a": 1}, True, "exists-any-string-is-true"),
    case({"a.b": {"$exists": True}}, {"a": [{"b": 1}]}, True, "exists-through-array"),
    case({"a.b": {"$exists": True}}, {"a": [{}]}, False, "exists-through-array-missing"),
    case({"a.b": {"$exists": False}}, {"a": [1]}, True, "not-exists-scalar-array"),
    case({"a": {"$type": "string"}}, {"a": "x"}, True, "type-string"),
    case({"a": {"$type": 2}}, {"a": "x"}, True, "type-code"),
    case({"a": {"$type": 2.0}}, {"a": "x"}, True, "type-integral-double-code"),
    case({"a": {"$type": "string"}}, {"a": 2}, False, "type-string-number"),
    case({"a": {"$type": "string"}}, {"a": [1, "x"]}, True, "type-element"),
    case({"a": {"$type": "number"}}, {"a": Decimal128("1")}, True, "type-number-decimal"),
    case({"a": {"$type": "number"}}, {"a": 1.5}, True, "type-number-double"),
    case({"a": {"$type": "number"}}, {"a": True}, False, "type-number-bool"),
    case({"a": {"$type": "int"}}, {"a": 1}, True, "type-int"),
    case({"a": {"$type": "int"}}, {"a": 2**40}, False, "type-int-too-large"),
    case({"a": {"$type": "long"}}, {"a": Int64(1)}, True, "type-long"),
    case({"a": {"$type": "double"}}, {"a": 1.0}, True, "type-double"),
    case({"a": {"$type": "array"}}, {"a": []}, True, "type-array-empty"),
    case({"a": {"$type": "array"}}, {"a": [1]}, True, "type-array"),
    case({"a": {"$type": "array"}}, {"a": 1}, False, "type-array-scalar"),
    case({"a": {"$type": ["int", "string"]}}, {"a": "x"}, True, "type-list"),
    case({"a": {"$type": []}}, {"a": "x"}, False, "type-empty-list"),
    case({"a": {"$type": "object"}}, {"a": {"b": 1}}, True, "type-object"),
    case({"a": {"$type": "regex"}}, {"a": Regex("x")}, True, "type-regex"),
    case({"a": {"$type": "binData"}}, {"a": b"x"}, True, "type-bindata"),
    case({"a": {"$type": "date"}}, {"a": datetime(2024, 1, 1)}, True, "type-date"),
    case({"a": {"$type": "timestamp"}}, {"a": Timestamp(1, 1)}, True, "type-timestamp"),
    case({"a": {"$type": "objectId"}}, {"a": OID_1}, True, "type-object-id"),
    case({"a": {"$type": "bool"}}, {"a": False}, True, "type-bool"),
    case({"a": {"$type": "javascript"}}, {"a": Code("f()")}, True, "type-javascript"),
    case({"a": {"$type": 15}}, {"a": Code("f()", {"x": 1})}, True, "type-javascript-with-scope"),
    case({"a": {"$type": "javascript"}}, {"a": Code("f()", {})}, False, "type-scope-differs"),
    case({"a": {"$type": -1}}, {"a": MinKey()}, True, "type-min-key"),
    case({"a": {"$type": "maxKey"}}, {"a": MaxKey()}, True, "type-max-key"),
]

# $regex: manual $regex page (flags i, m, s, x; a regex value matches only itself).
REGEXES = [
    case({"a": {"$regex": "^A", "$options": "i"}}, {"a": "abc"}, True, "regex-options-i"),
    case({"a": {"$options": "i", "$regex": "^A"}}, {"a": "abc"}, True, "regex-options-first"),
    case({"a": re.compile("^a", re.IGNORECASE)}, {"a": "ABC"}, True, "python-pattern"),
    case({"a": Regex("^a", "i")}, {"a": "ABC"}, True, "bson-regex"),
    case({"a": {"$regex": "^b"}}, {"a": ["abc", "bcd"]}, True, "regex-element"),
    case({"a": {"$regex": "a"}}, {"a": 1}, False, "regex-number"),
    case({"a": {"$regex": "x"}}, {"a": Code("x")}, False, "regex-javascript"),
    case({"a": {"$regex": "^x$", "$options": "m"}}, {"a": "y\nx"}, True, "regex-multiline"),
    case({"a": {"$regex": "^x$"}}, {"a": "y\nx"}, False, "regex-no-multiline"),
    case({"a": {"$regex": "a.c", "$options": "s"}}, {"a": "a\nc"}, True, "regex-dotall"),
    case({"a": {"$regex": "a b # c", "$options": "x"}}, {"a": "ab"}, True, "regex-extended"),
    case({"a": {"$regex": "x"}}, {"a": Regex("x")}, True, "regex-vs-same-regex"),
    case({"a": {"$regex": "x"}}, {"a": Regex("x", "i")}, False, "regex-vs-other-flags"),
    case({"a": {"$eq": Regex("x")}}, {"a": Regex("x")}, True, "eq-regex-is-literal"),
    case({"a": {"$eq": Regex("x")}}, {"a": "x"}, False, "eq-regex-no-pattern-match"),
    case({"a": {"$regex": "x", "$options": "i"}}, {"a": Regex("x", "i")}, True, "regex-vs-regex"),
    case({"a": {"$options": "", "$regex": Regex("x", "i")}}, {"a": "X"}, True, "empty-options"),
    case({"a": {"$regex": "^ab", "$not": {"$regex": "c$"}}}, {"a": "abc"}, False, "regex-and-not"),
]

# $not: manual $not page ("also matches documents that do not contain the field").
NOTS = [
    case({"a": {"$not": {"$gt": 5}}}, {}, True, "not-missing"),
    case({"a": {"$not": {"$gt": 5}}}, {"a": 3}, True, "not-smaller"),
    case({"a": {"$not": {"$gt": 5}}}, {"a": 6}, False, "not-larger"),
    case({"a": {"$not": {"$gt": 5}}}, {"a": [3, 6]}, False, "not-any-element"),
    case({"a": {"$not": {"$gt": 5}}}, {"a": "x"}, True, "not-other-type"),
    case({"a": {"$not": {"$gt": 1, "$lt": 5}}}, {"a": 7}, True, "not-of-conjunction"),
    case({"a": {"$not": re.compile("^x")}}, {"a": "xy"}, False, "not-pattern"),
    case({"a": {"$not": {"$regex": "^x"}}}, {"a": "y"}, True, "not-regex-document"),
    case({"a": {"$not": {"$regex": "^x"}}}, {"a": 1}, True, "not-regex-number"),
]

# $all, $size, $elemMatch: manual pages of each (examples reused where they fit).
ARRAYS = [
    case({"a": {"$all": [1, 2]}}, {"a": [2, 3, 1]}, True, "all"),
    case({"a": {"$all": [1, 2]}}, {"a": [1]}, False, "all-missing-one"),
    case({"a": {"$all": [1]}}, {"a": 1}, True, "all-on-scalar"),
    case({"a": {"$all": [[1, 2]]}}, {"a": [1, 2]}, True, "all-nested-whole"),
    case({"a": {"$all": [[1, 2]]}}, {"a": [[1, 2], 3]}, True, "all-nested-element"),
    case({"a": {"$all": []}}, {"a": []}, False, "all-empty-never"),
    case({"a": {"$not": {"$all": []}}}, {"a": []}, True, "not-all-empty"),
    case({"a": {"$all": [re.compile("^x"), "yz"]}}, {"a": ["xa", "yz"]}, True, "all-regex"),
    case(
        {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}},
        {"a": [{"b": 1}, {"c": 2}]},
        True,
        "all-elem-match",
    ),
    case({"a": {"$all": [{"$elemMatch": {"b": 1}}]}}, {"a": [{"c": 1}]}, False, "all-em-fails"),
    case({"a": {"$size": 2}}, {"a": [1, 2]}, True, "size"),
    case({"a": {"$size": 2}}, {"a": [[1, 2]]}, False, "size-no-traversal"),
    case({"a": {"$size": 1}}, {"a": [[1, 2]]}, True, "size-outer-array"),
    case({"a": {"$size": 2}}, {"a": "ab"}, False, "size-string"),
    case({"a": {"$size": 0}}, {"a": []}, True, "size-zero"),
    case({"a": {"$size": 0}}, {}, False, "size-missing"),
    case({"a": {"$size": 2.0}}, {"a": [1, 2]}, True, "size-integral-double"),
    case({"a.b": {"$size": 1}}, {"a": [{"b": [1]}, {"b": [1, 2]}]}, True, "size-dotted"),
    case({"a": {"$elemMatch": {"$gte": 80, "$lt": 85}}}, {"a": [82, 85]}, True, "em-value"),
    case({"a": {"$elemMatch": {"$gte": 80, "$lt": 85}}}, {"a": [75, 88]}, False, "em-one-elem"),
    case(
        {"r": {"$elemMatch": {"product": "xyz", "score": {"$gte": 8}}}},
        {"r": [{"product": "abc", "score": 10}, {"product": "xyz", "score": 5}]},
        False,
        "em-object-same-element",
    ),
    case(
        {"r": {"$elemMatch": {"product": "xyz", "score": {"$gte": 8}}}},
        {"r": [{"product": "xyz", "score": 8}]},
        True,
        "em-object",
    ),
    case({"a": {"$elemMatch": {"$gt": 1}}}, {"a": 5}, False, "em-needs-array"),
    case({"a": {"$elemMatch": {"$gt": 1}}}, {"a": [[5]]}, False, "em-no-nested-traversal"),
    case({"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": 1}]}}}, {"a": [{"c": 1}]}, True, "em-or"),
    case({"a": {"$elemMatch": {}}}, {"a": [{"x": 1}]}, True, "em-empty-document"),
    case({"a": {"$elemMatch": {}}}, {"a": [1]}, False, "em-empty-scalars"),
    case({"a.b": {"$elemMatch": {"$eq": 2}}}, {"a": [{"b": [1, 2]}]}, True, "em-dotted"),
    case({"a": {"$elemMatch": {"$elemMatch": {"$eq": 1}}}}, {"a": [[1]]}, True, "em-nested"),
    case({"a": {"$elemMatch": {"$not": {"$gt": 1}}}}, {"a": [5, 0]}, True, "em-not"),
    case({"a": {"$elemMatch": {"$size": 1}}}, {"a": [[5]]}, True, "em-size"),
]

# $mod: manual $mod page (operands truncate toward zero; NaN and infinity never match);
# remainders follow C++ '%' (the dividend's sign), as ModMatchExpression does.
MODS = [
    case({"a": {"$mod": [4, 0]}}, {"a": 8}, True, "mod"),
    case({"a": {"$mod": [4, 0]}}, {"a": 9}, False, "mod-remainder"),
    case({"a": {"$mod": [4, 1]}}, {"a": -7}, False, "mod-negative-dividend"),
    case({"a": {"$mod": [4, -3]}}, {"a": -7}, True, "mod-negative-remainder"),
    case({"a": {"$mod": [-4, 1]}}, {"a": 5}, True, "mod-negative-divisor"),
    case({"a": {"$mod": [4, 0]}}, {"a": 8.9}, True, "mod-double-truncates"),
    case({"a": {"$mod": [4.5, 0]}}, {"a": 8}, True, "mod-divisor-truncates"),
    case({"a": {"$mod": [4, 1]}}, {"a": Decimal128("9.5")}, True, "mod-decimal"),
    case({"a": {"$mod": [4, 0]}}, {"a": NAN}, False, "mod-nan"),
    case({"a": {"$mod": [4, 0]}}, {"a": math.inf}, False, "mod-infinity"),
    case({"a": {"$mod": [4, 0]}}, {"a": "8"}, False, "mod-string"),
    case({"a": {"$mod": [-1, 0]}}, {"a": Int64(-(2**63))}, True, "mod-minus-one-int64-min"),
]

# $and / $or / $nor: manual pages of each.
LOGICAL = [
    case({"$or": [{"a": 1}, {"b": 2}]}, {"b": 2}, True, "or"),
    case({"$or": [{"a": 1}, {"b": 2}]}, {"b": 3}, False, "or-none"),
    case({"$and": [{"a": {"$gt": 1}}, {"a": {"$lt": 5}}]}, {"a": 3}, True, "and"),
    case({"$nor": [{"a": 1}, {"b": 2}]}, {}, True, "nor-missing"),
    case({"$nor": [{"a": 1}, {"b": 2}]}, {"a": 1}, False, "nor"),
    case({"$or": [{"$and": [{"a": 1}, {"b": 1}]}, {"c": 1}]}, {"a": 1, "b": 1}, True, "nested"),
    case({"a": 1, "$or": [{"b": 1}, {"c": 1}]}, {"a": 1, "c": 1}, True, "implicit-and"),
    case({"$comment": "why", "a": 1}, {"a": 1}, True, "comment-ignored"),
    case({}, {"anything": 1}, True, "empty-query"),
]


@pytest.mark.parametrize(
    ("query", "doc", "expected"),
    PATHS + NUMBERS + NULLS + COMPARISONS + MEMBERSHIP + EXISTS_AND_TYPE + REGEXES + NOTS
    + ARRAYS + MODS + LOGICAL,
)  # fmt: skip
def test_query_semantics(query: dict[str, Any], doc: dict[str, Any], expected: bool) -> None:
    check(query, doc, expected)


def test_undefined_does_not_match_null() -> None:
    # 8.0 compatibility notes: "comparisons to null ... don't match undefined values".
    # (pymongo decodes undefined as None; this is the project's own UNDEFINED value.)
    assert not compile_match({"a": None})({"a": UNDEFINED})
    assert compile_match({"a": {"$type": "undefined"}})({"a": UNDEFINED})


def test_symbol_is_a_string_of_type_symbol() -> None:
    doc = {"a": Symbol("xy")}
    assert compile_match({"a": "xy"})(doc)
    assert compile_match({"a": {"$regex": "^x"}})(doc)
    assert compile_match({"a": {"$type": "symbol"}})(doc)
    assert not compile_match({"a": {"$type": "string"}})(doc)


# ---- change-stream filters on realistic events ---------------------------------------

WALL = datetime(2024, 5, 1, 12, 0, 0)
INSERT = {
    "_id": {"_data": "8266"},
    "operationType": "insert",
    "clusterTime": Timestamp(1714564800, 1),
    "wallTime": WALL,
    "fullDocument": {"_id": OID_1, "status": "paid", "qty": Int64(3), "tags": ["a", "b"]},
    "ns": {"db": "shop", "coll": "orders"},
    "documentKey": {"_id": OID_1},
}
UPDATE = {
    "_id": {"_data": "8267"},
    "operationType": "update",
    "clusterTime": Timestamp(1714564801, 1),
    "wallTime": WALL + timedelta(seconds=1),
    "ns": {"db": "shop", "coll": "orders"},
    "documentKey": {"_id": OID_1},
    "updateDescription": {"updatedFields": {"qty": 5}, "removedFields": [], "truncatedArrays": []},
}
DELETE = {
    "_id": {"_data": "8268"},
    "operationType": "delete",
    "clusterTime": Timestamp(1714564802, 1),
    "ns": {"db": "shop", "coll": "returns"},
    "documentKey": {"_id": OID_2},
}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"operationType": {"$in": ["insert", "update"]}}, [True, True, False]),
        ({"fullDocument.status": "paid"}, [True, False, False]),
        ({"ns.coll": {"$regex": "^ord"}}, [True, True, False]),
        ({"updateDescription.updatedFields.qty": {"$exists": True}}, [False, True, False]),
        ({"fullDocument.tags": "b"}, [True, False, False]),
        ({"clusterTime": {"$gt": Timestamp(1714564800, 1)}}, [False, True, True]),
        ({"wallTime": {"$lt": WALL + timedelta(seconds=1)}}, [True, False, False]),
        ({"documentKey._id": OID_2}, [False, False, True]),
        ({"operationType": {"$nin": ["delete"]}, "fullDocument.qty": {"$gte": 3}}, [1, 0, 0]),
        ({"$or": [{"operationType": "delete"}, {"fullDocument.qty": 3.0}]}, [1, 0, 1]),
    ],
)
def test_change_stream_filters(query: dict[str, Any], expected: list[Any]) -> None:
    predicate = compile_pipeline([{"$match": query}])
    assert predicate is not None
    for event, want in zip([INSERT, UPDATE, DELETE], expected, strict=True):
        assert predicate(event) is bool(want)
        assert predicate(RawBSONDocument(bson.encode(event))) is bool(want)


def test_empty_pipeline_is_none() -> None:
    assert compile_pipeline([]) is None


def test_several_match_stages_are_anded() -> None:
    predicate = compile_pipeline([{"$match": {"ns.db": "shop"}}, {"$match": {"ns.coll": "orders"}}])
    assert predicate is not None
    assert [predicate(e) for e in (INSERT, UPDATE, DELETE)] == [True, True, False]


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        ([{"$project": {"a": 1}}], r"'\$project'.*only \$match"),
        ([{"$match": {}}, {"$addFields": {"x": 1}}], r"stage 1 is '\$addFields'"),
        ([{"$match": {}, "$limit": 1}], "exactly one field"),
        (["$match"], "exactly one field"),
        ({"$match": {}}, "list of stages"),
        ("[]", "list of stages"),
        ([{"$match": 5}], r"\$match needs a document"),
    ],
)
def test_unsupported_pipelines(pipeline: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        compile_pipeline(pipeline)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"$expr": {"$eq": ["$a", 1]}}, r"\$expr is not supported client-side"),
        ({"$where": "this.a == 1"}, r"\$where is not supported"),
        ({"$text": {"$search": "x"}}, r"\$text is not supported"),
        ({"$jsonSchema": {}}, r"\$jsonSchema is not supported"),
        ({"$size": 1}, r"top-level operator \$size is unknown"),
        ({"$foo": 1}, r"\$foo is unknown; supported: \$and"),
        ({"a": {"$near": [0, 0]}}, r"\$near is not supported client-side"),
        ({"a": {"$geoWithin": {}}}, r"\$geoWithin is not supported"),
        ({"a": {"$bitsAllSet": 1}}, r"\$bitsAllSet is not supported"),
        ({"a": {"$foo": 1}}, r"operator \$foo is unknown"),
        ({"a": {"$gt": 1, "b": 2}}, "operator b is unknown"),
        ({"a": {"$elemMatch": {"$where": "x"}}}, r"\$where is not supported"),
        ({"$or": []}, "nonempty array"),
        ({"$and": {"a": 1}}, "nonempty array"),
        ({"$nor": [1]}, "full objects"),
        ({"a": {"$in": 1}}, r"\$in / \$nin need an array"),
        ({"a": {"$nin": [{"$gt": 1}]}}, r"cannot nest \$ under \$in / \$nin"),
        ({"a": {"$ne": re.compile("x")}}, "Can't have regex as arg to"),
        ({"a": {"$eq": {1, 2}}}, r"\$eq needs a BSON value: set value"),
        ({"a": {"$gt": 2**64}}, "does not fit in 64 bits"),
        ({"a": {"$in": [{1: 2}]}}, "field name 1 is not a string"),
        ({"a": {"$eq": UNDEFINED}}, "cannot compare to undefined"),
        ({"a": {"$not": 5}}, "needs a regex or a nonempty document"),
        ({"a": {"$not": {}}}, "needs a regex or a nonempty document"),
        ({"a": {"$not": {"b": 1}}}, "operator b is unknown"),
        ({"a": {"$options": "i"}}, r"\$options needs a \$regex"),
        ({"a": {"$regex": Regex("x", "i"), "$options": "m"}}, "options set in both"),
        ({"a": {"$regex": "x", "$options": "g"}}, "invalid flag in regex options: g"),
        ({"a": Regex("x", "l")}, "invalid flag in regex options: l"),
        ({"a": {"$regex": "("}}, "Regular expression is invalid"),
        ({"a": {"$regex": "a\x00"}}, "embedded null byte"),
        ({"a": {"$regex": 5}}, r"\$regex has to be a string"),
        ({"a": {"$options": "i", "$regex": Regex("x", "m")}}, "options set in both"),
        # pymongo sends re.compile("x") as /x/u, so its flags clash with $options too.
        ({"a": {"$regex": re.compile("x"), "$options": "i"}}, "options set in both"),
        ({"a": {"$regex": "x", "$options": 1}}, r"\$options has to be a string"),
        ({"a": {"$type": "missing"}}, "type codes or aliases, got 'missing'"),
        ({"a": {"$type": 0}}, "type codes or aliases, got 0"),
        ({"a": {"$type": 100}}, "type codes or aliases, got 100"),
        ({"a": {"$type": 2.5}}, "type codes or aliases, got 2.5"),
        ({"a": {"$type": ["int", None]}}, "type codes or aliases, got None"),
        ({"a": {"$type": {"x": 1}}}, "type codes or aliases"),
        ({"a": {"$all": 1}}, r"\$all needs an array"),
        ({"a": {"$all": [{"$elemMatch": {}}, 1]}}, "has to be consistent"),
        ({"a": {"$all": [{"$gt": 1}]}}, r"no \$ expressions in \$all"),
        ({"a": {"$size": -1}}, "non-negative integer"),
        ({"a": {"$size": 1.5}}, "non-negative integer"),
        ({"a": {"$size": "2"}}, "non-negative integer"),
        ({"a": {"$size": True}}, "non-negative integer"),
        ({"a": {"$size": math.inf}}, "non-negative integer"),
        ({"a": {"$elemMatch": 1}}, "needs an Object"),
        ({"a": {"$mod": [0, 1]}}, "divisor cannot be 0"),
        ({"a": {"$mod": [4]}}, "malformed mod"),
        ({"a": {"$mod": [4, 1, 2]}}, "malformed mod"),
        ({"a": {"$mod": ["4", 1]}}, "malformed mod"),
        ({"a": {"$mod": [4, math.nan]}}, "malformed mod"),
        ({"a": {"$mod": 4}}, "malformed mod"),
    ],
)
def test_rejected_queries(query: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        compile_match(query)


# ---- properties ------------------------------------------------------------------------

LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(-3, 3).map(Int64),
    st.sampled_from([0.5, -1.0, 2.0, NAN, math.inf]),
    st.sampled_from(["0", "1", "-1.5", "NaN"]).map(Decimal128),
    st.sampled_from(["", "a", "ab", "b"]),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "0"]), inner, max_size=2),
    ),
    max_leaves=6,
)
DOCS = st.dictionaries(st.sampled_from(["a", "b"]), VALUES, max_size=2)
PATH_NAMES = st.sampled_from(["a", "a.b", "a.0", "a.0.b", "b.a"])
OPERATORS = st.one_of(
    st.builds(
        lambda op, v: {op: v}, st.sampled_from(["$eq", "$gt", "$gte", "$lt", "$lte"]), VALUES
    ),
    st.builds(lambda v: {"$in": v}, st.lists(VALUES, max_size=3)),
    st.builds(lambda v: {"$exists": v}, st.booleans()),
    st.builds(lambda v: {"$type": v}, st.sampled_from([*bv.TYPE_ALIASES, "number"])),
    st.builds(lambda v: {"$size": v}, st.integers(0, 3)),
    st.builds(lambda v: {"$regex": v}, st.sampled_from(["^a", "b$", "a|b"])),
    st.builds(lambda v: {"$elemMatch": {"$gte": v}}, LEAVES),
    st.builds(lambda v: {"$elemMatch": {"a": v}}, LEAVES),
    st.builds(lambda d, r: {"$mod": [d, r]}, st.integers(1, 3), st.integers(0, 2)),
    st.builds(lambda v: {"$all": v}, st.lists(LEAVES, min_size=1, max_size=2)),
)
OPERATOR_DOCS = st.lists(OPERATORS, min_size=1, max_size=2).map(
    lambda ops: {key: value for op in ops for key, value in op.items()}
)
QUERIES = st.builds(lambda path, ops: {path: ops}, PATH_NAMES, OPERATOR_DOCS)


@given(QUERIES, DOCS)
def test_not_negates(query: dict[str, Any], doc: dict[str, Any]) -> None:
    ((path, operators),) = query.items()
    assert compile_match({path: {"$not": operators}})(doc) is not compile_match(query)(doc)


@given(st.lists(QUERIES, min_size=1, max_size=3), DOCS)
def test_nor_negates_or(queries: list[dict[str, Any]], doc: dict[str, Any]) -> None:
    either = compile_match({"$or": queries})(doc)
    assert compile_match({"$nor": queries})(doc) is not either
    assert either is any(compile_match(query)(doc) for query in queries)


@given(PATH_NAMES, VALUES, st.lists(VALUES, max_size=3), DOCS)
def test_ne_and_nin_negate_eq_and_in(path: str, value: Any, values: list[Any], doc: Any) -> None:
    assert compile_match({path: {"$ne": value}})(doc) is not compile_match({path: value})(doc)
    negated = compile_match({path: {"$nin": values}})(doc)
    assert negated is not compile_match({path: {"$in": values}})(doc)


@given(QUERIES, DOCS)
def test_raw_documents_match_like_decoded_ones(query: dict[str, Any], doc: Any) -> None:
    predicate = compile_match(query)
    assert predicate(RawBSONDocument(bson.encode(doc))) is predicate(doc)


@given(st.integers(-(2**53), 2**53))
def test_numbers_equal_across_types(number: int) -> None:
    forms = [number, Int64(number), float(number), Decimal128(str(number))]
    for left in forms:
        for right in forms:
            assert compile_match({"a": left})({"a": right})


ORDERED = SCALARS.filter(lambda v: not isinstance(v, Code | DBPointer) and v is not UNDEFINED)
ORDERED_VALUES = st.recursive(
    ORDERED,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("ab"), inner, max_size=2)
    ),
    max_leaves=5,
)


def _keystring(value: Any) -> bytes:
    out = bytearray()
    append_value(out, TypeBitsWriter(), value)
    return bytes(out)


@given(ORDERED_VALUES, ORDERED_VALUES)
def test_order_agrees_with_keystring(left: Any, right: Any) -> None:
    # KeyString bytes sort exactly as the server's BSON comparison (key_string.cpp), so
    # the resume-token encoder is an independent oracle for the value order.
    expected = (_keystring(left) > _keystring(right)) - (_keystring(left) < _keystring(right))
    assert compare(left, right) == expected
    assert compare(right, left) == -expected


@given(SCALARS.filter(lambda v: not isinstance(v, Symbol | DBPointer) and v is not UNDEFINED))
def test_bson_type_is_what_pymongo_writes(value: Any) -> None:
    written = bson.encode({"v": value})[4]  # the type byte of the document's first element
    assert bv.bson_type(value) == (-1 if written == 0xFF else written)
