"""The driver's side of the bucketed mirror: a batch's bucket rewrites in one Delta commit.

The tasks of a batch each say which files they wrote and which they replace
(:class:`~shardstream.spark.delta.mirror.bucketed.bucket_writer.BucketWrite`); the driver adds the
new files and removes the replaced ones in one commit carrying the batch markers of
:mod:`shardstream.spark.delta.commits`, so the exactly-once rule is the other tables': a
replayed batch the table already holds commits nothing, and a killed task's files are never
named.  The tasks read the table as of one version; a table that moved since (another
writer) is refused rather than committed over: the tasks' rows would lose its changes.
The commit's own metadata records the batch's counts, read back by the ingest's progress.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from deltalake import DeltaTable
from deltalake.transaction import AddAction, RemoveAction

from shardstream.errors import SinkError
from shardstream.spark.delta.commits import (
    BatchCommit,
    already_committed,
    batch_metadata,
    committed_watermark,
    open_table,
)
from shardstream.spark.delta.mirror.bucketed.bucket_table import BUCKET_COLUMN, BUCKETED_SCHEMA
from shardstream.spark.delta.mirror.bucketed.bucket_writer import BucketWrite
from shardstream.spark.delta.mirror.table import MIRROR_TABLE, MirrorWrite

# MirrorWrite's counts, in the commit's metadata under these keys.
_COUNT_KEYS: Final = {
    "events": "shardstream.events",
    "rows_read": "shardstream.rowsRead",
    "rows_written": "shardstream.rowsWritten",
    "rows_deleted": "shardstream.rowsDeleted",
    "unknown_updates": "shardstream.unknownUpdates",
}


def commit_buckets(
    path: Path,
    version: int,
    writes: Sequence[BucketWrite],
    commit: BatchCommit,
    name: str = MIRROR_TABLE,
) -> bool:
    """Commit a batch's bucket rewrites (read as of ``version``) with its markers, the
    table's name in them ``name`` (the per-collection layout's state: its own).

    Returns:
        Whether this call committed (False: the table already had the batch).

    Raises:
        SinkError: no table at ``path``, or one that moved past ``version``.
    """
    table = open_table(path)
    if table is None:
        raise SinkError(f"expected a bucketed mirror at {path}, got none")
    if already_committed(table, commit, name):
        return False
    if table.version() != version:
        raise SinkError(
            f"expected the bucketed mirror at {path} at version {version}, which the batch's "
            f"tasks read, got version {table.version()}: another writer committed meanwhile"
        )
    now = int(time.time() * 1000)
    actions: list[AddAction | RemoveAction] = []
    for write in writes:
        partition: dict[str, str | None] = {BUCKET_COLUMN: str(write.bucket)}
        for old in write.removed:
            actions.append(RemoveAction(old.path, True, now, old.size, partition))
        if write.added is not None:
            actions.append(
                AddAction(write.added.path, write.added.size, partition, now, True, write.stats)
            )
    counts = {key: sum(getattr(w, name) for w in writes) for name, key in _COUNT_KEYS.items()}
    properties = commit.properties(name, committed_watermark(table), counts)
    table.create_write_transaction(
        actions,
        mode="append",
        schema=BUCKETED_SCHEMA,
        partition_by=[BUCKET_COLUMN],
        commit_properties=properties,
    )
    return True


def committed_write(table: DeltaTable | None, app_id: str, batch_id: int) -> MirrorWrite | None:
    """What the batch's commit recorded when it is the table's newest (None: it is not)."""
    newest = batch_metadata(table, app_id, batch_id)
    if newest is None:
        return None
    counts = {name: int(newest.get(key, 0)) for name, key in _COUNT_KEYS.items()}
    return MirrorWrite(**counts)
