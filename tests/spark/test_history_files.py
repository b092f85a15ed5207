"""The history's batches as files (``typed/history_files.py``), through the driver's sink,
no Spark: a batch rewrites only the current files holding a version it ends, adds the rest,
reads files written before a column was added, and refuses a history whose change data
feed an earlier shardstream turned on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from shardstream.errors import SinkError
from shardstream.spark.delta.sink import LakehouseSink
from shardstream.spark.delta.typed.buckets import BUCKET
from shardstream.spark.delta.typed.paths import HISTORY_DIR, MIRROR_DIR, table_path
from shardstream.spark.ingest import MirrorLayout
from tests.spark.collection_checks import read_rows, token_batches
from tests.spark.lakehouse_checks import event_row

_NS = ("shop", "orders")
_BUCKETS = 4


def _written(root: Path, batches: list[list[dict[str, Any]]]) -> Path:
    """``batches`` (event rows) written one batch each; the history's path."""
    sink = LakehouseSink(root, "app", layout=MirrorLayout.COLLECTIONS, buckets=_BUCKETS)
    for batch_id, rows in enumerate(batches):
        [table] = token_batches(rows, len(rows))
        sink.write_batch(table, batch_id)
    return table_path(root, HISTORY_DIR, *_NS)


def _inserts(ids: range) -> list[dict[str, Any]]:
    return [event_row("insert", ns=_NS, _id=n, doc={"_id": n, "qty": n}) for n in ids]


def _file_actions(path: Path) -> list[dict[str, Any]]:
    """The add and remove actions of the table's newest commit, as its log holds them."""
    version = DeltaTable(str(path)).version()
    log = path / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line]
    return [action for action in actions if "add" in action or "remove" in action]


def test_new_documents_only_add_files(tmp_path: Path) -> None:
    history = _written(tmp_path, [_inserts(range(32)), _inserts(range(32, 64))])
    actions = _file_actions(history)
    assert actions
    assert all("add" in action for action in actions)
    assert {action["add"]["partitionValues"]["_current"] for action in actions} == {"true"}
    rows = read_rows(history)
    assert rows.num_rows == 64
    assert rows["__END_AT"].null_count == 64


def test_a_batch_rewrites_only_the_current_files_holding_a_version_it_ends(
    tmp_path: Path,
) -> None:
    first, second = _inserts(range(32)), _inserts(range(32, 64))
    update = event_row("update", ns=_NS, _id=40, diff={"u": {"qty": 400}})
    history = _written(tmp_path, [first, second, [update]])
    rows = read_rows(history)
    versions = rows.filter(pc.equal(rows["_id"], 40)).sort_by("__START_AT")
    assert versions["qty"].to_pylist() == [40, 400]
    assert versions["__END_AT"].to_pylist() == [update["_id"], None]
    assert versions["_current"].to_pylist() == [False, True]
    bucket = str(versions[BUCKET][0].as_py())
    actions = _file_actions(history)
    # The one file replaced is the second batch's in document 40's bucket: the first
    # batch's file of that bucket holds no version the update ends, and stays.
    [removed] = [action["remove"] for action in actions if "remove" in action]
    assert removed["partitionValues"] == {"_current": "true", BUCKET: bucket}
    added = sorted(
        (action["add"]["partitionValues"]["_current"], action["add"]["partitionValues"][BUCKET])
        for action in actions
        if "add" in action
    )
    assert added == [("false", bucket), ("true", bucket)]
    current = pa.table(DeltaTable(str(history)).get_add_actions(flatten=True)).to_pydict()
    in_bucket = [
        path
        for path, is_current, number in zip(
            current["path"],
            current["partition._current"],
            current[f"partition.{BUCKET}"],
            strict=True,
        )
        if is_current and str(number) == bucket
    ]
    assert len(in_bucket) == 2  # the first batch's file and the rewritten one
    assert removed["path"] not in in_bucket


def test_a_version_stored_before_a_new_column_ends_with_the_column_null(tmp_path: Path) -> None:
    insert = event_row("insert", ns=_NS, _id=1, doc={"_id": 1, "qty": 1})
    update = event_row("update", ns=_NS, _id=1, diff={"i": {"color": "red"}})
    history = _written(tmp_path, [[insert], [update]])
    rows = read_rows(history).sort_by("__START_AT")
    assert rows["color"].to_pylist() == [None, "red"]
    assert rows["__END_AT"].to_pylist() == [update["_id"], None]
    assert rows["qty"].to_pylist() == [1, 1]


def test_a_new_history_has_no_change_data_feed_and_a_mirror_has_it(tmp_path: Path) -> None:
    history = _written(tmp_path, [_inserts(range(4))])
    mirror = table_path(tmp_path, MIRROR_DIR, *_NS)
    feed = "delta.enableChangeDataFeed"
    assert DeltaTable(str(mirror)).metadata().configuration.get(feed) == "true"
    assert DeltaTable(str(history)).metadata().configuration.get(feed) is None


def test_a_history_with_the_change_data_feed_on_is_refused_by_name(tmp_path: Path) -> None:
    history = _written(tmp_path, [_inserts(range(4))])
    DeltaTable(str(history)).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})
    sink = LakehouseSink(tmp_path, "app", layout=MirrorLayout.COLLECTIONS, buckets=_BUCKETS)
    [batch] = token_batches(_inserts(range(4, 8)), 4)
    with pytest.raises(SinkError, match=f"expected the history table {history} without the"):
        sink.write_batch(batch, 1)
