"""The per-collection layout (the default) written by Spark's tasks: the state's buckets
applied by one round of tasks, each collection's typed mirror and history by another, the
change log and the state committed by the driver.  The oracle is the in-driver sink on the
same events: the same rows in every table, in merged and per-shard modes, and after kills.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from shardstream.errors import ConfigurationError
from shardstream.spark.delta.changelog.table import CHANGELOG_TABLE
from shardstream.spark.delta.commits import table_rows
from shardstream.spark.delta.mirror.bucketed.bucket_table import create_bucketed_mirror, is_bucketed
from shardstream.spark.delta.mirror.check import collection_tables, collections_state, read_table
from shardstream.spark.delta.sink import CrashPoint, LakehouseSink
from shardstream.spark.delta.typed.paths import (
    HISTORY_DIR,
    MIRROR_DIR,
    STATE_TABLE,
    collections_of,
    table_name,
    table_path,
)
from shardstream.spark.ingest import MirrorLayout
from shardstream.spark.ingest.progress import IngestProgress
from shardstream.spark.ingest.query import run_ingest, tables_written_by_tasks
from shardstream.spark.ingest.settings import IngestSettings
from tests.spark.collection_checks import assert_same_tables, driver_collection_tables
from tests.spark.ingest_runs import killed_in_process
from tests.spark.lakehouse_checks import event_batches, expected_state, simulated_input

SIMULATION = {"seed": 33, "shards": 3, "operations": 200}


def _settings(root: Path, options: dict[str, str]) -> IngestSettings:
    limit = {"maxEventsPerTrigger": "150"}
    return IngestSettings(table=root, source_options={**options, **limit}, bounded=True)


@pytest.mark.spark
@pytest.mark.parametrize(("source", "mode"), [("simulate", "merged"), ("files", "perShard")])
def test_the_tasks_write_the_drivers_collection_tables(
    spark: Any, tmp_path: Path, source: str, mode: str
) -> None:
    given, result, events = simulated_input(source, tmp_path, **SIMULATION)
    root = tmp_path / "lake"
    settings = _settings(root, {**given, "partitionMode": mode})
    assert tables_written_by_tasks(settings)
    totals = run_ingest(spark, settings, IngestProgress(io.StringIO(), interactive=False))
    assert totals.events == totals.changelog_rows == len(events)
    assert totals.batches > 1
    assert is_bucketed(root / STATE_TABLE)
    assert sorted(read_table(root, CHANGELOG_TABLE)["_id"].to_pylist()) == sorted(
        event.token.data for event in events
    )
    assert collections_state(root) == expected_state(result)
    # Batches cut elsewhere (one batch) by the driver's sink: the same rows everywhere.
    driver = driver_collection_tables(tmp_path / "driver", event_batches(events, 100_000))
    assert_same_tables(collection_tables(root), driver)
    state = table_rows(DeltaTable(str(root / STATE_TABLE)))
    assert state.num_rows == sum(len(docs) for docs in expected_state(result).values())


@pytest.mark.spark
def test_a_collection_task_killed_after_its_commits_is_replayed_into_the_tables_that_lack_it(
    spark: Any, tmp_path: Path
) -> None:
    """SIGKILL of a collection task after its tables committed batch 1 (the state and the
    change log did not): the run fails, the rerun replays the batch, each collection table
    that has it skips it, and every table ends as the driver's sink makes it.  (A state
    task's kill and the commit's, with this layout: ``test_kill_ingest.py``.)"""
    options, result, events = simulated_input("simulate", tmp_path, **SIMULATION)
    settings = _settings(tmp_path / "lake", options)
    app = killed_in_process(spark, settings, CrashPoint.IN_COLLECTIONS, 1)
    state = DeltaTable(str(settings.table / STATE_TABLE))
    assert state.transaction_version(f"{app}:{STATE_TABLE}") == 0
    held = [
        DeltaTable(str(table_path(settings.table, kind, *name))).transaction_version(
            f"{app}:{table_name(kind, *name)}"
        )
        for kind in (MIRROR_DIR, HISTORY_DIR)
        for name in collections_of(settings.table, kind)
    ]
    assert 1 in held  # a collection task committed batch 1 before it died
    run_ingest(spark, settings, IngestProgress(io.StringIO(), interactive=False))
    assert sorted(read_table(settings.table, CHANGELOG_TABLE)["_id"].to_pylist()) == sorted(
        event.token.data for event in events
    )
    assert collections_state(settings.table) == expected_state(result)
    driver = driver_collection_tables(tmp_path / "driver", event_batches(events, 100_000))
    assert_same_tables(collection_tables(settings.table), driver)


def test_who_writes_the_collection_tables_follows_the_lakehouses_state(tmp_path: Path) -> None:
    """A new lakehouse: the tasks (the driver's sink with --mirror-workers); one whose state
    the driver wrote: the driver's sink; one whose state is bucketed: the tasks, and
    --mirror-workers refused rather than ignored."""
    options = {"simulate": "true"}
    fresh = IngestSettings(table=tmp_path / "new", source_options=options, bounded=True)
    assert tables_written_by_tasks(fresh)
    assert not tables_written_by_tasks(dataclasses.replace(fresh, mirror_workers=2))
    driver = dataclasses.replace(fresh, table=tmp_path / "driver")
    LakehouseSink(driver.table, "app", layout=MirrorLayout.COLLECTIONS).write_batch(
        event_batches(simulated_input("simulate", tmp_path, **SIMULATION)[2], 50)[0], 0
    )
    assert not tables_written_by_tasks(driver)
    tasks = dataclasses.replace(fresh, table=tmp_path / "tasks")
    create_bucketed_mirror(tasks.table / STATE_TABLE, 4)
    assert tables_written_by_tasks(tasks)
    with pytest.raises(ConfigurationError, match="whose document state Spark's tasks write"):
        _ = tables_written_by_tasks(dataclasses.replace(tasks, mirror_workers=2))
