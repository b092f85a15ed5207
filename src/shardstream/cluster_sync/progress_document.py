"""Sync: the progress document, mongosync's ``/api/v1/progress`` shape.

Built from the run's state (:class:`~shardstream.cluster_sync.sync_control.SyncControl`)
and its last measured numbers (:class:`~shardstream.cluster_sync.sync_progress.ProgressSample`):

- ``state``, ``canCommit`` (streaming: the copy is done), ``canWrite`` (committed: the
  target may take the application's writes), ``error`` (None, or why the run failed or the
  last commit did not finish);
- ``lagTimeSeconds``: the source's newest committed time (its shards' majority points,
  read about once a second) minus the applied time, whole seconds, 0 when caught up, None
  before the stream phase has measured it; 0 once committed (every write the source took
  before its block is applied, and its later no-ops are not lag);
- ``appliedClusterTime`` / ``sourceClusterTime`` as ``{"t": seconds, "i": increment}``;
- ``documentsCopied`` / ``estimatedDocuments`` (the copy), ``eventsApplied`` (this run),
  ``conflicts`` (writes skipped or overwritten by ``--on-conflict``), ``retries`` (target
  writes sent again, this process);
- ``shards``: each source shard's position in the merge and how far it is behind the
  source's time; ``syncId``.

:class:`~shardstream.cluster_sync.migration.Migration` adds ``direction`` (``forward``,
or ``reverse`` once reversed) and ``canReverse``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bson.timestamp import Timestamp

from shardstream.cluster_sync.sync_control import COMMITTED, STREAMING, SyncControl
from shardstream.cluster_sync.sync_progress import ProgressSample
from shardstream.cluster_sync.target_retry import TARGET_RETRIES


def cluster_time(ts: Timestamp | None) -> dict[str, int] | None:
    """A cluster time as ``{"t": seconds, "i": increment}`` (None stays None)."""
    return None if ts is None else {"t": ts.time, "i": ts.inc}


def _behind(newest: Timestamp | None, ts: Timestamp | None) -> int | None:
    if newest is None or ts is None:
        return None
    return max(0, newest.time - ts.time)


def progress_document(
    control: SyncControl, sample: ProgressSample, *, sync_id: str, conflicts: int
) -> dict[str, Any]:
    """The progress document of a run in ``control``'s state with ``sample``'s numbers."""
    state, error = control.state, control.error
    source = sample.source_time
    shards: Mapping[str, Any] = {
        name: {"position": cluster_time(ts), "lagSeconds": _behind(source, ts)}
        for name, ts in sorted(sample.positions.items())
    }
    return {
        "state": state,
        "canCommit": state == STREAMING,
        "canWrite": state == COMMITTED,
        "lagTimeSeconds": 0 if state == COMMITTED else _behind(source, sample.applied_through),
        "appliedClusterTime": cluster_time(sample.applied_through),
        "sourceClusterTime": cluster_time(source),
        "documentsCopied": sample.copied,
        "estimatedDocuments": sample.estimated,
        "eventsApplied": sample.applied,
        "conflicts": conflicts,
        "retries": TARGET_RETRIES.value,
        "shards": shards,
        "syncId": sync_id,
        "error": error,
    }
