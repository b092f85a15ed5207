"""Whole-column typing (typed.column_arrays) against the value-by-value rules it speeds up."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from bson.binary import Binary
from bson.decimal128 import Decimal128
from hypothesis import given
from hypothesis import strategies as st

from shardstream.spark.delta.typed.column_arrays import all_fit, arrow_type, column_array, gathered
from shardstream.spark.delta.typed.column_types import (
    CONFLICT,
    JSON_COLUMN,
    fits,
    merged,
    value_type,
)
from shardstream.spark.delta.typed.column_values import column_value
from shardstream.spark.delta.typed.rows import ID, ColumnSet
from tests.spark.test_typed_rows import DOCUMENTS, VALUES

COLUMN_VALUES = st.one_of(
    VALUES,
    st.builds(Binary, st.binary(max_size=4), st.sampled_from([0, 4])),
    st.just(Decimal128("1.5")),
    st.integers(2**31, 2**40),
)


def _column_type(values: list[Any]) -> Any:
    """The type a fold of ``values`` would give a column (skipping the conflicts)."""
    kind: Any = None
    for value in values:
        found = merged(kind, value_type(value))
        if found is not CONFLICT:
            kind = found
    return kind or pa.string()


@given(st.lists(COLUMN_VALUES, max_size=8), st.lists(COLUMN_VALUES, max_size=3), st.booleans())
def test_a_column_at_a_time_gives_what_each_value_gives(
    values: list[Any], typing: list[Any], json: bool
) -> None:
    """For any values and a column type from some of them (or a JSON column): the array
    holds each fitting value's column value, the others are null and listed as misfits."""
    kind = JSON_COLUMN if json else _column_type(typing or values)
    array, misfits = column_array(values, kind)
    expected_misfits = [index for index, value in enumerate(values) if not fits(value, kind)]
    assert misfits == expected_misfits
    assert array.type == arrow_type(kind)
    assert array.to_pylist() == [
        None if index in expected_misfits else column_value(value, kind)
        for index, value in enumerate(values)
    ]
    assert all_fit(values, kind) == (not expected_misfits)


@given(DOCUMENTS, st.integers(1, 4))
def test_folding_a_batch_at_once_equals_folding_it_document_by_document(
    documents: list[dict[str, Any]], limit: int
) -> None:
    """The same columns, types and column order as a fold that sees one document at a time
    (the stream order decides which fields become columns first)."""
    reserved = ("_rescued", "_doc")
    at_once = ColumnSet.of_schema(None, reserved, limit)
    at_once.fold(documents)
    one_by_one = ColumnSet.of_schema(None, reserved, limit)
    for document in documents:
        one_by_one.fold([document])
    assert at_once.signature() == one_by_one.signature()
    assert list(at_once.fields) == list(one_by_one.fields)


def test_a_struct_column_of_whole_documents_is_built_at_once_with_its_null_rows() -> None:
    """Documents, a null and an empty document: one struct array, nothing rescued."""
    kind = pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))])
    values: list[dict[str, Any] | None] = [{"a": 1, "b": ["x"]}, None, {}, {"b": []}]
    array, misfits = column_array(values, kind)
    assert misfits == []
    assert array.to_pylist() == [
        {"a": 1, "b": ["x"]},
        None,
        {"a": None, "b": None},
        {"a": None, "b": []},
    ]
    assert array.null_count == 1
    # A field the struct lacks, with a typed value: that document does not fit.
    _, misfits = column_array([{"a": 1}, {"c": 2}], kind)
    assert misfits == [1]
    assert column_array([{ID: 1}], pa.struct([(ID, pa.int32())]))[1] == []


@given(st.lists(st.one_of(st.none(), st.dictionaries(st.sampled_from("abc"), st.integers()))))
def test_gathered_gives_each_names_values_with_none_where_absent(
    documents: list[dict[str, int] | None],
) -> None:
    for names in (["a"], ["a", "b", "c"]):
        columns = gathered(documents, names)
        assert [list(column) for column in columns] == [
            [None if document is None else document.get(name) for document in documents]
            for name in names
        ]
