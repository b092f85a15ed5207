"""The bucketed mirror's task and commit sides, without Spark: batches shuffled to buckets
as ``task_batches.by_bucket`` does (``lakehouse_checks.shuffled_to_buckets``; any hash
keeping a document in one bucket will do), each bucket applied and rewritten, each batch
committed once.  The oracle is the in-driver one-table mirror: the same rows, the same
errors.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from shardstream.errors import SinkError
from shardstream.spark.delta.changelog.table import CHANGELOG_TABLE
from shardstream.spark.delta.changelog.task_files import create_changelog
from shardstream.spark.delta.commits import BatchCommit, committed_watermark, open_table, table_rows
from shardstream.spark.delta.mirror.bucketed.bucket_commit import commit_buckets, committed_write
from shardstream.spark.delta.mirror.bucketed.bucket_table import (
    BUCKET_COLUMN,
    bucket_count,
    create_bucketed_mirror,
)
from shardstream.spark.delta.mirror.bucketed.bucket_writer import EVENT_BUCKET, write_buckets
from shardstream.spark.delta.mirror.check import mirror_state, read_table
from shardstream.spark.delta.mirror.keys import document_id
from shardstream.spark.delta.mirror.prepare import EVENT_COLUMNS, MERGE_KEY_ORDER, MIRROR_SCHEMA
from shardstream.spark.delta.mirror.table import MIRROR_TABLE
from shardstream.spark.ingest.driver_commit import commit_written
from shardstream.spark.ingest.task_writes import EventTasks, WriterOptions, Written
from tests.spark.lakehouse_checks import (
    driver_mirror_rows,
    event_batches,
    event_row,
    expected_state,
    merged_events,
    shuffled_to_buckets,
    simulate,
)

_RESULT = simulate(seed=11, operations=400)
_EVENTS = merged_events(_RESULT, seed=11)


def _apply(path: Path, events: pa.Table, batch_id: int, buckets: int, *, tasks: int = 3) -> bool:
    """One batch: its buckets split over ``tasks`` tasks, then the driver's commit."""
    table = open_table(path)
    assert table is not None
    version, watermark = table.version(), committed_watermark(table)
    shuffled = shuffled_to_buckets(events.select(list(EVENT_COLUMNS)), buckets)
    numbers = shuffled[EVENT_BUCKET].to_pylist()
    writes = []
    for task in range(tasks):
        share = shuffled.filter(pa.array([number % tasks == task for number in numbers]))
        writes += write_buckets(path, version, share, watermark, strict=True)
    commit = BatchCommit(app_id="app", batch_id=batch_id, watermark=events["_id"][-1].as_py())
    return commit_buckets(path, version, writes, commit)


def _rows(path: Path) -> list[dict[str, object]]:
    table = open_table(path)
    assert table is not None
    rows: list[dict[str, object]] = (
        table_rows(table, MIRROR_SCHEMA.names).sort_by(MERGE_KEY_ORDER).to_pylist()
    )
    return rows


@pytest.mark.parametrize("buckets", [1, 4, 16])
def test_buckets_give_the_drivers_mirror(tmp_path: Path, buckets: int) -> None:
    """Migrations, transactions, drops and renames of the simulator, in batches of 120."""
    batches = event_batches(_EVENTS, 120)
    path = tmp_path / "bucketed"
    assert create_bucketed_mirror(path, buckets) == buckets
    for batch_id, batch in enumerate(batches):
        assert _apply(path, batch, batch_id, buckets)
    assert len(batches) > 4
    assert _rows(path) == driver_mirror_rows(tmp_path / "driver", batches)
    table = table_rows(DeltaTable(str(path)), MIRROR_SCHEMA.names).cast(MIRROR_SCHEMA)
    assert mirror_state(table) == expected_state(_RESULT)


def test_a_namespace_event_acts_on_every_bucket(tmp_path: Path) -> None:
    first = [
        event_row("insert", ns=("shop", c), _id=n, doc={"_id": n}) for c in "abd" for n in range(9)
    ]
    second = [
        event_row("update", ns=("shop", "a"), _id=1, diff={"u": {"v": 1}}),
        event_row("rename", ns=("shop", "a"), to=("shop", "c")),
        event_row("drop", ns=("shop", "b")),
        event_row("update", ns=("shop", "c"), _id=2, diff={"u": {"w": 2}}),
        event_row("dropDatabase", ns=("gone", None)),
    ]
    batches = [pa.Table.from_pylist(rows) for rows in (first, second)]
    path = tmp_path / "bucketed"
    create_bucketed_mirror(path, 4)
    for batch_id, batch in enumerate(batches):
        _apply(path, batch, batch_id, 4)
    rows = _rows(path)
    assert {(row["db"], row["coll"]) for row in rows} == {("shop", "c"), ("shop", "d")}
    assert rows == driver_mirror_rows(tmp_path / "driver", batches)


def test_a_batch_touching_one_document_rewrites_only_its_bucket(tmp_path: Path) -> None:
    inserts = [event_row("insert", _id=n, doc={"_id": n}) for n in range(64)]
    path = tmp_path / "bucketed"
    create_bucketed_mirror(path, 8)
    _apply(path, pa.Table.from_pylist(inserts), 0, 8)
    before = set(DeltaTable(str(path)).file_uris())
    assert len(before) == 8  # every bucket holds documents, one file each
    _apply(path, pa.Table.from_pylist([event_row("update", _id=5, diff={"u": {"x": 1}})]), 1, 8)
    after = set(DeltaTable(str(path)).file_uris())
    assert len(before - after) == len(after - before) == 1
    bucket = zlib.crc32(document_id(inserts[5]["documentKey"]).encode()) % 8
    assert f"/{BUCKET_COLUMN}={bucket}/" in next(iter(after - before))
    written = committed_write(open_table(path), "app", 1)
    assert written is not None
    assert (written.events, written.rows_read, written.rows_written) == (1, 1, 1)


def test_a_batch_commits_once_and_files_no_commit_names_are_never_read(tmp_path: Path) -> None:
    path = tmp_path / "bucketed"
    create_bucketed_mirror(path, 4)
    batch = event_batches(_EVENTS, 100)[0]
    table = open_table(path)
    assert table is not None
    orphan = write_buckets(path, table.version(), shuffled_to_buckets(batch, 4), None, strict=True)
    assert _apply(path, batch, 0, 4)
    assert not _apply(path, batch, 0, 4)  # a replay: the table has batch 0
    referenced = {Path(uri).name for uri in DeltaTable(str(path)).file_uris()}
    assert not referenced & {w.added.path.rsplit("/", 1)[1] for w in orphan if w.added}
    assert _rows(path) == driver_mirror_rows(tmp_path / "driver", [batch])


def test_a_table_moved_since_the_tasks_read_it_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bucketed"
    create_bucketed_mirror(path, 2)
    batches = event_batches(_EVENTS, 50)
    table = open_table(path)
    assert table is not None
    # Read before batch 0 commits (lenient: the documents batch 1 updates are not there).
    shuffled = shuffled_to_buckets(batches[1], 2)
    stale = write_buckets(path, table.version(), shuffled, None, strict=False)
    _apply(path, batches[0], 0, 2)
    commit = BatchCommit(app_id="app", batch_id=1, watermark=batches[1]["_id"][-1].as_py())
    with pytest.raises(SinkError, match="another writer"):
        commit_buckets(path, table.version(), stale, commit)


def test_an_unknown_update_is_the_drivers_error(tmp_path: Path) -> None:
    batch = pa.Table.from_pylist([event_row("update", _id=7, diff={"u": {"x": 1}})])
    with pytest.raises(SinkError) as driver:
        driver_mirror_rows(tmp_path / "driver", [batch])
    path = tmp_path / "bucketed"
    create_bucketed_mirror(path, 4)
    with pytest.raises(SinkError) as bucketed:
        _apply(path, batch, 0, 4)
    assert str(bucketed.value) == str(driver.value)


def test_the_bucket_count_is_the_tables_own(tmp_path: Path) -> None:
    path = tmp_path / "bucketed"
    assert create_bucketed_mirror(path, 8) == 8
    assert create_bucketed_mirror(path, 32) == 8  # fixed once written
    with pytest.raises(SinkError, match="bucket count from 1"):
        create_bucketed_mirror(tmp_path / "other", 0)
    plain = tmp_path / "plain"
    DeltaTable.create(str(plain), MIRROR_SCHEMA)
    with pytest.raises(SinkError, match="expected a bucketed mirror"):
        bucket_count(DeltaTable(str(plain)), plain)


def test_a_failed_commit_after_a_tables_commit_keeps_that_tables_files(tmp_path: Path) -> None:
    """The mirror's commit fails (another writer moved the table) after the change log
    committed the batch: the change log's file is its data and stays; the mirror's new
    files, which no commit names, are deleted."""
    create_changelog(tmp_path)
    create_bucketed_mirror(tmp_path / MIRROR_TABLE, 4)
    options = WriterOptions(root=tmp_path, app_id="app", batch_id=0, documents_version=0)
    events = shuffled_to_buckets(event_batches(_EVENTS, 100)[0], 4)
    [row] = EventTasks(options)(iter(events.to_batches()))
    message = Written.unpickled(row["message"].to_pylist())
    [changelog] = message.changelogs
    written = [tmp_path / MIRROR_TABLE / w.added.path for w in message.buckets if w.added]
    assert written
    assert all(path.exists() for path in written)
    other = BatchCommit(app_id="another writer", batch_id=0, watermark="x")
    assert commit_buckets(tmp_path / MIRROR_TABLE, 0, [], other)  # the table moves on
    with pytest.raises(SinkError, match="another writer committed meanwhile"):
        commit_written(options, message)
    assert changelog.name is not None
    assert (tmp_path / CHANGELOG_TABLE / changelog.name).exists()
    assert not any(path.exists() for path in written)
    assert len(read_table(tmp_path, CHANGELOG_TABLE)) == 100


def test_a_reader_skipping_bucket_files_by_their_statistics_finds_every_row(
    tmp_path: Path,
) -> None:
    """The buckets' files carry bounds (``file_stats``) a reader prunes by, never wrongly."""
    path = tmp_path / "bucketed"
    create_bucketed_mirror(path, 4)
    for batch_id, batch in enumerate(event_batches(_EVENTS, 120)):
        _apply(path, batch, batch_id, 4)
    table = DeltaTable(str(path))
    actions = pa.table(table.get_add_actions(flatten=True))
    assert "min._documentId" in actions.column_names  # the bounds are in the log
    rows = table_rows(table, ["_documentId"])["_documentId"].to_pylist()
    for identity in set(rows):
        quoted = identity.replace("'", "''")
        found = (
            QueryBuilder()
            .register("m", table)
            .execute(f"SELECT count(*) AS n FROM m WHERE \"_documentId\" = '{quoted}'")
        )
        assert pa.table(found.read_all())["n"].to_pylist() == [rows.count(identity)], identity
