"""A collection's typed columns: folded from documents, rows projected under them."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from bson import json_util
from bson.int64 import Int64
from bson.objectid import ObjectId
from bson.timestamp import Timestamp
from hypothesis import given
from hypothesis import strategies as st

from shardstream.spark.delta.typed.column_types import JSON_COLUMN, KIND_KEY, TIMESTAMP
from shardstream.spark.delta.typed.column_values import column_value, relaxed_json
from shardstream.spark.delta.typed.rows import (
    ID,
    RESCUED,
    ColumnSet,
    arrow_field,
    column_type,
)

RESERVED = ("_rescued", "_doc", "_token")
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.integers(-(2**63), 2**63 - 1).map(Int64),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.datetimes(datetime.datetime(1970, 1, 1), datetime.datetime(2100, 1, 1)),
    st.builds(Timestamp, st.integers(0, 9), st.integers(0, 9)),
    st.just(ObjectId("0123456789abcdef01234567")),
)
VALUES = st.recursive(
    LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(["x", "y", "z.w"]), children, max_size=3),
    ),
    max_leaves=6,
)
# Few names, so columns collide, widen and conflict: reserved, case twins, unsafe.
FIELD_NAMES = st.sampled_from(["a", "b", "A", "c d", "_doc", "_ID", "n"])
DOCUMENTS = st.lists(
    st.builds(
        lambda id_value, fields: {ID: id_value, **fields},
        st.one_of(st.integers(0, 5), st.text(max_size=2), st.just({})),
        st.dictionaries(FIELD_NAMES, VALUES, max_size=5),
    ),
    min_size=1,
    max_size=6,
)


def _folded(documents: Sequence[Mapping[str, Any]], max_columns: int = 500) -> ColumnSet:
    columns = ColumnSet.of_schema(None, RESERVED, max_columns)
    columns.fold(documents)
    return columns


def _rows(
    columns: ColumnSet, documents: Sequence[Mapping[str, Any] | None]
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pa.table(columns.project(documents)).to_pylist()
    return rows


def _rescued(row: Mapping[str, Any]) -> dict[str, Any]:
    return json_util.loads(row[RESCUED]) if row[RESCUED] is not None else {}


def test_columns_come_in_first_appearance_order_with_their_first_types() -> None:
    """A field's first typed value makes its column; columns keep the order they came in."""
    columns = _folded([{ID: 1, "b": None}, {ID: 2, "b": 1, "a": "x"}, {ID: 3, "c": True, "a": "y"}])
    assert columns.fields == {"b": pa.int32(), "a": pa.string(), "c": pa.bool_()}
    assert columns.id_type == pa.int32()


def test_later_values_widen_their_columns() -> None:
    """int32 then int64 then double widen one column; a struct gains the fields it meets."""
    columns = _folded([{ID: 1, "n": 1, "s": {"x": 1}}, {ID: 2, "n": 2**40, "s": {"y": "t"}}])
    columns.fold([{ID: 3, "n": 0.5}])
    assert columns.fields["n"] == pa.float64()
    assert columns.fields["s"] == pa.struct([("x", pa.int32()), ("y", pa.string())])


def test_fields_past_max_columns_are_rescued() -> None:
    """Only the first max_columns fields get a column; later ones are rescued."""
    documents = [{ID: 1, "a": 1, "b": 2}, {ID: 2, "c": 3, "a": 4}]
    columns = _folded(documents, max_columns=2)
    assert list(columns.fields) == ["a", "b"]
    rows = _rows(columns, documents)
    assert [_rescued(row) for row in rows] == [{}, {"c": 3}]
    assert [row["a"] for row in rows] == [1, 4]


def test_case_twins_reserved_and_unsafe_names_are_rescued() -> None:
    """A name equal ignoring case to a column or system column, or one Delta cannot hold,
    gets no column: its values go to _rescued."""
    document = {ID: 1, "Name": "x", "name": "y", "_DOC": 1, "_doc": 2, "_Id": 3, "a.b": 4}
    columns = _folded([document])
    assert list(columns.fields) == ["Name"]
    (row,) = _rows(columns, [document])
    assert row["Name"] == "x"
    assert _rescued(row) == {"name": "y", "_DOC": 1, "_doc": 2, "_Id": 3, "a.b": 4}


def test_values_no_widening_covers_are_rescued_and_nulls_are_not() -> None:
    """A value conflicting with its column is null there and kept in _rescued as relaxed
    Extended JSON; a null, or a missing field, is just null."""
    documents: list[dict[str, Any]] = [
        {ID: 1, "a": 1},
        {ID: 2, "a": "one"},
        {ID: 3, "a": None},
        {ID: 4, "a": {}},
    ]
    columns = _folded(documents)
    assert columns.fields == {"a": pa.int32()}
    rows = _rows(columns, [*documents, {ID: 5}])
    assert [row["a"] for row in rows] == [1, None, None, None, None]
    assert [row[RESCUED] for row in rows] == [
        None,
        relaxed_json({"a": "one"}),
        None,
        relaxed_json({"a": {}}),
        None,
    ]


def test_ids_of_mixed_types_become_json_text() -> None:
    """An _id column is typed while its values agree (int32 widening to int64 included),
    and relaxed Extended JSON text once they do not, or once an _id decides no type."""
    widened = _folded([{ID: 1}, {ID: Int64(2)}])
    assert widened.id_type == pa.int64()
    cases: list[list[Any]] = [[1, "x"], [{"k": 1}, {"k": "v"}], [1, {}], [{}]]
    for ids in cases:
        documents = [{ID: value} for value in ids]
        columns = _folded(documents)
        assert columns.id_type == JSON_COLUMN, ids
        assert [row[ID] for row in _rows(columns, documents)] == [relaxed_json(v) for v in ids]


def test_a_missing_document_is_a_row_of_nulls() -> None:
    """A None document (a deleted one) projects to every column null, _rescued included."""
    columns = _folded([{ID: 1, "a": 1, "b": "x"}])
    (row,) = _rows(columns, [None])
    assert set(row) == {ID, "a", "b", RESCUED}
    assert set(row.values()) == {None}


def test_widened_from_tells_a_type_change_from_a_new_column() -> None:
    """A column changing type means a rewrite; only new columns do not."""
    before = _folded([{ID: 1, "a": 1}])
    added = before.copy()
    added.fold([{ID: 2, "b": "x"}])
    assert not added.widened_from(before)
    assert "b" not in before.fields
    widened = before.copy()
    widened.fold([{ID: 2, "a": 2**40}])
    assert widened.widened_from(before)


@given(DOCUMENTS, st.integers(1, 4))
def test_every_field_is_typed_or_rescued_never_both(
    documents: list[dict[str, Any]], limit: int
) -> None:
    """For every row and field: the column holds the field's column value and _rescued
    lacks it, or the column is null and _rescued holds the value; nulls are never rescued,
    and _id is its column value."""
    columns = _folded(documents, max_columns=limit)
    assert len(columns.fields) <= limit
    for document, row in zip(documents, _rows(columns, documents), strict=True):
        rescued = _rescued(row)
        assert row[ID] == column_value(document[ID], columns.id_type)
        for name, value in document.items():
            if name == ID:
                continue
            kind = columns.fields.get(name)
            if name in rescued:
                assert value is not None
                assert relaxed_json(rescued[name]) == relaxed_json(value)
                assert kind is None or row[name] is None
            else:
                assert kind is not None or value is None
                assert row.get(name) == column_value(value, kind)
        assert set(rescued) <= set(document)


def test_a_stored_schema_gives_back_its_columns() -> None:
    """of_schema reads a table's columns back, JSON marks, nested types and reserved
    columns included, from the fields arrow_fields wrote."""
    columns = _folded(
        [
            {ID: "k", "j": Timestamp(1, 1), "s": {"x": [1.5]}, "t": datetime.datetime(2024, 1, 1)},
            {ID: "l", "j": 3, "b": b"\x00"},
        ]
    )
    assert columns.fields["j"] == JSON_COLUMN
    schema = pa.schema(
        [*columns.arrow_fields(), *(pa.field(name, pa.string()) for name in RESERVED)]
    )
    assert schema.field("j").metadata == {KIND_KEY: b"json"}
    assert schema.field("t").type == TIMESTAMP
    assert ColumnSet.of_schema(schema, RESERVED, 500) == columns


def test_column_type_undoes_arrow_field_and_delta_read_back_types() -> None:
    """A JSON column's marked string reads back as JSON; large and view types read back as
    the plain types this module writes."""
    assert column_type(arrow_field("j", JSON_COLUMN)) == JSON_COLUMN
    assert column_type(pa.field("p", pa.string())) == pa.string()
    stored = pa.field(
        "s", pa.struct([("l", pa.large_list(pa.large_string())), ("b", pa.large_binary())])
    )
    assert column_type(stored) == pa.struct([("l", pa.list_(pa.string())), ("b", pa.binary())])


def test_an_unwritten_table_has_no_columns() -> None:
    """No schema yet: no _id type, no field columns, _id projected as text."""
    columns = ColumnSet.of_schema(None, RESERVED, 3)
    assert (columns.id_type, columns.fields, columns.max_columns) == (None, {}, 3)
    assert columns.arrow_fields() == [pa.field(ID, pa.string())]
