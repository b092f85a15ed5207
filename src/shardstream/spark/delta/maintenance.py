"""Table maintenance: compaction and a log checkpoint every N batches, so files stay few.

Every batch appends at least one Parquet file to the change log and rewrites the mirror's
touched files (a MERGE), so after thousands of micro-batches a table is thousands of small
files and a long JSON log: scans and MERGEs slow down with the file count. Every
``every`` batches (after both of the batch's commits) each table is compacted (delta-rs
``optimize.compact``: small files rewritten into few large ones, one commit) and its log
checkpointed (a Parquet snapshot of the log, so opening the table reads one file, not
every commit).

Why these and not a layout: partitioning either table by a hash of the document id would
multiply each batch's files by the partition count (the small-file problem this solves),
and Z-ordering the mirror by ``_id`` (better data skipping for the MERGE's key lookups)
rewrites the whole table each time; compaction keeps the file count near
``table size / target file size`` at a cost proportional to what changed. (The bucketed
mirror, ``--mirror-layout bucketed``, is partitioned so, but keeps one file per bucket by
construction: a touched bucket is rewritten whole, so it gives compaction nothing to do;
it pays instead with rewriting whole buckets.) Old files stay
on disk until ``vacuum`` (Delta's retention, 7 days by default, protects readers and time
travel); run ``DeltaTable(path).vacuum(dry_run=False)`` on the schedule that suits.

A maintenance commit carries no watermark and no app transaction of its own: the
exactly-once markers of earlier batches are part of the table's log state, which compaction
and checkpoints keep (``commits.committed_watermark`` reads past maintenance commits).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from deltalake import DeltaTable

from shardstream.errors import ConfigurationError


@dataclasses.dataclass(frozen=True, slots=True)
class Maintained:
    """What one maintenance run did to one table.

    Attributes:
        table: the table's path.
        files_before: active data files before compaction.
        files_after: active data files after it.
    """

    table: str
    files_before: int
    files_after: int


def active_files(path: str | Path) -> int:
    """How many data files the table's current version reads."""
    return len(DeltaTable(str(path)).file_uris())


class TableMaintenance:
    """Compacts and checkpoints tables every ``every`` batches (0: never).

    Raises:
        ConfigurationError: a negative ``every``.
    """

    def __init__(self, every: int) -> None:
        if every < 0:
            raise ConfigurationError(f"expected --optimize-every N with N >= 0, got {every}")
        self.every = every

    def due(self, batch_id: int) -> bool:
        """Whether maintenance runs after batch ``batch_id`` (ids count from 0)."""
        return self.every > 0 and (batch_id + 1) % self.every == 0

    def run(self, paths: list[Path]) -> list[Maintained]:
        """Compact, then checkpoint, each existing table of ``paths``."""
        done: list[Maintained] = []
        for path in paths:
            if not DeltaTable.is_deltatable(str(path)):
                continue
            table = DeltaTable(str(path))
            before = len(table.file_uris())
            table.optimize.compact()
            table.create_checkpoint()
            done.append(Maintained(str(path), before, len(table.file_uris())))
        return done
