"""The mirror's plain documents (only set or deleted in a batch) in Arrow: the same merge
rows as applying the whole batch in Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from shardstream.bench.corpus import oplog_bytes
from shardstream.errors import SinkError
from shardstream.spark.delta.mirror.plain import split_plain
from shardstream.spark.delta.mirror.prepare import (
    EVENT_COLUMNS,
    joined_source,
    merge_source,
)
from shardstream.spark.delta.mirror.state import apply_batch
from shardstream.spark.source.rows import EVENT_SCHEMA
from shardstream.transform import ChangeEvent
from tests.spark.lakehouse_checks import (
    event_batches,
    event_row,
    merged_events,
    merged_file_events,
    simulate,
)


def _whole(events: pa.Table) -> pa.Table:
    changes = apply_batch(events.to_pylist(), [], strict=False)
    return merge_source(changes.rows)


def _split(events: pa.Table) -> pa.Table:
    split = split_plain(events)
    return joined_source(apply_batch(split.events.to_pylist(), [], strict=False), split.plain)


def _corpus_events(tmp_path: Path) -> list[ChangeEvent]:
    parts = []
    for seed in range(3):
        path = tmp_path / f"s{seed}.bson"
        path.write_bytes(oplog_bytes(1500, seed=seed))
        parts.append(f"{path.stem}={path}")
    return merged_file_events(",".join(parts))


@pytest.mark.parametrize("source", ["sim-3", "sim-8", "objectid"])
@pytest.mark.parametrize("size", [50, 700])
def test_plain_documents_give_the_whole_batchs_merge_rows(
    source: str, size: int, tmp_path: Path
) -> None:
    if source == "objectid":
        events = _corpus_events(tmp_path)
    else:
        events = merged_events(simulate(seed=int(source[4:]), operations=400))
    split_some = 0
    for batch in event_batches(events, size):
        table = batch.select(list(EVENT_COLUMNS))
        assert _split(table).to_pylist() == _whole(table).to_pylist()
        split = split_plain(table)
        split_some += split.plain is not None and split.plain.num_rows > 0
    assert split_some  # the Arrow path did take documents


def _table(events: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema([EVENT_SCHEMA.field(name) for name in EVENT_COLUMNS])
    return pa.Table.from_pylist(events, schema=schema)


def test_a_batch_with_a_drop_is_applied_whole_in_python() -> None:
    events = [
        event_row("insert", _id=1, doc={"_id": 1}),
        event_row("insert", ns=("shop", "gone"), _id=2, doc={"_id": 2}),
        event_row("drop", ns=("shop", "gone")),
        event_row("delete", _id=3),
    ]
    split = split_plain(_table(events))
    assert split.plain is None
    assert split.events.num_rows == len(events)
    assert _split(_table(events)).to_pylist() == _whole(_table(events)).to_pylist()


def test_only_documents_without_an_update_take_the_arrow_path() -> None:
    events = [
        event_row("insert", _id=1, doc={"_id": 1, "a": 1}),
        event_row("insert", _id=2, doc={"_id": 2}),
        event_row("update", _id=1, diff={"u": {"a": 2}}),
        event_row("replace", _id=2, doc={"_id": 2, "b": 1}),
        event_row("delete", _id=3),
        event_row("createIndexes"),
    ]
    split = split_plain(_table(events))
    assert split.plain is not None
    assert split.plain["_documentId"].to_pylist() == ['{"$numberInt":"2"}', '{"$numberInt":"3"}']
    assert split.plain["_delete"].to_pylist() == [False, True]
    assert split.events["operationType"].to_pylist() == ["insert", "update", "createIndexes"]
    assert _split(_table(events)).to_pylist() == _whole(_table(events)).to_pylist()


@pytest.mark.parametrize("updated", [False, True], ids=["arrow-path", "python-path"])
def test_an_insert_without_its_document_is_refused(updated: bool) -> None:
    events = [event_row("insert", _id=1)]
    if updated:
        events.append(event_row("update", _id=1, diff={"u": {"a": 2}}))
    with pytest.raises(SinkError, match="expected column 'fullDocument'"):
        _split(_table(events))
