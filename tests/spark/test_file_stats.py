"""The Delta statistics of the files shardstream writes itself (``delta/file_stats.py``):
exact bounds where a column has them, counts always, and a reader that skips files by them
still finds every row.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, QueryBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.spark.delta.file_stats import MAX_STRING, file_statistics
from shardstream.spark.delta.sink import LakehouseSink
from shardstream.spark.delta.typed.paths import HISTORY_DIR, table_path
from shardstream.spark.ingest import MirrorLayout
from tests.spark.collection_checks import read_rows, token_batches
from tests.spark.lakehouse_checks import event_row

_UTC = datetime.UTC


def test_bounds_are_written_where_they_are_exact() -> None:
    moment = datetime.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=_UTC)
    rows = pa.table(
        {
            "n": pa.array([3, None, -2], pa.int64()),
            "x": pa.array([1.5, float("nan"), 2.0]),
            "s": pa.array(["b", "a", None]),
            "long": pa.array(["x" * (MAX_STRING + 1), "y", "z"]),
            "when": pa.array([moment, None, moment], pa.timestamp("us", tz="UTC")),
            "empty": pa.nulls(3, pa.string()),
            "doc": pa.array([{"a": 1}, None, {"a": 2}]),
        }
    )
    stats = json.loads(file_statistics(rows))
    assert stats == {
        "numRecords": 3,
        "minValues": {"n": -2, "s": "a", "when": "2024-05-06T07:08:09.123Z"},
        "maxValues": {"n": 3, "s": "b", "when": "2024-05-06T07:08:09.123Z"},
        "nullCount": {"n": 1, "x": 0, "s": 1, "long": 0, "when": 1, "empty": 3},
    }


_COLUMNS = st.one_of(
    st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), min_size=1).map(
        lambda values: pa.array(values, pa.int64())
    ),
    st.lists(st.none() | st.floats(allow_nan=False, allow_infinity=False), min_size=1).map(
        lambda values: pa.array(values, pa.float64())
    ),
    st.lists(st.none() | st.text(max_size=8), min_size=1).map(
        lambda values: pa.array(values, pa.string())
    ),
)


def _key(value: Any) -> Any:
    """How a Delta reader orders the values: strings by their UTF-8 bytes."""
    return value.encode() if isinstance(value, str) else value


@settings(max_examples=150, deadline=None)
@given(_COLUMNS)
def test_every_value_lies_within_its_bounds(column: pa.Array) -> None:
    stats = json.loads(file_statistics(pa.table({"c": column})))
    present = [value for value in column.to_pylist() if value is not None]
    assert stats["numRecords"] == len(column)
    assert stats["nullCount"]["c"] == len(column) - len(present)
    if present:
        assert _key(stats["minValues"]["c"]) == min(map(_key, present))
        assert _key(stats["maxValues"]["c"]) == max(map(_key, present))
    else:
        assert "c" not in stats["minValues"]


def _history(root: Path) -> Path:
    sink = LakehouseSink(root, "app", layout=MirrorLayout.COLLECTIONS, buckets=2)
    ns = ("shop", "orders")
    batches: list[list[dict[str, Any]]] = [
        [event_row("insert", ns=ns, _id=n, doc={"_id": n, "qty": n}) for n in range(12)],
        [event_row("update", ns=ns, _id=n, diff={"u": {"qty": -n}}) for n in range(0, 12, 3)],
        [event_row("delete", ns=ns, _id=n) for n in range(1, 12, 4)],
    ]
    for batch_id, rows in enumerate(batches):
        [table] = token_batches(rows, len(rows))
        sink.write_batch(table, batch_id)
    return table_path(root, HISTORY_DIR, *ns)


def test_a_reader_skipping_files_by_the_history_statistics_finds_every_row(
    tmp_path: Path,
) -> None:
    history = _history(tmp_path)
    table = DeltaTable(str(history))
    actions = pa.table(table.get_add_actions(flatten=True))
    assert "min._documentId" in actions.column_names  # the bounds are in the log
    rows = read_rows(history)
    for identity in set(rows["_documentId"].to_pylist()):
        quoted = identity.replace("'", "''")
        found = (
            QueryBuilder()
            .register("h", table)
            .execute(f"SELECT count(*) AS n FROM h WHERE \"_documentId\" = '{quoted}'")
        )
        expected = pc.sum(pc.equal(rows["_documentId"], identity)).as_py()
        assert pa.table(found.read_all())["n"].to_pylist() == [expected], identity
