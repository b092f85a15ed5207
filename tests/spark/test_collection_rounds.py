"""The per-collection layout's two rounds of tasks, without Spark: each batch shuffled by
bucket as ``task_batches.by_bucket`` does (here by a CRC of the document ``_id``), the
state tasks (``StateStage``) run on their shares, their rows shuffled by collection as
``by_collection`` does, the collection tasks (``write_collection_rows``) run on theirs,
then the state's commit.  The oracle is the in-driver sink: the same typed mirrors and
histories, DDL (drop, rename, dropDatabase) included, however the batch is split.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pyarrow as pa
import pytest

from shardstream.spark.delta.commits import BatchCommit, committed_watermark, open_table
from shardstream.spark.delta.mirror.bucketed.bucket_commit import commit_buckets
from shardstream.spark.delta.mirror.bucketed.bucket_table import create_bucketed_mirror
from shardstream.spark.delta.mirror.bucketed.bucket_writer import EVENT_BUCKET
from shardstream.spark.delta.mirror.check import collection_tables, collections_state
from shardstream.spark.delta.typed.change_rows import ROUTE
from shardstream.spark.delta.typed.paths import STATE_TABLE
from shardstream.spark.ingest.collection_stage import (
    CollectionTasks,
    StateStage,
    write_collection_rows,
)
from shardstream.spark.ingest.task_writes import WriterOptions, Written
from tests.spark.collection_checks import (
    assert_same_tables,
    ddl_rows,
    ddl_stream,
    driver_collection_tables,
    token_batches,
)
from tests.spark.lakehouse_checks import (
    event_batches,
    expected_state,
    merged_events,
    shuffled_to_buckets,
    simulate,
)


def _write(root: Path, batches: list[pa.Table], *, buckets: int, tasks: int) -> None:
    path = root / STATE_TABLE
    create_bucketed_mirror(path, buckets)
    for batch_id, batch in enumerate(batches):
        table = open_table(path)
        assert table is not None
        options = WriterOptions(
            root=root,
            app_id="tasks",
            batch_id=batch_id,
            log=False,
            documents_version=table.version(),
            documents_watermark=committed_watermark(table),
            collections=True,
        )
        shuffled = shuffled_to_buckets(batch, buckets)
        numbers = shuffled[EVENT_BUCKET].to_pylist()
        rows = []
        for task in range(tasks):  # the state tasks, a share of the buckets each
            share = shuffled.filter(pa.array([number % tasks == task for number in numbers]))
            rows += list(StateStage(options)(iter(share.to_batches())))
        handed = pa.Table.from_batches(rows)
        routes = handed[ROUTE].to_pylist()
        messages = []
        for task in range(tasks):  # the collection tasks, a share of the collections each
            mine = [zlib.crc32(route.encode()) % tasks == task for route in routes]
            share = handed.filter(pa.array(mine))
            if share.num_rows:
                written = write_collection_rows(options, share)
                messages.append(written)
        joined = Written.joined(messages)
        assert joined.last_event is not None
        commit = BatchCommit(app_id="tasks", batch_id=batch_id, watermark=joined.last_event)
        commit_buckets(path, table.version(), joined.buckets, commit, STATE_TABLE)


@pytest.mark.parametrize(
    ("tokens_per_batch", "buckets", "tasks"), [(1, 4, 2), (4, 3, 3), (100, 8, 2)]
)
def test_ddl_streams_give_the_drivers_tables(
    tmp_path: Path, tokens_per_batch: int, buckets: int, tasks: int
) -> None:
    """A drop seen twice, a rename onto a collection that exists, a dropDatabase of
    collections held in different buckets, a document inserted again after it."""
    batches = token_batches(ddl_stream(ddl_rows()), tokens_per_batch)
    _write(tmp_path / "tasks", batches, buckets=buckets, tasks=tasks)
    driver = driver_collection_tables(tmp_path / "driver", batches)
    assert_same_tables(collection_tables(tmp_path / "tasks"), driver)


def test_a_random_workload_gives_the_drivers_tables(tmp_path: Path) -> None:
    result = simulate(seed=8, shards=3, operations=300)
    batches = event_batches(merged_events(result, seed=8), 90)
    _write(tmp_path / "tasks", batches, buckets=5, tasks=2)
    assert collections_state(tmp_path / "tasks") == expected_state(result)
    driver = driver_collection_tables(tmp_path / "driver", batches)
    assert_same_tables(collection_tables(tmp_path / "tasks"), driver)


def test_an_empty_share_hands_on_nothing(tmp_path: Path) -> None:
    options = WriterOptions(root=tmp_path, app_id="a", batch_id=0)
    assert list(StateStage(options)(iter([]))) == []
    assert list(CollectionTasks(options)(iter([]))) == []
