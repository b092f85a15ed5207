"""The compiled typed columns (``typed/bson_columns.py``, ``_bson_columns.c``) against the
Python path they stand in for: a column built from the documents' BSON equals the one
``ColumnSet.project`` makes from their values, and a fold or projection given the built
columns ends as one without them, whatever the documents hold."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import bson
import pyarrow as pa
import pytest
from bson.binary import Binary
from bson.decimal128 import Decimal128
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.timestamp import Timestamp
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.bench.corpus import generate_oplog
from shardstream.resume_token.token_json import loads
from shardstream.spark.delta.typed.batch_typing import BatchTyping
from shardstream.spark.delta.typed.bson_columns import available, built_columns
from shardstream.spark.delta.typed.rows import ID, RESCUED, ColumnSet
from shardstream.transform.raw.extended_json import bson_to_json

RESERVED = ("_doc", "_token")
# Values of the types the compiled reader builds, and of some it leaves to Python.
BUILT_LEAVES = st.one_of(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1).map(Int64),
    st.floats(allow_nan=False),
    st.booleans(),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.just(ObjectId("0123456789abcdef01234567")),
    st.integers(-62135596800000, 253402300799999).map(bson.DatetimeMS),
)
OTHER_LEAVES = st.one_of(
    st.none(),
    st.just(Decimal128("1.5")),
    st.builds(Binary, st.binary(min_size=16, max_size=16), st.just(4)),
    st.builds(Timestamp, st.integers(0, 9), st.integers(0, 9)),
    st.integers(-(2**62), -(2**61)).map(bson.DatetimeMS),  # out of datetime's years
)
LEAVES = st.one_of(BUILT_LEAVES, BUILT_LEAVES, BUILT_LEAVES, OTHER_LEAVES)
VALUES = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(["x", "y", "$r", "z"]), children, max_size=3),
    ),
    max_leaves=6,
)
NAMES = st.sampled_from(["a", "b", "c", "d", "_doc", "e"])
DOCUMENTS = st.lists(
    st.builds(
        lambda key, fields: {"_id": key, **fields},
        st.one_of(st.integers(0, 5), st.text(max_size=2), st.just(ObjectId())),
        st.dictionaries(NAMES, VALUES, max_size=4),
    ),
    max_size=8,
)
# Batches whose fields keep one type more often than not, so most columns get built.
STEADY = st.lists(
    st.fixed_dictionaries(
        {
            "_id": st.integers(0, 9),
            "n": st.one_of(st.integers(0, 9), st.integers(0, 9).map(Int64), st.none()),
            "s": st.one_of(st.text(max_size=3), st.just(ObjectId("0123456789abcdef01234567"))),
            "t": st.lists(st.one_of(st.text(max_size=2), st.none()), max_size=3),
            "d": st.one_of(
                st.none(),
                st.fixed_dictionaries({"x": st.floats(allow_nan=False)}, optional={"y": LEAVES}),
            ),
        },
        optional={"extra": VALUES},
    ),
    min_size=1,
    max_size=8,
)

pytestmark = pytest.mark.skipif(not available(), reason="the compiled module is not built")


def decoded(documents: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The documents as a batch holds them: their canonical Extended JSON, read back."""
    return [loads(bson_to_json(bson.encode(document))) for document in documents]


def assert_same_arrays(got: Mapping[str, pa.Array], expected: Mapping[str, pa.Array]) -> None:
    assert list(got) == list(expected)
    for name, array in got.items():
        array.validate(full=True)
        assert array.type == expected[name].type, name
        assert array.to_pylist() == expected[name].to_pylist(), name


def check_batch(first: list[dict[str, Any]], second: list[dict[str, Any] | None]) -> None:
    """Columns folded from ``first``, then from ``second`` both ways; ``second`` projected
    under them both ways."""
    columns = ColumnSet(None, {}, frozenset(RESERVED), 4)
    columns.fold(first)
    present = [d for d in second if d is not None]
    folded, plain = columns.copy(), columns.copy()
    folded.fold(present, columns.built([bson.encode(d) for d in present]))
    plain.fold(present)
    assert folded.signature() == plain.signature()
    built = plain.built([None if d is None else bson.encode(d) for d in second])
    if built is not None:  # None: a fresh table, whose fold goes document by document
        assert_same_arrays(plain.project(second, built), plain.project(second))


@settings(max_examples=300)
@given(DOCUMENTS, DOCUMENTS, st.lists(st.booleans(), max_size=8))
def test_built_columns_equal_the_python_paths(
    first: list[dict[str, Any]], second: list[dict[str, Any]], nulls: list[bool]
) -> None:
    rows: list[dict[str, Any] | None] = list(decoded(second))
    for index, null in enumerate(nulls[: len(rows)]):
        if null:
            rows[index] = None
    check_batch(decoded(first), rows)


@settings(max_examples=300)
@given(STEADY, STEADY)
def test_steady_batches_build_their_columns_as_python_does(
    first: list[dict[str, Any]], second: list[dict[str, Any]]
) -> None:
    check_batch(decoded(first), list(decoded(second)))


def test_a_corpus_batch_builds_every_column_and_lists_the_rows_with_new_fields() -> None:
    documents = decoded([e["o"] for e in generate_oplog(400) if e["op"] == "i"])
    columns = ColumnSet(None, {}, frozenset(RESERVED), 500)
    columns.fold(documents)
    batch = [*documents[:5], {**documents[5], "late": 1, "empty": None}, None]
    built = columns.built([None if d is None else bson.encode(d) for d in batch])
    assert built is not None
    assert sorted(built.arrays) == sorted([ID, *columns.fields])
    assert list(built.unknown) == [5]  # the null "empty" field alone would not list a row
    projected = columns.project(batch, built)
    assert projected[RESCUED].to_pylist() == [None] * 5 + ['{"late": 1}', None]
    assert_same_arrays(projected, columns.project(batch))


def test_values_the_reader_does_not_build_leave_their_column_to_python() -> None:
    kinds = (
        (ID, pa.int32()),
        ("price", pa.string()),  # a Decimal128 is text, written by Python
        ("when", pa.timestamp("us", tz="UTC")),  # a date out of datetime's years
        ("ok", pa.int64()),
    )
    documents = [
        {"_id": 1, "price": Decimal128("1.5"), "when": bson.DatetimeMS(2**62), "ok": 1},
        {"_id": 2, "price": "2", "when": datetime.datetime(2026, 1, 1), "ok": Int64(2)},
    ]
    built = built_columns([bson.encode(d) for d in documents], kinds)
    assert built is not None
    assert built.arrays[ID].to_pylist() == [1, 2]
    assert built.arrays["ok"].to_pylist() == [1, 2]
    assert set(built.arrays) == {ID, "ok"}


def test_bytes_that_are_no_bson_document_read_nothing() -> None:
    kinds = ((ID, pa.int32()),)
    raw = bson.encode({"_id": 1})
    assert built_columns([raw[:-1] + b"\x01"], kinds) is None
    assert built_columns([raw[:4] + b"\x10_id\x00\x01"], kinds) is None
    assert built_columns([b"\x05\x00\x00\x00\x00", raw], kinds) is not None


@pytest.mark.parametrize("known", [0, 10])
def test_a_batch_typing_of_texts_types_as_the_python_path_does(known: int) -> None:
    """Texts in, each encoded once and decoded only where Python must look: the same
    columns, rows and ``_doc`` as the documents folded and projected in Python."""
    raws = [bson.encode(e["o"]) for e in generate_oplog(300) if e["op"] == "i"]
    raws.append(bson.encode({"_id": 1, "late": Decimal128("1.5")}))  # a new field, for Python
    texts = [bson_to_json(raw) for raw in raws]
    documents = [loads(text) for text in texts]
    before = ColumnSet(None, {}, frozenset(RESERVED), 500)
    before.fold(documents[:known])
    typing = BatchTyping()
    columns = typing.fold(before, texts)
    expected = before.copy()
    expected.fold(documents)
    assert columns.signature() == expected.signature()
    rows = [*texts, None]
    assert_same_arrays(typing.project(columns, rows), expected.project([*documents, None]))
    assert typing.encoded(rows).to_pylist() == [*map(bson.encode, documents), None]
