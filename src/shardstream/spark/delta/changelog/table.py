"""Sink: the bronze change log, ``<table>/changelog``: every event, appended once.

One row per change event with every public column of :data:`~shardstream.spark.source.rows.
EVENT_SCHEMA`, in token order within each commit.  Append-only; exactly once through
the batch markers of :mod:`shardstream.spark.delta.commits`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import write_deltalake

from shardstream.spark.delta.commits import (
    BatchCommit,
    already_committed,
    committed_watermark,
    open_table,
    table_rows,
)
from shardstream.spark.source.rows import EVENT_SCHEMA, PUBLIC_COLUMNS

CHANGELOG_TABLE: Final = "changelog"
CHANGELOG_SCHEMA: Final = pa.schema([EVENT_SCHEMA.field(name) for name in PUBLIC_COLUMNS])


class DeltaChangelog:
    """The change-log table under a lakehouse root.

    The watermark is read from the table once and then kept in memory: this object is
    the table's only writer while an ingest runs.
    """

    def __init__(self, root: str | Path) -> None:
        self.path = Path(root) / CHANGELOG_TABLE
        self._watermark: str | None = committed_watermark(open_table(self.path))

    @property
    def watermark(self) -> str | None:
        """The ``_id`` of the last event the table holds (None: empty)."""
        return self._watermark

    def first_event(self) -> str | None:
        """The ``_id`` of the first event the table holds (None: empty); scans one column."""
        table = open_table(self.path)
        if self._watermark is None or table is None:
            return None
        ids = table_rows(table, ["_id"])["_id"]
        first: str | None = pc.min(ids).as_py()
        return first

    def committed(self, commit: BatchCommit) -> bool:
        """Whether the table already holds this batch (Spark replayed it)."""
        return already_committed(open_table(self.path), commit, CHANGELOG_TABLE)

    def append(self, events: pa.Table, commit: BatchCommit) -> int:
        """Append events newer than the table's watermark, with the batch markers.

        Args:
            events: the batch in token order (``EVENT_SCHEMA`` columns; more are ignored).
            commit: the batch's markers.

        Returns:
            The number of rows appended (events at or below the watermark were already
            written by an earlier checkpoint's run and are dropped).
        """
        fresh = newer_than(events, self._watermark).select(list(PUBLIC_COLUMNS))
        write_deltalake(
            str(self.path),
            fresh.cast(CHANGELOG_SCHEMA),
            mode="append",
            commit_properties=commit.properties(CHANGELOG_TABLE, self._watermark),
        )
        self._watermark = commit.advanced(self._watermark)
        appended: int = fresh.num_rows
        return appended


def newer_than(events: pa.Table, watermark: str | None) -> pa.Table:
    """The events whose token sorts after ``watermark`` (all of them when it is None)."""
    if watermark is None:
        return events
    return events.filter(pc.greater(events["_id"], pa.scalar(watermark)))
