"""The change log written where its rows are: Parquet files from the tasks, one commit.

In a Spark task, :func:`write_changelog_file` writes the task's events newer than the
table's watermark into one Parquet file in the table's directory (sorted by token) and says
what the Delta log needs to add it (:class:`ChangelogFile`).  On the driver,
:func:`commit_changelog_files` adds a batch's files in one Delta commit carrying the batch
markers of :mod:`shardstream.spark.delta.commits`, so the exactly-once rule is the
in-driver change log's: a replayed batch the table already holds commits nothing.  A file no
commit names (its task failed, or the driver died before committing) is never read; vacuum
removes it.  The driver handles file names, never rows.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.transaction import AddAction, RemoveAction

from shardstream.spark.delta.changelog.table import (
    CHANGELOG_SCHEMA,
    CHANGELOG_TABLE,
    newer_than,
)
from shardstream.spark.delta.commits import (
    WATERMARK_KEY,
    BatchCommit,
    already_committed,
    batch_metadata,
    committed_watermark,
    open_table,
    write_data_file,
)
from shardstream.spark.delta.file_stats import file_statistics
from shardstream.spark.source.rows import PUBLIC_COLUMNS

ROWS_KEY: Final = "shardstream.rows"  # a commit's rows, and the events its tasks were given
EVENTS_KEY: Final = "shardstream.events"


@dataclasses.dataclass(frozen=True, slots=True)
class ChangelogFile:
    """What one task wrote.

    Attributes:
        name: the Parquet file's name in the table's directory (None: no row was new).
        size: its bytes.
        rows: the rows it holds.
        stats: its Delta statistics (JSON; the token ``_id``'s bounds among them).
        events: the events the task was given (rows plus those at or below the watermark).
        last_event: the newest token among them (None: none), the batch's watermark's part.
    """

    name: str | None
    size: int
    rows: int
    stats: str
    events: int
    last_event: str | None


def write_changelog_file(
    root: str | Path, events: pa.Table, watermark: str | None
) -> ChangelogFile:
    """Write a task's events (``EVENT_SCHEMA`` columns) newer than ``watermark`` into one
    file of the change log under the lakehouse ``root``."""
    if events.num_rows == 0:
        return ChangelogFile(None, 0, 0, "", 0, None)
    last_event: str = pc.max(events["_id"]).as_py()
    fresh = newer_than(events, watermark).select(list(PUBLIC_COLUMNS)).sort_by("_id")
    if fresh.num_rows == 0:
        return ChangelogFile(None, 0, 0, "", events.num_rows, last_event)
    rows = fresh.cast(CHANGELOG_SCHEMA)
    written = write_data_file(Path(root) / CHANGELOG_TABLE, "", rows)
    stats = file_statistics(rows, keys=("_id",))
    return ChangelogFile(
        written.path, written.size, fresh.num_rows, stats, events.num_rows, last_event
    )


def create_changelog(root: str | Path) -> None:
    """Create the (empty) change-log table, where there is none yet: the tasks write into
    its directory and the driver's commits need its log."""
    path = Path(root) / CHANGELOG_TABLE
    path.mkdir(parents=True, exist_ok=True)
    DeltaTable.create(str(path), CHANGELOG_SCHEMA, mode="ignore")


def commit_changelog_files(
    root: str | Path, files: Sequence[ChangelogFile], app_id: str, batch_id: int
) -> bool:
    """Add a batch's files to the change log in one commit with the batch's markers.

    Returns:
        Whether this call committed (False: the table already had the batch, or no task
        saw an event).
    """
    table = open_table(Path(root) / CHANGELOG_TABLE)
    if table is None:
        raise FileNotFoundError(f"expected a change-log table under {root}, got none")
    marks = [f.last_event for f in files if f.last_event is not None]
    if not marks:
        return False
    commit = BatchCommit(app_id=app_id, batch_id=batch_id, watermark=max(marks))
    if already_committed(table, commit, CHANGELOG_TABLE):
        return False
    now = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = [
        AddAction(f.name, f.size, {}, now, True, f.stats) for f in files if f.name is not None
    ]
    counts = {ROWS_KEY: sum(f.rows for f in files), EVENTS_KEY: sum(f.events for f in files)}
    properties = commit.properties(CHANGELOG_TABLE, committed_watermark(table), counts)
    table.create_write_transaction(
        actions, mode="append", schema=CHANGELOG_SCHEMA, commit_properties=properties
    )
    return True


def committed_counts(
    table: DeltaTable | None, app_id: str, batch_id: int
) -> tuple[int, int, str] | None:
    """(events, rows, watermark) of the batch's commit when it is the change log's newest
    (None: it is not: the batch committed nothing)."""
    newest = batch_metadata(table, app_id, batch_id)
    if newest is None:
        return None
    return int(newest[EVENTS_KEY]), int(newest[ROWS_KEY]), str(newest[WATERMARK_KEY])
