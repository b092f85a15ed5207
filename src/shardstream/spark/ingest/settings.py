"""One ingest run's settings (:class:`IngestSettings`), and the app id its checkpoint gives
the tables' exactly-once markers (:func:`checkpoint_app_id`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from shardstream.errors import ConfigurationError
from shardstream.oplog.redaction import redacted_repr
from shardstream.spark.delta.sink import CrashPoint
from shardstream.spark.ingest import (
    DEFAULT_BUCKETS,
    DEFAULT_MAX_COLUMNS,
    DEFAULT_MIRROR_WORKERS,
    DEFAULT_OPTIMIZE_EVERY,
    MirrorLayout,
)
from shardstream.spark.ingest.snapshot import check_snapshot_options

CHECKPOINT_DIR: Final = "_checkpoint"
APP_PREFIX: Final = "shardstream"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class IngestSettings:
    """One ingest run.

    Attributes:
        table: the lakehouse root (``changelog`` and ``mirror`` tables live under it).
        source_options: options of the ``shardstream`` data source (uri / oplog /
            simulate, scope, start, maxEventsPerTrigger, partitionMode ...).
        bounded: the input ends by itself (files, simulated): run ``availableNow``.
        checkpoint: Spark's checkpoint directory (default ``<table>/_checkpoint``).
        trigger_interval: a live run's micro-batch interval.
        strict: the mirror refuses updates of documents it never held.
        optimize_every: compact and checkpoint both tables every this many batches (0: never).
        mirror_workers: processes preparing a large batch's mirror, a part of its documents
            each (0 or 1: the driver alone). Workers are spawned: a driver script must keep
            its work under ``if __name__ == "__main__":``.
        snapshot: load the live source's documents as of T0 into both tables first (once),
            then stream from T0; needs a ``uri`` and no start option.
        crash_at_for_test: SIGKILL the process at this point of this batch (kill tests).
        mirror_layout: typed per-collection tables (and histories), or one mirror table.
        history: the per-collection layout keeps each collection's SCD2 history.
        max_columns: the most field columns a collection table gets.
        mirror: keep the mirror (and the collections' tables); without it the change log
            alone is written, by Spark's tasks, the driver committing each batch's files.
        mirror_buckets: the bucket count of the bucketed layout's mirror, or of the
            per-collection layout's document state when Spark's tasks write it, when the
            ingest creates the table (an existing table keeps its own).

    Raises:
        ConfigurationError: ``snapshot`` with anything but a live cluster, or with a start;
            ``snapshot`` or ``mirror_workers`` with the bucketed layout.
    """

    table: Path
    source_options: Mapping[str, str]
    bounded: bool
    checkpoint: Path | None = None
    trigger_interval: str = "1 second"
    strict: bool = True
    optimize_every: int = DEFAULT_OPTIMIZE_EVERY
    mirror_workers: int = DEFAULT_MIRROR_WORKERS
    snapshot: bool = False
    crash_at_for_test: tuple[CrashPoint, int] | None = None
    mirror_layout: MirrorLayout = MirrorLayout.COLLECTIONS
    history: bool = True
    max_columns: int = DEFAULT_MAX_COLUMNS
    mirror: bool = True
    mirror_buckets: int = DEFAULT_BUCKETS

    def __post_init__(self) -> None:
        if self.snapshot and not self.mirror:
            raise ConfigurationError("expected --snapshot with a mirror, got --no-mirror")
        if self.mirror_layout is MirrorLayout.BUCKETED and (
            self.snapshot or self.mirror_workers > 1
        ):
            raise ConfigurationError(
                "expected neither --snapshot nor --mirror-workers with --mirror-layout bucketed "
                "(Spark's tasks apply its events; a snapshot's documents are not yet loaded "
                "by them)"
            )
        if self.snapshot:
            check_snapshot_options(self.source_options)

    def __repr__(self) -> str:
        # source_options holds the live source's uri: the generated repr would print it.
        return redacted_repr(self)

    @property
    def checkpoint_path(self) -> Path:
        """Where Spark keeps the query's offsets and commits."""
        return self.checkpoint or self.table / CHECKPOINT_DIR


def checkpoint_app_id(checkpoint: Path) -> str:
    """``shardstream:<query id>`` from a started query's checkpoint metadata.

    A deleted or new checkpoint gets a new query id, hence a new app: its batch ids
    restart at 0 and must never be compared with the old app's.
    """
    metadata = checkpoint / "metadata"
    try:
        query_id = json.loads(metadata.read_text())["id"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(
            f"expected Spark checkpoint metadata with a query id at {metadata}, got none ({exc})"
        ) from exc
    return f"{APP_PREFIX}:{query_id}"
