"""The typed tables' buckets (``typed/buckets.py``), through the driver's sink and a
collection task's code alike (both call ``typed.batch.write_shares``), no Spark.

A batch that touches one document reads and rewrites only that document's bucket in its
collection's mirror and history; a table keeps the bucket count it was created with.
``tests/spark/test_history_files.py`` has the history's own file rules.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from shardstream.errors import SinkError
from shardstream.spark.delta.sink import LakehouseSink
from shardstream.spark.delta.typed.buckets import BUCKET, table_buckets
from shardstream.spark.delta.typed.paths import HISTORY_DIR, MIRROR_DIR, table_path
from shardstream.spark.ingest import MirrorLayout
from tests.spark.collection_checks import read_rows, token_batches
from tests.spark.lakehouse_checks import event_row

_NS = ("shop", "orders")
_DOCUMENTS = 64


def _inserts() -> list[dict[str, Any]]:
    return [event_row("insert", ns=_NS, _id=n, doc={"_id": n, "qty": n}) for n in range(_DOCUMENTS)]


def _sink(root: Path, buckets: int) -> LakehouseSink:
    return LakehouseSink(root, "app", layout=MirrorLayout.COLLECTIONS, buckets=buckets)


def _last_commit(path: Path) -> list[dict[str, Any]]:
    """The actions of the table's newest commit, as its log file holds them."""
    version = DeltaTable(str(path)).version()
    log = path / "_delta_log" / f"{version:020d}.json"
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def _bucket_of(document_id: str, buckets: int) -> int:
    return zlib.crc32(document_id.encode()) % buckets


def test_a_batch_touching_one_document_rewrites_only_its_bucket(tmp_path: Path) -> None:
    stream = _inserts()
    stream.append(event_row("update", ns=_NS, _id=7, diff={"u": {"qty": 700}}))
    first, second = token_batches(stream, _DOCUMENTS)
    sink = _sink(tmp_path, 8)
    sink.write_batch(first, 0)
    mirror, history = (table_path(tmp_path, kind, *_NS) for kind in (MIRROR_DIR, HISTORY_DIR))
    rows = read_rows(mirror)
    assert len(set(rows[BUCKET].to_pylist())) == 8  # the documents fill every bucket
    [document_id] = rows.filter(pc.equal(rows["_id"], 7))["_documentId"].to_pylist()
    files_before = {table: set(DeltaTable(str(table)).file_uris()) for table in (mirror, history)}

    sink.write_batch(second, 1)
    bucket = _bucket_of(document_id, 8)
    for table in (mirror, history):
        actions = _last_commit(table)
        changed = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
        assert changed, table  # the batch did rewrite the document's file
        assert {int(a["partitionValues"][BUCKET]) for a in changed} == {bucket}, table
        # Every other bucket's files are the ones the first batch wrote.
        kept = set(DeltaTable(str(table)).file_uris()) & files_before[table]
        assert len(kept) == len(files_before[table]) - sum("remove" in a for a in actions)
    [info] = [a["commitInfo"] for a in _last_commit(mirror) if "commitInfo" in a]
    metrics = info["operationMetrics"]  # the mirror's MERGE read the one bucket's file alone
    assert (
        metrics["num_target_files_scanned"],
        metrics["num_target_files_skipped_during_scan"],
    ) == (1, 7)
    # The history replaced the one current file holding the document's open version.
    [removed] = [a["remove"] for a in _last_commit(history) if "remove" in a]
    assert removed["partitionValues"] == {"_current": "true", BUCKET: str(bucket)}
    after = read_rows(mirror)
    updated = after.filter(pc.equal(after["_id"], 7))
    assert updated["qty"].to_pylist() == [700]
    assert updated[BUCKET].to_pylist() == [bucket]


def test_a_table_keeps_the_bucket_count_it_was_created_with(tmp_path: Path) -> None:
    first, second = token_batches(_inserts(), _DOCUMENTS // 2)
    _sink(tmp_path, 8).write_batch(first, 0)
    _sink(tmp_path, 3).write_batch(second, 1)  # a later run asks for another count
    for kind in (MIRROR_DIR, HISTORY_DIR):
        path = table_path(tmp_path, kind, *_NS)
        assert table_buckets(DeltaTable(str(path)), path) == 8
        rows = read_rows(path)
        ids = rows["_documentId"].to_pylist()
        assert rows[BUCKET].to_pylist() == [_bucket_of(i, 8) for i in ids]
    assert read_rows(table_path(tmp_path, MIRROR_DIR, *_NS)).num_rows == _DOCUMENTS


def test_a_collection_table_without_buckets_is_refused_by_name(tmp_path: Path) -> None:
    path = table_path(tmp_path, MIRROR_DIR, *_NS)
    path.mkdir(parents=True)
    DeltaTable.create(str(path), pa.schema([pa.field("_id", pa.int32())]))
    with pytest.raises(SinkError, match=f"expected the collection table {path} partitioned"):
        _sink(tmp_path, 8).write_batch(token_batches(_inserts(), _DOCUMENTS)[0], 0)
