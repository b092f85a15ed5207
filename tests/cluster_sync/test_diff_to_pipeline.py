"""The sync's update pipelines give exactly what mongod's diff applier gives.

``apply_update`` (the change-stream side's emulation of ``doc_diff::applyDiff``) is the
reference; the pipeline runs on the wire emulator's evaluator, which a real target
replaces. Diffs are drawn against the document they apply to, and against others: a
sub-diff on a missing field or a value of the wrong type, writes past an array's end.
"""

from __future__ import annotations

from typing import Any

import bson
import pytest
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.cluster_sync.diff_to_pipeline import UnsupportedDiff, diff_to_pipeline
from shardstream.emulator.update_pipeline import run_update_pipeline
from shardstream.transform.update.apply_update import apply_update
from tests.strategies import DRIVER_SCALARS

FIELD_NAMES = st.sampled_from(["a", "b", "c", "tags", "meta", "$odd", "dot.ted", "0", "1", ""])
LEAVES: st.SearchStrategy[Any] = st.one_of(
    DRIVER_SCALARS, st.sampled_from(["$notAPath", "$$ROOT", "$$REMOVE"])
)
VALUES = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(FIELD_NAMES, children, max_size=4),
        st.dictionaries(st.sampled_from(["$literal", "$set", "$x"]), children, max_size=2),
    ),
    max_leaves=8,
)
DOCUMENTS = st.dictionaries(FIELD_NAMES, VALUES, max_size=6).map(lambda d: {"_id": 1, **d})


@st.composite
def document_diffs(draw: st.DrawFn, document: Any, depth: int = 0) -> dict[str, Any]:
    """A valid diff level, mostly about ``document`` but not always of its shape."""
    present = list(document) if isinstance(document, dict) else []
    names = draw(st.lists(st.one_of(FIELD_NAMES, st.sampled_from(present or ["a"])), unique=True))
    names = [name for name in names if name != "_id"]
    diff: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {"d": {}, "u": {}, "i": {}}
    subdiffs: dict[str, Any] = {}
    for name in names:
        choice = draw(st.sampled_from("duis" if depth < 3 else "dui"))
        if choice == "s":
            child = document.get(name) if isinstance(document, dict) else None
            subdiffs["s" + name] = draw(subdiffs_of(child, depth + 1))
        else:
            sections[choice][name] = False if choice == "d" else draw(VALUES)
    for letter in "dui":
        if sections[letter]:
            diff[letter] = sections[letter]
    diff.update(subdiffs)
    return diff or {"i": {"new": draw(VALUES)}}


@st.composite
def array_diffs(draw: st.DrawFn, array: Any, depth: int) -> dict[str, Any]:
    """A valid array diff: optional ``l``, then increasing ``u<i>`` / ``s<i>`` below it."""
    length = len(array) if isinstance(array, list) else 0
    diff: dict[str, Any] = {"a": True}
    size = draw(st.one_of(st.none(), st.integers(0, length + 3)))
    if size is not None:
        diff["l"] = size
    limit = size if size is not None else length + 4
    indexes = sorted(draw(st.sets(st.integers(0, max(limit - 1, 0)), max_size=3)))
    for index in indexes if limit else []:
        element = array[index] if isinstance(array, list) and index < length else None
        if depth < 3 and draw(st.booleans()):
            diff[f"s{index}"] = draw(subdiffs_of(element, depth + 1))
        else:
            diff[f"u{index}"] = draw(VALUES)
    return diff


def subdiffs_of(value: Any, depth: int) -> st.SearchStrategy[dict[str, Any]]:
    """A sub-diff for ``value``: usually of its kind, sometimes of the other one."""
    kinds = [array_diffs(value, depth), document_diffs(value, depth)]
    return kinds[0] if isinstance(value, list) else st.one_of(*reversed(kinds))


@st.composite
def documents_with_diffs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    document = draw(DOCUMENTS)
    return document, draw(document_diffs(document))


@settings(max_examples=400, deadline=None)
@given(documents_with_diffs())
def test_the_pipeline_gives_the_diff_appliers_document(case: tuple[Any, Any]) -> None:
    document, diff = case
    update = {"$v": 2, "diff": diff}
    expected = bson.encode(apply_update(document, update))
    got = bson.encode(run_update_pipeline(document, diff_to_pipeline(update)))
    assert got == expected


def test_the_pipeline_survives_a_bson_round_trip() -> None:
    # What pymongo sends is the BSON of the stages: values that look like expressions
    # ("$x", {"$set": ...}) must stay literals after encoding and decoding.
    document = {"_id": 1, "a": {"b": [1, {"c": 2}]}}
    diff = {"sa": {"sb": {"a": True, "s1": {"u": {"c": {"$set": "$x"}}}, "u3": "$$ROOT"}}}
    update = {"$v": 2, "diff": diff}
    stages = bson.decode(bson.encode({"s": diff_to_pipeline(update)}))["s"]
    assert run_update_pipeline(document, stages) == apply_update(document, update)


@pytest.mark.parametrize(
    ("update", "expected"),
    [
        ({"$v": 1, "diff": {"u": {"a": 1}}}, "$v: 2"),
        ({"$set": {"a": 1}}, "$v: 2"),
        ({"$v": 2, "diff": {"b": {"a": {"o": 0, "d": b"x"}}}}, "'b'"),
    ],
)
def test_updates_it_cannot_express_are_refused_by_name(update: Any, expected: str) -> None:
    with pytest.raises(UnsupportedDiff, match=expected.replace("$", r"\$")):
        diff_to_pipeline(update)


@pytest.mark.parametrize(
    ("value", "name", "truthy"),
    [
        (7, "int", True),
        (2**40, "long", True),
        (Int64(0), "long", False),
        (Decimal128("0"), "decimal", False),
        (Decimal128("0.5"), "decimal", True),
        (0.0, "double", False),
    ],
)
def test_the_evaluator_types_numbers_as_bson_encodes_them(
    value: Any, name: str, truthy: bool
) -> None:
    document = {"_id": 1, "v": value}
    typed = run_update_pipeline(document, [{"$set": {"t": {"$type": "$v"}}}])
    assert typed["t"] == name
    chosen = run_update_pipeline(document, [{"$set": {"c": {"$cond": ["$v", "yes", "no"]}}}])
    assert chosen["c"] == ("yes" if truthy else "no")
