"""The compiled diff applier (``transform/update/apply_update_bson.py``, ``_apply_diff.c``)
against the reference, ``apply_update``: on random documents and random ``$v: 2`` diffs
aimed at their fields (well formed, or altered into every malformation the reference
refuses), the compiled bytes are those of encoding the reference's result, and where the
reference raises the compiled applier leaves the update to it (None).
"""

from __future__ import annotations

from typing import Any

import bson
import pytest
from bson.code import Code
from bson.int64 import Int64
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.errors import TransformError
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.transform.update.apply_update import apply_update
from shardstream.transform.update.apply_update_bson import apply_update_bson, available
from tests.strategies import COMMON_JSON_VALUES, DRIVER_SCALARS, INT32

pytestmark = pytest.mark.skipif(not available(), reason="the compiled applier was not built")

_NAMES = st.sampled_from(["a", "b", "c", "arr", "sub", "x", "", "é"])
_VALUES = st.recursive(
    DRIVER_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(_NAMES, children, max_size=4)
    ),
    max_leaves=10,
)


def _reference(document: bytes, update: bytes) -> bytes | None:
    """Encoding apply_update's result, or None where it raises."""
    try:
        applied = apply_update(
            bson.decode(document, OPLOG_CODEC_OPTIONS), bson.decode(update, OPLOG_CODEC_OPTIONS)
        )
    except TransformError:
        return None
    return bson.encode(applied)


@st.composite
def _document_diff(draw: st.DrawFn, document: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """A well-formed document diff aimed at ``document``'s fields (and some it lacks)."""
    names = [*(name for name in document if depth or name != "_id"), "new", "a", "sub"]
    chosen = draw(st.lists(st.sampled_from(names), unique=True, min_size=1, max_size=5))
    diff: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {"d": {}, "u": {}, "i": {}}
    subdiffs: dict[str, Any] = {}
    for name in chosen:
        value = document.get(name)
        kind = draw(st.sampled_from(["d", "u", "i", "s"]))
        if kind == "s" and depth < 3:
            if isinstance(value, list) or (value is None and draw(st.booleans())):
                subdiffs["s" + name] = draw(_array_diff(value or [], depth + 1))
            else:
                inner = value if isinstance(value, dict) else {}
                subdiffs["s" + name] = draw(_document_diff(inner, depth + 1))
        elif kind == "d":
            sections["d"][name] = False
        else:
            sections["u" if kind != "i" else "i"][name] = draw(_VALUES)
    for letter in "dui":
        if sections[letter]:
            diff[letter] = sections[letter]
    diff.update(subdiffs)
    if not diff:
        diff["u"] = {"new": 1}
    return diff


@st.composite
def _array_diff(draw: st.DrawFn, array: list[Any], depth: int) -> dict[str, Any]:
    """A well-formed array diff aimed at ``array``'s elements (and past its end)."""
    diff: dict[str, Any] = {"a": True}
    size = draw(st.none() | st.integers(0, len(array) + 3))
    if size is not None:
        diff["l"] = size
    limit = size if size is not None else len(array) + 4
    for index in draw(st.lists(st.integers(0, max(limit - 1, 0)), unique=True, max_size=4)):
        if index >= limit:
            continue
        element = array[index] if index < len(array) else None
        if isinstance(element, dict) and depth < 3 and draw(st.booleans()):
            diff[f"s{index}"] = draw(_document_diff(element, depth + 1))
        elif isinstance(element, list) and depth < 3 and draw(st.booleans()):
            diff[f"s{index}"] = draw(_array_diff(element, depth + 1))
        else:
            diff[f"u{index}"] = draw(_VALUES)
    items = sorted(
        ((name, value) for name, value in diff.items() if name not in ("a", "l")),
        key=lambda item: int(item[0][1:]),
    )
    return {**{key: diff[key] for key in ("a", "l") if key in diff}, **dict(items)}


_ALTERATIONS = [
    lambda diff: {},  # an empty diff
    lambda diff: {"b": {"a": {"o": 0, "d": b"x"}}, **diff},  # a binary section
    lambda diff: {**diff, "d": {"x": False}},  # a section after the sub-diffs, or a repeat
    lambda diff: {"u": {"a": 1}, "i": {"a": 2}},  # a field in two sections
    lambda diff: {"dx": {"a": False}},  # a section named loosely
    lambda diff: {"u": [1]},  # a section that is no object
    lambda diff: {"sarr": {"a": False, "u0": 1}},  # an array header false
    lambda diff: {"sarr": {"a": True, "l": Int64(1)}},  # a length of another type
    lambda diff: {"sarr": {"a": True, "u1": 1, "u0": 2}},  # indexes out of order
    lambda diff: {"sarr": {"a": True, "l": 1, "u1": 1}},  # an index at the length
    lambda diff: {"sarr": {"a": True, "u01": 1}},  # a non-canonical index
    lambda diff: {"sarr": {"a": True, "x0": 1}},  # an entry of another letter
    lambda diff: {"u": {"_id": 5}},  # the top-level _id
    lambda diff: {"smissing": {"a": True, "u0": 1, "s1": {}}},  # an empty sub-diff, unread
]


@st.composite
def _documents(draw: st.DrawFn, values: st.SearchStrategy[Any] = _VALUES) -> dict[str, Any]:
    fields = draw(st.dictionaries(_NAMES, values, max_size=6))
    fields.pop("_id", None)
    return {"_id": draw(INT32), **fields}


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_the_compiled_bytes_are_the_references(data: st.DataObject) -> None:
    document = data.draw(_documents())
    diff = data.draw(_document_diff(document))
    if data.draw(st.booleans()):
        diff = data.draw(st.sampled_from(_ALTERATIONS))(diff)
    raw, update = bson.encode(document), bson.encode({"$v": 2, "diff": diff})
    compiled = apply_update_bson(raw, update)
    reference = _reference(raw, update)
    if compiled is not None:
        assert compiled == reference, (document, diff)
    if reference is None:
        assert compiled is None, (document, diff)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_well_formed_diffs_of_common_values_are_applied_in_c(data: st.DataObject) -> None:
    document = data.draw(_documents(COMMON_JSON_VALUES))
    diff = data.draw(_document_diff(document))
    raw, update = bson.encode(document), bson.encode({"$v": 2, "diff": diff})
    compiled = apply_update_bson(raw, update)
    assert compiled is not None, (document, diff)
    assert compiled == _reference(raw, update)


@pytest.mark.parametrize(
    "update",
    [
        {"_id": 1, "a": 2},  # a replacement
        {"$set": {"a": 2}},  # $v: 1
        {"$v": 1, "$set": {"a": 2}},
        {"$v": 2.0, "diff": {"u": {"a": 2}}},  # a $v the reference reads loosely
        {"$v": 2, "diff": [1]},
        {"$v": 2, "diff": {"a": True, "u0": 1}},  # an array diff at the top
    ],
)
def test_other_updates_are_left_to_the_reference(update: dict[str, Any]) -> None:
    assert apply_update_bson(bson.encode({"_id": 1, "a": 1}), bson.encode(update)) is None


def _id_second() -> bytes:
    """The BSON of {a: 1, _id: 1}, in that order (bson.encode writes _id first)."""
    elements = b"\x10a\x00\x01\x00\x00\x00\x10_id\x00\x01\x00\x00\x00"
    return (len(elements) + 5).to_bytes(4, "little") + elements + b"\x00"


@pytest.mark.parametrize(
    "document",
    [
        b"",
        b"\x05\x00\x00\x00",
        bson.encode({"_id": 1})[:-1],
        _id_second(),  # an _id bson.encode would move first
        bson.encode({"_id": 1, "js": Code("x", {"a": 1})}),  # code with scope: not vouched for
    ],
)
def test_documents_it_cannot_vouch_for_are_left_to_the_reference(document: bytes) -> None:
    update = bson.encode({"$v": 2, "diff": {"u": {"a": 2}}})
    assert apply_update_bson(document, update) is None
