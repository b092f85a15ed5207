"""Tests for shardstream.transform.update.apply_update (post-images from update oplog entries).

The ``DiffApplierTest`` / ``DiffSerializationTest`` cases are the server's own, from
src/mongo/db/update/document_diff_applier_test.cpp and document_diff_serialization_test.cpp,
with the builder calls written out as the diff objects they serialize to.  Results are compared
as encoded BSON, so field order and BSON types (int32 / int64 / double) both count.
"""

from __future__ import annotations

import copy
from typing import Any

import bson
import pytest
from bson.binary import Binary
from bson.int64 import Int64
from bson.raw_bson import RawBSONDocument
from hypothesis import given
from hypothesis import strategies as st

from shardstream.errors import TransformError
from shardstream.transform.update.apply_update import apply_update


def v2(diff: dict[str, Any]) -> dict[str, Any]:
    return {"$v": 2, "diff": diff}


def assert_same(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert type(actual) is dict
    assert list(actual.items()) == list(expected.items())
    assert bson.encode(actual) == bson.encode(expected), (actual, expected)


def check_diff(pre: dict[str, Any], diff: dict[str, Any], expected: dict[str, Any]) -> None:
    """Like the server's checkDiff: once, then again on the result (diffs are idempotent)."""
    snapshot = copy.deepcopy(pre)
    post = apply_update(pre, v2(diff))
    assert_same(post, expected)
    assert_same(apply_update(post, v2(diff)), expected)
    assert bson.encode(pre) == bson.encode(snapshot)  # the input is never mutated


def raises_code(code: int | None, document: dict[str, Any], update: dict[str, Any]) -> None:
    with pytest.raises(TransformError) as caught:
        apply_update(document, update)
    assert caught.value.code == code


# --- DiffApplierTest (document_diff_applier_test.cpp) ------------------------------------------


def test_delete_simple() -> None:  # DeleteSimple
    check_diff(
        {"f1": 1, "foo": 2, "f2": 3}, {"d": {"f1": False, "f2": False, "f3": False}}, {"foo": 2}
    )


def test_insert_simple() -> None:  # InsertSimple: an existing field inserted again moves to the end
    check_diff(
        {"f1": 1, "foo": 2, "f2": 3},
        {"i": {"f1": 1, "newField": 2}},
        {"foo": 2, "f2": 3, "f1": 1, "newField": 2},
    )


def test_update_simple() -> None:  # UpdateSimple: in place, or appended when missing
    check_diff(
        {"f1": 0, "foo": 2, "f2": 3},
        {"u": {"f1": 1, "newField": 2}},
        {"f1": 1, "foo": 2, "f2": 3, "newField": 2},
    )


def test_sub_obj_diff_simple() -> None:  # SubObjDiffSimple
    check_diff(
        {"obj": {"dField": 0, "iField": 0, "uField": 0}, "otherField": 0},
        {"sobj": {"d": {"dField": False}, "u": {"uField": 2}, "i": {"iField": 1}}},
        {"obj": {"uField": 2, "iField": 1}, "otherField": 0},
    )


def test_sub_array_diff_simple_with_append() -> None:  # SubArrayDiffSimpleWithAppend
    check_diff(
        {"arr": [999, 999, 999, 999]},
        {"sarr": {"a": True, "u1": 1, "u4": 2}},
        {"arr": [999, 1, 999, 999, 2]},
    )


def test_sub_array_diff_simple_with_truncate() -> None:  # SubArrayDiffSimpleWithTruncate
    check_diff(
        {"arr": [999, 999, 999, 999]},
        {"sarr": {"a": True, "l": 3, "u1": 1}},
        {"arr": [999, 1, 999]},
    )


def test_sub_array_diff_simple_with_null_padding() -> None:  # SubArrayDiffSimpleWithNullPadding
    check_diff({"arr": [0]}, {"sarr": {"a": True, "u3": 1}}, {"arr": [0, None, None, 1]})


NESTED = {"ssubObj": {"ssubObj": {"u": {"a": 1}}}}


@pytest.mark.parametrize(
    ("pre", "expected"),
    [  # NestedSubObjUpdateScalar
        ({"subObj": {"subObj": {"a": 0}}}, {"subObj": {"subObj": {"a": 1}}}),
        ({"someOtherField": 1}, {"someOtherField": 1}),  # sub-diff on a missing field: no-op
        (  # type mismatch: null, in place
            {"dummyA": 1, "dummyB": 2, "subObj": "scalar!", "dummyC": 3, "dummyD": 4},
            {"dummyA": 1, "dummyB": 2, "subObj": None, "dummyC": 3, "dummyD": 4},
        ),
        (
            {
                "dummyA": 1,
                "dummyB": 2,
                "subObj": {"subDummyA": 1, "subObj": "scalar!", "subDummyB": 2},
                "dummyC": 3,
            },
            {
                "dummyA": 1,
                "dummyB": 2,
                "subObj": {"subDummyA": 1, "subObj": None, "subDummyB": 2},
                "dummyC": 3,
            },
        ),
    ],
)
def test_nested_sub_obj_update_scalar(pre: dict[str, Any], expected: dict[str, Any]) -> None:
    check_diff(pre, NESTED, expected)


ARRAY_OF_OBJECTS = {
    "d": {"dFieldA": False, "dFieldB": False},
    "u": {"uField": 999},
    "sarr": {
        "a": True,
        "s1": {"u": {"a": 1}},
        "s2": {"u": {"b": 2}},
        "s3": {"u": {"c": 3}},
        "u4": {"x": 1},
    },
}


@pytest.mark.parametrize(
    ("pre", "expected"),
    [  # UpdateArrayOfObjectsSubDiff
        (
            {"uField": 1, "dFieldA": 1, "arr": [None, {"a": 0}, {"b": 0}, {"c": 0}], "dFieldB": 1},
            {"uField": 999, "arr": [None, {"a": 1}, {"b": 2}, {"c": 3}, {"x": 1}]},
        ),
        (
            {"uField": 1, "dFieldA": 1, "arr": [{"a": 0}, {"b": 0}, {"c": 0}, {}], "dFieldB": 1},
            {
                "uField": 999,
                "arr": [{"a": 0}, {"b": 0, "a": 1}, {"c": 0, "b": 2}, {"c": 3}, {"x": 1}],
            },
        ),
        (
            {"arr": [None, {"a": 1}, {"b": 2}, {"c": 3}, {"x": 1}], "uField": 999},
            {"arr": [None, {"a": 1}, {"b": 2}, {"c": 3}, {"x": 1}], "uField": 999},
        ),
        (
            {"arr": [0, 0, 0, 0, {"x": 2}], "uField": 1},
            {"arr": [0, None, None, None, {"x": 1}], "uField": 999},
        ),
        ({"arr": [], "uField": 1}, {"arr": [None, None, None, None, {"x": 1}], "uField": 999}),
        (
            {"arr": [0, {}, {}, {}, 4, 5, 6], "uField": 1},
            {"arr": [0, {"a": 1}, {"b": 2}, {"c": 3}, {"x": 1}, 5, 6], "uField": 999},
        ),
        (
            {"dummyA": 1, "arr": {"foo": 1}, "dummyB": 1},
            {"dummyA": 1, "arr": None, "dummyB": 1, "uField": 999},
        ),
        (
            {"dummyA": 1, "arr": 1, "dummyB": 1},
            {"dummyA": 1, "arr": None, "dummyB": 1, "uField": 999},
        ),
    ],
)
def test_update_array_of_objects_sub_diff(pre: dict[str, Any], expected: dict[str, Any]) -> None:
    check_diff(pre, ARRAY_OF_OBJECTS, expected)


NON_CONTIGUOUS = {"sarr": {"a": True, "u1": 997, "u2": {"newVal": 998}, "u5": 999}}


@pytest.mark.parametrize(
    ("pre", "expected"),
    [  # UpdateArrayOfObjectsWithUpdateOperationNonContiguous
        ({"arr": [None, {}, {}, {}, {}, {}]}, {"arr": [None, 997, {"newVal": 998}, {}, {}, 999]}),
        ({"arr": [{}, {}, {}, {}]}, {"arr": [{}, 997, {"newVal": 998}, {}, None, 999]}),
        (
            {"arr": [{}, 997, {"newVal": 998}, {}, {}, 999]},
            {"arr": [{}, 997, {"newVal": 998}, {}, {}, 999]},
        ),
        ({"arr": [0, 1, 2, 3, 4, 5, 6]}, {"arr": [0, 997, {"newVal": 998}, 3, 4, 999, 6]}),
        (
            {"arr": [0, 1, [], [], ["a", "b"], 5, 6]},
            {"arr": [0, 997, {"newVal": 998}, [], ["a", "b"], 999, 6]},
        ),
        (
            {"arr": [0, {"x": 1}, 2, 3, {"x": 1}, 5, 6]},
            {"arr": [0, 997, {"newVal": 998}, 3, {"x": 1}, 999, 6]},
        ),
        ({"arr": {"x": 1}}, {"arr": None}),
        ({"arr": "scalar!"}, {"arr": None}),
        ({"dummyA": 1, "arr": {"foo": 1}, "dummyB": 1}, {"dummyA": 1, "arr": None, "dummyB": 1}),
        ({"dummyA": 1, "arr": 1, "dummyB": 1}, {"dummyA": 1, "arr": None, "dummyB": 1}),
    ],
)
def test_update_array_non_contiguous(pre: dict[str, Any], expected: dict[str, Any]) -> None:
    check_diff(pre, NON_CONTIGUOUS, expected)


def binary_diff(offset: int, data: bytes) -> dict[str, Any]:
    return {"b": {"b1": {"o": offset, "d": data}}}


def column(data: bytes) -> Binary:
    return Binary(data, 7)  # BinDataType::Column, as the time-series buckets the b section serves


@pytest.mark.parametrize(
    ("pre", "diff", "expected"),
    [
        (b"abc", binary_diff(3, b"def"), b"abcdef"),  # BinaryAppendSimple
        (b"abc", binary_diff(2, b"def"), b"abdef"),  # BinaryOverwriteSimple
        (b"abcdef", binary_diff(3, b"def"), b"abcdef"),  # BinaryIsIdempotent
        (b"abcdef", binary_diff(1, b"x"), b"ax"),  # BinaryIsIdempotentMultipleWithShrink ...
        (b"ax", binary_diff(3, b"def"), b"ax"),  # ... an offset past the end changes nothing
        (b"ax", binary_diff(1, b"x"), b"ax"),
    ],
)
def test_binary_section(pre: bytes, diff: dict[str, Any], expected: bytes) -> None:
    check_diff({"x": 1, "b1": column(pre), "y": 2}, diff, {"x": 1, "b1": column(expected), "y": 2})


def test_binary_section_type_mismatch_is_rejected() -> None:
    raises_code(None, {"b1": "text"}, v2(binary_diff(0, b"x")))


@pytest.mark.parametrize(
    "diff",
    [
        {"d": {"dupField": False}, "u": {"dupField": "new value"}},  # DiffWithDuplicateFields
        # DuplicateFieldNames, across sections (a dict cannot hold the within-section cases)
        {"d": {"b": False}, "i": {"a": {}, "b": None}},
        {"u": {"b": False}, "i": {"a": {}, "b": None}},
        {"u": {"a": {}}, "sa": {"d": {"k": False}}},
    ],
)
def test_duplicate_field_names(diff: dict[str, Any]) -> None:
    raises_code(4728000, {}, v2(diff))


def test_empty_diff() -> None:  # EmptyDiff
    raises_code(4770500, {}, v2({}))


def test_array_diff_at_top() -> None:  # ArrayDiffAtTop: the top level is always a document diff
    raises_code(4770503, {}, v2({"a": True, "l": 5, "d0": False}))


# --- DiffSerializationTest (document_diff_serialization_test.cpp) -------------------------------


@pytest.mark.parametrize(
    ("diff", "code"),
    [  # UnexpectedFieldsInObjDiff
        ({"d": {"f": False}, "": {}}, 4770505),
        ({"": {}}, 4770505),
        ({"d": {"f": False}, "s": {}}, 4770500),
        ({"sa": {}}, 4770500),
        ({"p": 1}, 4770503),
        ({"u": True}, 4770507),
        ({"d": []}, 4770507),
        ({"i": None}, 4770507),
        ({"i": {}, "d": {}}, 4770503),
        ({"s": {"i": {}}, "i": {}}, 4770514),
        ({"sa": {"u": {}}, "d": {"p": False}}, 4770514),
        ({"sa": {"u": {}}, "sb": {"u": {}}, "i": {}}, 4770514),
        ({"sa": {"u": {}}, "p": {}}, 4770514),
        ({"sa": {"u": {}}, "sb": 1}, 470510),
    ],
)
def test_unexpected_fields_in_obj_diff(diff: dict[str, Any], code: int) -> None:
    raises_code(code, {}, v2(diff))


def test_empty_deletes_object_is_valid() -> None:
    check_diff({"a": 1}, {"d": {}}, {"a": 1})


@pytest.mark.parametrize(
    ("array_diff", "code"),
    [  # UnexpectedFieldsInArrayDiff
        ({"a": True, "3u": 1}, 4770512),
        ({"a": True, "u": True}, 4770521),
        ({"a": True, "5": {}}, 4770521),
        ({"a": False, "u3": 4}, 4770520),
        ({"a": 1, "u3": 4}, 4770519),
        ({"a": True, "s3": 4}, 4770501),
        ({"a": True, "d3": 4}, 4770502),
        # not in the server's tests: l must be an int32, and entries must go up (the server
        # would loop or fail an invariant), and stay below l
        ({"a": True, "l": Int64(1)}, 4770507),
        ({"a": True, "u2": 1, "u1": 1}, None),
        ({"a": True, "u1": 1, "u1x": 1}, 4770512),
        ({"a": True, "l": 1, "u3": 1}, None),
        ({"a": True, "l": 0, "u0": 1}, None),
        ({"a": True, "l": -1}, None),
        ({"a": True, "u99999999999": 1}, None),
    ],
)
def test_unexpected_fields_in_array_diff(array_diff: dict[str, Any], code: int | None) -> None:
    raises_code(code, {"arr": []}, v2({"sarr": array_diff}))


# --- Placement, growth, types, inputs ----------------------------------------------------------


def test_missing_updates_then_inserts_are_appended_in_diff_order() -> None:
    check_diff(
        {"m": 0, "k": 1},
        {"d": {"k": False}, "u": {"z": 1, "m": 5}, "i": {"b": 2, "a": 3}},
        {"m": 5, "z": 1, "b": 2, "a": 3},
    )


def test_array_growth_truncation_and_element_subdiffs() -> None:
    check_diff({"arr": [1]}, {"sarr": {"a": True, "l": 3}}, {"arr": [1, None, None]})
    check_diff({"arr": [1, 2]}, {"sarr": {"a": True, "l": 0}}, {"arr": []})
    check_diff(
        {"arr": [{"x": 1}, [1, 2, 3], 7, 8]},
        {"sarr": {"a": True, "l": 3, "s0": {"i": {"y": 2}}, "s1": {"a": True, "l": 2, "u01": 9}}},
        {"arr": [{"x": 1, "y": 2}, [1, 9], 7]},
    )
    # a sub-diff past the end of the array writes null
    check_diff({"arr": []}, {"sarr": {"a": True, "s1": {"u": {"x": 1}}}}, {"arr": [None, None]})


def test_types_are_preserved() -> None:
    pre = {"i32": 1, "i64": Int64(1), "dbl": 1.0, "obj": {"i32": 2, "dbl": 2.0}}
    post = apply_update(pre, v2({"u": {"i32": Int64(5)}, "sobj": {"u": {"dbl": 3}}}))
    assert_same(post, {"i32": Int64(5), "i64": Int64(1), "dbl": 1.0, "obj": {"i32": 2, "dbl": 3}})
    assert type(post["i64"]) is Int64
    assert type(post["dbl"]) is float
    assert type(post["obj"]["dbl"]) is int


def test_raw_bson_input() -> None:
    pre = RawBSONDocument(
        bson.encode({"_id": 1, "keep": {"x": [{"y": 1}]}, "edit": {"a": Int64(1), "b": 2.5}})
    )
    raw_bytes = pre.raw
    update = RawBSONDocument(bson.encode(v2({"sedit": {"d": {"a": False}, "i": {"c": {"z": 1}}}})))
    post = apply_update(pre, update)
    assert type(post) is dict
    assert type(post["edit"]) is dict
    assert isinstance(post["keep"], RawBSONDocument)  # untouched values pass through
    assert bson.encode(post) == bson.encode(
        {"_id": 1, "keep": {"x": [{"y": 1}]}, "edit": {"b": 2.5, "c": {"z": 1}}}
    )
    assert pre.raw == raw_bytes


def test_replacement() -> None:
    pre = {"_id": 1, "a": 1}
    assert_same(
        apply_update(pre, {"_id": 1, "b": Int64(2), "a": 1.0}), {"_id": 1, "b": Int64(2), "a": 1.0}
    )
    # anything with _id is a replacement, even with $v present (update_oplog_entry_serialization)
    assert_same(apply_update(pre, {"$v": 2, "_id": 1, "diff": 3}), {"$v": 2, "_id": 1, "diff": 3})


@pytest.mark.parametrize(
    "update",
    [
        {"$v": 2},
        {"$v": 2, "diff": 1},
        {"$v": 3, "diff": {}},
        {"$v": "2"},
        {"x": 1},
        {"$inc": {"a": 1}},
    ],
)
def test_malformed_updates(update: dict[str, Any]) -> None:
    raises_code(None, {"a": 1}, update)


# --- $v:1 modifier updates (pre-5.0 oplogs) -----------------------------------------------------


@pytest.mark.parametrize(
    ("pre", "update", "expected"),
    [
        # existing fields change in place; new ones are appended in sorted path order
        (
            {"_id": 1, "m": 1},
            {"$set": {"z": 1, "m": Int64(2), "a": 3}},
            {"_id": 1, "m": Int64(2), "a": 3, "z": 1},
        ),
        # plain string order at each level: "10" before "9"
        ({"o": {}}, {"$v": 1, "$set": {"o.9": 1, "o.10": 2}}, {"o": {"10": 2, "9": 1}}),
        # intermediate documents are created, numeric parts included
        (
            {"_id": 1},
            {"$set": {"a.b.c": 1, "a.0.x": 2}},
            {"_id": 1, "a": {"0": {"x": 2}, "b": {"c": 1}}},
        ),
        # a numeric part indexes an array, padding with nulls
        ({"a": [1]}, {"$set": {"a.3.x": 5, "a.0": 0}}, {"a": [0, None, None, {"x": 5}]}),
        ({"a": [{"x": 1}, 2]}, {"$set": {"a.0.y": 2, "a.01.z": 1}}, {"a": [{"x": 1, "y": 2}, 2]}),
        # blocked by a scalar, or a name inside an array: skipped, the rest still applies
        (
            {"a": 1, "b": [1], "c": 0},
            {"$set": {"a.x": 1, "b.x": 1, "c": 2}},
            {"a": 1, "b": [1], "c": 2},
        ),
        # $unset removes fields, nulls array elements, ignores missing paths
        (
            {"a": {"b": 1, "c": 2}, "arr": [1, 2], "k": 0},
            {"$unset": {"a.b": True, "arr.0": 1, "nope.x": 1, "arr.9": 1}, "$set": {"k": 1}},
            {"a": {"c": 2}, "arr": [None, 2], "k": 1},
        ),
    ],
)
def test_v1_modifiers(
    pre: dict[str, Any], update: dict[str, Any], expected: dict[str, Any]
) -> None:
    snapshot = copy.deepcopy(pre)
    assert_same(apply_update(pre, update), expected)
    assert pre == snapshot


@pytest.mark.parametrize(
    ("update", "code"),
    [
        ({"$set": {"a": 1, "a.b": 1}}, 40),  # ConflictingUpdateOperators
        ({"$set": {"a": 1}, "$unset": {"a": 1}}, 40),
        ({"$set": {"a..b": 1}}, 56),  # EmptyFieldName
        ({"$set": {"": 1}}, 56),
        ({"$set": 1}, None),
    ],
)
def test_v1_errors(update: dict[str, Any], code: int | None) -> None:
    raises_code(code, {}, update)


def test_v1_raw_bson_input() -> None:
    pre = RawBSONDocument(bson.encode({"a": {"b": [1, {"c": 1}]}, "z": 0}))
    post = apply_update(pre, RawBSONDocument(bson.encode({"$set": {"a.b.1.d": Int64(2)}})))
    assert bson.encode(post) == bson.encode({"a": {"b": [1, {"c": 1, "d": Int64(2)}]}, "z": 0})


# --- Property: a diff written by the calculator's rules takes A to B -----------------------------

NAMES = st.sampled_from(["a", "b", "c", "d", "0", "s"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1).map(Int64),
    st.floats(allow_nan=False),
    st.text(max_size=3),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NAMES, inner, max_size=4),
    max_leaves=10,
)
DOCUMENTS = st.dictionaries(NAMES, VALUES, max_size=5)


def binary_equal(x: Any, y: Any) -> bool:
    return bson.encode({"": x}) == bson.encode({"": y})


def kind(value: Any) -> str:
    return "object" if isinstance(value, dict) else "array" if isinstance(value, list) else "other"


def doc_diff(pre: dict[str, Any], post: dict[str, Any], inline: Any) -> dict[str, Any]:
    """computeDocDiff: walk both in order; a name mismatch deletes (or later re-inserts)."""
    updates: dict[str, Any] = {}
    subdiffs: dict[str, Any] = {}
    deletes: list[str] = []
    pre_items, post_items = list(pre.items()), list(post.items())
    i = j = 0
    while i < len(pre_items) and j < len(post_items):
        (name, old), (new_name, new) = pre_items[i], post_items[j]
        if name != new_name:
            deletes.append(name)
            i += 1
            continue
        if not binary_equal(old, new):
            if kind(old) == kind(new) != "other" and inline(name):
                subdiffs["s" + name] = sub_diff(old, new, inline)
            else:
                updates[name] = new  # a different type, a scalar, or a sub-diff judged too big
        i, j = i + 1, j + 1
    deletes += [name for name, _ in pre_items[i:]]
    inserts = dict(post_items[j:])
    deletes = [name for name in deletes if name not in inserts]
    sections = {"d": dict.fromkeys(deletes, False), "u": updates, "i": inserts}
    return {k: v for k, v in sections.items() if v} | subdiffs


def sub_diff(old: Any, new: Any, inline: Any) -> dict[str, Any]:
    if isinstance(old, dict):
        return doc_diff(old, new, inline)
    out: dict[str, Any] = {"a": True}  # computeArrayDiff
    if len(old) > len(new):
        out["l"] = len(new)
    for index, value in enumerate(new):
        if index >= len(old):
            out[f"u{index}"] = value
        elif not binary_equal(old[index], value):
            if kind(old[index]) == kind(value) != "other" and inline(str(index)):
                out[f"s{index}"] = sub_diff(old[index], value, inline)
            else:
                out[f"u{index}"] = value
    return out


def mutate(value: Any, data: Any, action: str | None = None) -> Any:
    """A value near ``value`` (so diffs have sub-diffs), or a fresh one."""
    action = action or data.draw(st.sampled_from(["keep", "change", "fresh"]))
    if action == "fresh" or (action == "change" and kind(value) == "other"):
        return data.draw(VALUES)
    if action == "keep":
        return value
    if isinstance(value, dict):
        out = {k: mutate(v, data) for k, v in value.items() if data.draw(st.integers(0, 4))}
        return out | {k: v for k, v in data.draw(DOCUMENTS).items() if k not in out}
    cut = data.draw(st.integers(0, len(value)))
    return [mutate(v, data) for v in value[:cut]] + data.draw(st.lists(VALUES, max_size=2))


@given(DOCUMENTS, st.data())
def test_calculator_diff_takes_a_to_b(a: dict[str, Any], data: Any) -> None:
    b = data.draw(DOCUMENTS) if data.draw(st.booleans()) else mutate(a, data, "change")

    def inline(_name: str) -> bool:  # the calculator inlines a sub-diff only when it is smaller
        return bool(data.draw(st.booleans()))

    diff = doc_diff(a, b, inline)
    if not diff:
        assert bson.encode(a) == bson.encode(b)
        return
    expected = bson.encode(b)
    assert bson.encode(apply_update(a, v2(diff))) == expected
    raw = RawBSONDocument(bson.encode(a))
    assert bson.encode(apply_update(raw, RawBSONDocument(bson.encode(v2(diff))))) == expected
