"""Sync: what a run is told (:class:`SyncOptions`) and how it ended (:class:`SyncResult`).

Both print without secrets: their ``repr`` (and so ``str``, and any log line showing
them) has every URI's password replaced by ``***``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.cluster_sync.batch_applier import CONFLICT_POLICIES
from shardstream.cluster_sync.compare_clusters import VerifyReport
from shardstream.cluster_sync.initial_copy import COPY_BATCH, COPY_RANGE_DOCS
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.sync_cutover import DEFAULT_COMMIT_TIMEOUT_S
from shardstream.cluster_sync.target_retry import DEFAULT_RETRY_FOR_S
from shardstream.errors import ConfigurationError
from shardstream.oplog.live.cluster import TAILERS
from shardstream.oplog.redaction import redacted_repr

# A batch costs its own writes plus a fixed part (a bulk write per namespace and kind, the
# checkpoint, the lanes' hand-off). A batch leaves as soon as nothing more is ready, so only
# a backlog fills one; then 5000 events rather than 1000 take 2-4 % off the sync's
# instructions per event (benchmarks/README.md, "Instructions per event").
DEFAULT_BATCH: Final = 5000
# How long the first contact with each cluster may take before the sync says it is
# unreachable (the driver's own default, 30 s, is a long wait for a typo).
DEFAULT_CONNECT_TIMEOUT_S: Final = 10.0
# After --idle-exit's quiet time, how long the sync waits for the applied time to reach
# the source's time read then. Three times mongod's periodicNoopIntervalSecs (10 s): an
# idle shard's no-op lets the merge pass the other shards' last writes within one.
DEFAULT_IDLE_EXIT_WAIT_S: Final = 30.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SyncOptions:
    """What to sync and how (the CLI's options; see ``shardstream sync --help``).

    Attributes:
        source / target: mongos (or replica-set) URIs.
        namespaces: scope and ``--map`` rules.
        sync_id: the checkpoint's key: several syncs may share a target.
        writers: parallel writers (None: the number of source shards).
        transactions: apply a source transaction inside one target transaction.
        on_conflict: ``fail``, ``overwrite`` or ``skip``.
        shard_target: shard on the target what is sharded on the source, alike: the
            collections sharded at T0 before their copy, and ``shardCollection`` events.
        batch_size: events per applied batch (one checkpoint each).
        copy_readers: pieces (collections, or ``_id`` ranges of big ones) copied at once
            in phase 1.
        copy_batch: documents per bulk insert of the copy.
        copy_range_docs: a collection with at least twice this many documents is copied
            in ``_id`` ranges of about this many or more.
        idle_exit_s: once no event arrived for this long, read the source's time and stop
            as soon as everything up to it is applied (None: run until stopped).
        idle_exit_wait_s: how long, after that, the applied time may take to reach the
            source's time; past it the sync stops behind (``SyncResult.caught_up`` False).
        connect_timeout_s: how long the first contact with each cluster may take.
        retry_for_s: how long a target that went away is retried.
        idle_noop_interval_s: write a no-op to a source shard idle this long (None: off).
        restart: forget the stored checkpoint first (a new initial copy).
        start_at: skip the initial copy and stream from this cluster time (the target
            already holds the source's data as of it, e.g. restored from a backup).
        verify_after_copy: once the stream has first caught up after this run's copy
            (a batch found nothing ready), compare source and target (``verify``) and
            report it; exact when the source was quiet meanwhile.
        write_blocking: a commit blocks the source's user writes (``setUserWriteBlockMode``);
            False: the user promises to have stopped them (``--no-write-blocking``).
        commit_timeout_s: how long a commit may take to apply up to the source's time
            after the block before it fails (and lifts the block).
        reversible: once committed, the sync may be reversed (``Migration.reverse``):
            the target synced back into the source from the commit on. Refused with
            ``--map`` rules (the reverse would need them inverted; not done yet).
        tailer: ``thread`` or ``process``: each source shard tailed by a thread of the
            sync or by a child process (``watch()``'s ``tailer``), which takes the tailing
            off the sync's process, for sources with many shards.
    """

    source: str
    target: str
    namespaces: NamespaceMap = dataclasses.field(default_factory=NamespaceMap)
    sync_id: str = "default"
    writers: int | None = None
    transactions: bool = True
    on_conflict: str = "fail"
    shard_target: bool = False
    batch_size: int = DEFAULT_BATCH
    copy_readers: int = 4
    copy_batch: int = COPY_BATCH
    copy_range_docs: int = COPY_RANGE_DOCS
    idle_exit_s: float | None = None
    idle_exit_wait_s: float = DEFAULT_IDLE_EXIT_WAIT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    retry_for_s: float = DEFAULT_RETRY_FOR_S
    idle_noop_interval_s: float | None = None
    start_at: Timestamp | None = None
    restart: bool = False
    verify_after_copy: bool = False
    write_blocking: bool = True
    commit_timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S
    reversible: bool = False
    tailer: str = "thread"

    def __post_init__(self) -> None:
        # Refused here, before a run: a zero or an empty value would otherwise surface
        # as an odd failure mid-sync, or be read as "the default".
        if not self.sync_id:
            raise ConfigurationError("expected a non-empty --sync-id, got an empty value")
        if self.on_conflict not in CONFLICT_POLICIES:
            raise ConfigurationError(
                f"expected --on-conflict in {', '.join(CONFLICT_POLICIES)}, "
                f"got {self.on_conflict!r}"
            )
        if self.tailer not in TAILERS:
            raise ConfigurationError(
                f"expected --tailer in {', '.join(TAILERS)}, got {self.tailer!r}"
            )
        counts = {
            "--writers": self.writers,
            "--batch-size": self.batch_size,
            "--copy-readers": self.copy_readers,
            "--copy-batch": self.copy_batch,
            "--copy-range-docs": self.copy_range_docs,
        }
        for flag, count in counts.items():
            if count is not None and count < 1:
                raise ConfigurationError(f"expected {flag} of at least 1, got {count}")
        seconds = {
            "--idle-exit": self.idle_exit_s,
            "--idle-exit-wait": self.idle_exit_wait_s,
            "--connect-timeout": self.connect_timeout_s,
            "--idle-noop-interval": self.idle_noop_interval_s,
            "retry_for_s": self.retry_for_s,
            "--commit-timeout": self.commit_timeout_s,
        }
        for flag, value in seconds.items():
            if value is not None and not value >= 0:  # NaN too
                raise ConfigurationError(f"expected {flag} seconds >= 0, got {value}")
        if self.reversible and self.namespaces.rules:
            raise ConfigurationError(
                "expected --reversible without --map: a reverse sync would need the rules "
                f"inverted, which is not done yet; got {len(self.namespaces.rules)} rule(s)"
            )
        if not self.connect_timeout_s > 0:
            raise ConfigurationError(
                f"expected --connect-timeout above 0 s, got {self.connect_timeout_s}"
            )

    def __repr__(self) -> str:
        # The generated repr would print both URIs with their passwords.
        return redacted_repr(self)


@dataclasses.dataclass(frozen=True, slots=True)
class SyncResult:
    """How a sync run ended: documents copied, events applied, the last checkpoint, and
    whether the target had caught up with the source when it stopped.

    Attributes:
        applied_through: the cluster time the target holds everything before (the
            stored checkpoint's), None when nothing was copied or applied.
        source_time: the source's newest majority-committed time (the highest of its
            shards' majority points) read as the sync stopped; None if unread.
    """

    copied: int
    applied: int
    conflicts: int
    token: Mapping[str, Any] | None
    t0: Timestamp
    copy_verify: VerifyReport | None = None  # with ``verify_after_copy``, once caught up
    applied_through: Timestamp | None = None
    source_time: Timestamp | None = None

    @property
    def caught_up(self) -> bool:
        """Whether everything the source had committed when the sync stopped is applied."""
        return (
            self.applied_through is not None
            and self.source_time is not None
            and self.applied_through >= self.source_time
        )

    def behind_text(self) -> str:
        """Where the target stands against the source, in one line."""
        if self.caught_up:
            return f"caught up with the source at cluster time {_ts(self.source_time)}"
        if self.source_time is None:
            return "the source's cluster time could not be read, so the target may be behind"
        behind = self.source_time.time - (self.applied_through or self.t0).time
        return (
            f"behind the source: applied through cluster time {_ts(self.applied_through)}, "
            f"the source had committed up to {_ts(self.source_time)} ({behind} s later)"
        )


def _ts(ts: Timestamp | None) -> str:
    return "-" if ts is None else f"{ts.time},{ts.inc}"
