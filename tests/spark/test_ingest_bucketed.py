"""``shardstream ingest --mirror-layout bucketed``: the change log and the bucketed mirror
written by Spark's tasks, each batch committed once per table by the driver; the mirror
equal to the in-driver mirror's rows and to the simulator's final data, in merged and
per-shard modes, and after kills."""

from __future__ import annotations

import dataclasses
import io
import signal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.errors import StreamingQueryException

from shardstream.cli.ingest_options import source_options
from shardstream.cli.main import _build_parser
from shardstream.spark.delta.changelog.table import CHANGELOG_TABLE
from shardstream.spark.delta.commits import table_rows, watermark_cluster_time
from shardstream.spark.delta.mirror.bucketed.bucket_writer import EVENT_BUCKET
from shardstream.spark.delta.mirror.check import mirror_state, read_table
from shardstream.spark.delta.mirror.prepare import MERGE_KEY_ORDER, MIRROR_SCHEMA
from shardstream.spark.delta.mirror.table import MIRROR_TABLE
from shardstream.spark.delta.sink import CrashPoint, LakehouseSink
from shardstream.spark.ingest import MirrorLayout
from shardstream.spark.ingest.progress import IngestProgress
from shardstream.spark.ingest.query import run_ingest
from shardstream.spark.ingest.settings import IngestSettings
from shardstream.spark.ingest.task_batches import by_bucket
from shardstream.spark.ingest.task_writes import LOGGED
from tests.spark.ingest_runs import ingest_process, killed_in_process
from tests.spark.lakehouse_checks import (
    driver_mirror_rows,
    event_batches,
    expected_state,
    merged_events,
    simulate,
    simulated_input,
)

SIMULATION = {"seed": 21, "shards": 4, "operations": 200}
_KEY_DDL = "documentKey string, _id string"


def _mirror_rows(root: Path) -> list[dict[str, Any]]:
    table = table_rows(DeltaTable(str(root / MIRROR_TABLE)), MIRROR_SCHEMA.names)
    rows: list[dict[str, Any]] = table.cast(MIRROR_SCHEMA).sort_by(MERGE_KEY_ORDER).to_pylist()
    return rows


def _committed_batches(path: Path) -> list[str]:
    history = DeltaTable(str(path)).history()
    return [commit["shardstream.batchId"] for commit in history if "shardstream.batchId" in commit]


def _settings(root: Path, options: dict[str, str]) -> IngestSettings:
    return IngestSettings(
        table=root,
        source_options={**options, "maxEventsPerTrigger": "150"},
        bounded=True,
        mirror_layout=MirrorLayout.BUCKETED,
        mirror_buckets=4,
    )


@pytest.mark.spark
@pytest.mark.parametrize(("source", "mode"), [("simulate", "merged"), ("files", "perShard")])
def test_the_tasks_write_the_drivers_mirror_one_commit_per_table_and_batch(
    spark: Any, tmp_path: Path, source: str, mode: str
) -> None:
    given, result, events = simulated_input(source, tmp_path, **SIMULATION)
    options = {**given, "partitionMode": mode}
    root = tmp_path / "lake"
    totals = run_ingest(
        spark, _settings(root, options), IngestProgress(io.StringIO(), interactive=False)
    )
    assert totals.events == totals.changelog_rows == len(events)
    assert totals.mirror_upserts > 0
    assert sorted(read_table(root, CHANGELOG_TABLE)["_id"].to_pylist()) == sorted(
        event.token.data for event in events
    )
    assert _mirror_rows(root) == driver_mirror_rows(
        tmp_path / "driver", event_batches(events, 1_000)
    )
    assert mirror_state(read_table(root, MIRROR_TABLE)) == expected_state(result)
    for table in (CHANGELOG_TABLE, MIRROR_TABLE):
        committed = _committed_batches(root / table)
        assert sorted(committed) == sorted(set(committed))
        assert len(committed) == totals.batches > 1


@pytest.mark.spark
def test_a_killed_task_is_replayed_once(spark: Any, tmp_path: Path) -> None:
    """SIGKILL of a task after it wrote its files (batch 1): the run fails, the rerun
    replays the batch, and both tables end exact."""
    options, result, events = simulated_input("simulate", tmp_path, **SIMULATION)
    settings = _settings(tmp_path / "lake", options)
    app = killed_in_process(spark, settings, CrashPoint.IN_BATCH, 1)
    for table in (MIRROR_TABLE, CHANGELOG_TABLE):
        assert DeltaTable(str(settings.table / table)).transaction_version(f"{app}:{table}") == 0
    run_ingest(spark, settings, IngestProgress(io.StringIO(), interactive=False))
    assert sorted(read_table(settings.table, CHANGELOG_TABLE)["_id"].to_pylist()) == sorted(
        event.token.data for event in events
    )
    assert _mirror_rows(settings.table) == driver_mirror_rows(
        tmp_path / "driver", event_batches(events, 1_000)
    )
    assert mirror_state(read_table(settings.table, MIRROR_TABLE)) == expected_state(result)


@pytest.mark.spark
def test_an_update_of_a_document_never_held_is_the_drivers_verdict(
    spark: Any, tmp_path: Path
) -> None:
    """A stream started mid-way: strict, the tasks fail the batch with the in-driver mirror's
    error; lenient, they count the updates they skip, as the in-driver mirror does."""
    given, _, events = simulated_input("simulate", tmp_path, **SIMULATION)
    time = watermark_cluster_time(events[len(events) // 2].token.data)
    options = {**given, "startAtOperationTime": f"{time.time},{time.inc}"}
    strict = _settings(tmp_path / "strict", options)
    with pytest.raises(StreamingQueryException, match="expected the mirror to hold the document"):
        run_ingest(spark, strict, IngestProgress(io.StringIO(), interactive=False))
    lenient = dataclasses.replace(strict, table=tmp_path / "lenient", strict=False)
    totals = run_ingest(spark, lenient, IngestProgress(io.StringIO(), interactive=False))
    later = [event for event in events if event.token_data.cluster_time >= time]
    reference = LakehouseSink(tmp_path / "driver", "app", strict=False, layout=MirrorLayout.SINGLE)
    expected = reference.write_batch(pa.concat_tables(event_batches(later, 1_000)), 0)
    assert expected.mirror is not None
    assert totals.unknown_updates == expected.mirror.unknown_updates > 0
    assert _mirror_rows(tmp_path / "lenient") == _mirror_rows(tmp_path / "driver")


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_a_driver_killed_between_its_commits_completes_the_batch_once(
    spark: Any, tmp_path: Path
) -> None:
    """SIGKILL of the driver (the CLI's process) after batch 1's change-log commit, before
    the mirror's: the rerun (in this process, the CLI's options) replays batch 1 into the
    mirror alone, and both tables end exact, each batch committed once."""
    simulation = {"shards": 3, "entries": 300, "seed": 5}
    result = simulate(seed=5, shards=3, operations=300)
    events = merged_events(result)
    root = tmp_path / "lake"
    bucketed = ["--mirror-layout", "bucketed"]
    run = ingest_process(root, simulation, batch=100, crash="between-commits:1", extra=bucketed)
    assert run.returncode == -signal.SIGKILL, run.stderr[-2000:]
    assert "1" in _committed_batches(root / CHANGELOG_TABLE)
    assert "1" not in _committed_batches(root / MIRROR_TABLE)
    flags = [f"--{name}={value}" for name, value in simulation.items()]
    argv = ["ingest", "--table", str(root), "--simulate", *flags, *bucketed]
    args = _build_parser().parse_args([*argv, "--max-events-per-batch", "100"])
    settings = IngestSettings(
        table=root,
        source_options=source_options(args),
        bounded=True,
        mirror_layout=MirrorLayout.BUCKETED,
    )
    totals = run_ingest(spark, settings, IngestProgress(io.StringIO(), interactive=False))
    assert totals.batches >= 2  # batch 1 again, then the rest
    for table in (CHANGELOG_TABLE, MIRROR_TABLE):
        committed = _committed_batches(root / table)
        assert sorted(committed) == sorted(set(committed))  # each batch committed once ...
        assert "1" in committed  # ... batch 1 among them
    assert sorted(read_table(root, CHANGELOG_TABLE)["_id"].to_pylist()) == sorted(
        event.token.data for event in events
    )
    assert mirror_state(read_table(root, MIRROR_TABLE)) == expected_state(result)


@pytest.mark.spark
def test_every_event_with_a_document_key_goes_to_one_bucket(spark: Any) -> None:
    """Whatever its _id (null included) or a documentKey the mirror will refuse; an event
    with none goes to every bucket and is logged once."""
    keys = ['{"_id": {"$oid": "64b000000000000000000001"}}', '{"_id": null}', "not json", None]
    frame = spark.createDataFrame([(key, f"{n:02d}") for n, key in enumerate(keys)], _KEY_DDL)
    rows = by_bucket(frame, 4, 2).collect()
    copies = {key: [row for row in rows if row["documentKey"] == key] for key in keys[:3]}
    assert all(len(found) == 1 for found in copies.values())
    assert all(row[LOGGED] for found in copies.values() for row in found)
    spread = sorted((row[EVENT_BUCKET], row[LOGGED]) for row in rows if row["documentKey"] is None)
    assert spread == [(0, True), (1, False), (2, False), (3, False)]
