"""``shardstream ingest --no-mirror``: the change log written by Spark's tasks, committed by
the driver once per batch, exactly once, and equal to the reference pipeline's rows."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from shardstream.cli.ingest_options import source_options
from shardstream.cli.main import _build_parser
from shardstream.spark.delta import commits
from shardstream.spark.delta.changelog.table import CHANGELOG_SCHEMA, CHANGELOG_TABLE
from shardstream.spark.delta.changelog.task_files import (
    commit_changelog_files,
    create_changelog,
    write_changelog_file,
)
from shardstream.spark.delta.commits import open_table, table_rows
from shardstream.spark.delta.sink import CrashPoint
from shardstream.spark.ingest.progress import IngestProgress
from shardstream.spark.ingest.query import run_ingest
from shardstream.spark.ingest.settings import IngestSettings
from shardstream.spark.source.rows import PUBLIC_COLUMNS
from tests.spark.ingest_runs import ingest_process, killed_in_process
from tests.spark.lakehouse_checks import (
    event_batches,
    merged_events,
    simulate,
    simulated_input,
)

SIMULATION = {"seed": 21, "shards": 4, "operations": 200}


def _reference_rows(events: list[Any]) -> list[dict[str, Any]]:
    """The reference pipeline's change-log rows for ``events``, in token order."""
    table = pa.concat_tables(event_batches(events, 10_000))
    rows: list[dict[str, Any]] = (
        table.select(list(PUBLIC_COLUMNS)).cast(CHANGELOG_SCHEMA).to_pylist()
    )
    return rows


def _stored_rows(root: Path) -> list[dict[str, Any]]:
    table = table_rows(DeltaTable(str(root / CHANGELOG_TABLE)))
    rows: list[dict[str, Any]] = table.sort_by("_id").cast(CHANGELOG_SCHEMA).to_pylist()
    return rows


def _referenced(root: Path) -> set[str]:
    return {Path(uri).name for uri in DeltaTable(str(root / CHANGELOG_TABLE)).file_uris()}


def _parquet_files(root: Path) -> set[str]:
    return {path.name for path in (root / CHANGELOG_TABLE).glob("*.parquet")}


@pytest.mark.spark
@pytest.mark.parametrize(("source", "mode"), [("simulate", "merged"), ("files", "perShard")])
def test_the_tasks_write_the_reference_change_log_one_commit_per_batch(
    spark: Any, tmp_path: Path, source: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    given, _, events = simulated_input(source, tmp_path, **SIMULATION)
    options = {**given, "partitionMode": mode, "maxEventsPerTrigger": "120"}
    root = tmp_path / "lake"
    settings = IngestSettings(table=root, source_options=options, bounded=True, mirror=False)
    opened: list[Path] = []

    def counted(path: str | Path) -> DeltaTable | None:
        opened.append(Path(path))
        return open_table(path)

    monkeypatch.setattr(commits, "open_table", counted)
    totals = run_ingest(spark, settings, IngestProgress(io.StringIO(), interactive=False))
    # The driver opens the change log once it exists (a first batch looks, finds none, and
    # opens it after its commit); later batches only read the commits new since.
    assert 1 <= opened.count(root / CHANGELOG_TABLE) <= 2
    assert totals.events == totals.changelog_rows == len(events)
    assert totals.watermark == events[-1].token.data
    assert _stored_rows(root) == _reference_rows(events)
    history = DeltaTable(str(root / CHANGELOG_TABLE)).history()
    batches = [commit for commit in history if commit.get("shardstream.batchId") is not None]
    assert len(batches) == totals.batches > 1
    # Only the change log: no mirror, state or collection table.
    assert sorted(path.name for path in root.iterdir()) == ["_checkpoint", CHANGELOG_TABLE]
    assert _referenced(root) == _parquet_files(root)


def test_a_file_no_commit_names_is_never_read_and_a_batch_commits_once(tmp_path: Path) -> None:
    """A task that died (or a driver killed before committing) leaves a file nobody reads;
    the replayed batch's files commit once, and a second commit of the batch is refused."""
    events = merged_events(simulate(**SIMULATION))
    halves = event_batches(events[:100], 50)
    create_changelog(tmp_path)
    orphan = write_changelog_file(tmp_path, halves[0], None)  # never committed
    replayed = [write_changelog_file(tmp_path, half, None) for half in halves]
    assert commit_changelog_files(tmp_path, replayed, "app", 0)
    again = [write_changelog_file(tmp_path, half, None) for half in halves]
    assert not commit_changelog_files(tmp_path, again, "app", 0)
    assert orphan.name not in _referenced(tmp_path)
    assert _stored_rows(tmp_path) == _reference_rows(events[:100])
    # A later batch's task drops what the table holds (a restart without the checkpoint).
    overlap = write_changelog_file(
        tmp_path, event_batches(events[80:120], 40)[0], events[99].token.data
    )
    assert (overlap.events, overlap.rows) == (40, 20)
    assert commit_changelog_files(tmp_path, [overlap], "app", 1)
    assert _stored_rows(tmp_path) == _reference_rows(events[:120])


def test_each_change_log_file_is_bounded_by_its_first_and_last_token(tmp_path: Path) -> None:
    """The files' statistics hold their tokens' range (a token is longer than the typed
    tables' string bounds): a reader pruning by ``_id`` skips files and still finds every
    row."""
    events = merged_events(simulate(**SIMULATION))[:120]
    create_changelog(tmp_path)
    files = [write_changelog_file(tmp_path, part, None) for part in event_batches(events, 40)]
    assert commit_changelog_files(tmp_path, files, "app", 0)
    table = DeltaTable(str(tmp_path / CHANGELOG_TABLE))
    actions = pa.table(table.get_add_actions(flatten=True))
    tokens = [event.token.data for event in events]
    bounds = sorted(
        zip(actions["min._id"].to_pylist(), actions["max._id"].to_pylist(), strict=True)
    )
    assert bounds == [(tokens[start], tokens[start + 39]) for start in (0, 40, 80)]
    for token in tokens[::7]:
        found = (
            QueryBuilder()
            .register("c", table)
            .execute(f"SELECT count(*) AS n FROM c WHERE _id >= '{token}'")
        )
        assert pa.table(found.read_all())["n"].to_pylist() == [len(tokens) - tokens.index(token)]


@pytest.mark.spark
def test_a_killed_task_fails_the_batch_and_the_rerun_writes_it_once(
    spark: Any, tmp_path: Path
) -> None:
    """SIGKILL of a task after it wrote its file (batch 1): the run fails, the rerun
    replays the batch, and the change log ends with every event once, the killed attempt's
    file never read.  (A kill of the driver before its commit leaves the same: files no
    commit names; the seeded kill loop of ``test_kill_ingest.py`` takes that point.)"""
    options, _, events = simulated_input("simulate", tmp_path, **SIMULATION)
    settings = IngestSettings(
        table=tmp_path / "lake",
        source_options={**options, "maxEventsPerTrigger": "120"},
        bounded=True,
        mirror=False,
    )
    app = killed_in_process(spark, settings, CrashPoint.IN_BATCH, 1)
    table = DeltaTable(str(settings.table / CHANGELOG_TABLE))
    assert table.transaction_version(f"{app}:{CHANGELOG_TABLE}") == 0  # no commit
    run_ingest(spark, settings, IngestProgress(io.StringIO(), interactive=False))
    assert _stored_rows(settings.table) == _reference_rows(events)
    assert _referenced(settings.table) < _parquet_files(settings.table)


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_a_driver_killed_after_its_commit_replays_the_batch_as_done(
    spark: Any, tmp_path: Path
) -> None:
    """SIGKILL of the driver (the CLI's process) after batch 1's commit, before Spark's
    commit log: the rerun (here in this process, with the CLI's options) replays batch 1,
    finds it committed, writes nothing for it, and ends with every event once."""
    simulation = {"shards": 3, "entries": 300, "seed": 5}
    events = merged_events(simulate(seed=5, shards=3, operations=300))
    root = tmp_path / "lake"
    run = ingest_process(
        root, simulation, batch=100, crash="after-commits:1", extra=["--no-mirror"]
    )
    assert run.returncode != 0
    flags = [f"--{name}={value}" for name, value in simulation.items()]
    argv = ["ingest", "--table", str(root), "--simulate", *flags, "--no-mirror"]
    args = _build_parser().parse_args([*argv, "--max-events-per-batch", "100"])
    settings = IngestSettings(
        table=root, source_options=source_options(args), bounded=True, mirror=False
    )
    totals = run_ingest(spark, settings, IngestProgress(io.StringIO(), interactive=False))
    assert totals.batches >= 2  # batch 1 again (as done), then the rest
    history = DeltaTable(str(root / CHANGELOG_TABLE)).history()
    committed = [
        commit["shardstream.batchId"] for commit in history if "shardstream.batchId" in commit
    ]
    assert sorted(committed) == sorted(set(committed))  # each batch committed once ...
    assert "1" in committed  # ... batch 1 among them, by the killed run
    assert _stored_rows(root) == _reference_rows(events)
    assert _referenced(root) == _parquet_files(root)
