"""Sync: the whole job — checkpoint, initial copy, then the merged stream applied in batches.

A batch is what the merged stream has ready (up to ``batch_size`` events); once the
target acknowledged all of it (write concern majority) the stream's resume token is
stored as the checkpoint, so a stop after any batch, or a kill -9 anywhere, resumes
without a gap, and what it replays is harmless.  :meth:`SyncJob.stop` (Ctrl-C in the CLI)
ends the loop after the batch in flight is acknowledged and checkpointed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from bson.timestamp import Timestamp
from pymongo import MongoClient

from shardstream.cluster_sync.batch_applier import BatchApplier
from shardstream.cluster_sync.batch_reader import BatchReader
from shardstream.cluster_sync.checkpoint import Checkpoint, CheckpointStore
from shardstream.cluster_sync.compare_clusters import VerifyReport, verify
from shardstream.cluster_sync.idle_noop import IdleShardNudger
from shardstream.cluster_sync.initial_copy import (
    COPY_BATCH,
    COPY_RANGE_DOCS,
    CopyProgress,
    copy_collections,
)
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.source_catalog import majority_time
from shardstream.cluster_sync.sync_progress import SyncProgress
from shardstream.cluster_sync.target_catalog import refuse_targets_holding_data
from shardstream.cluster_sync.target_retry import DEFAULT_RETRY_FOR_S
from shardstream.errors import ChangeStreamHistoryLost
from shardstream.oplog.redaction import redact_uri
from shardstream.stream import ChangeStream, watch

DEFAULT_BATCH: Final = 1000


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SyncOptions:
    """What to sync and how (the CLI's options; see ``shardstream sync --help``).

    Attributes:
        source / target: mongos (or replica-set) URIs.
        namespaces: scope and ``--map`` rules.
        sync_id: the checkpoint's key: several syncs may share a target.
        writers: parallel writers (None: the number of source shards).
        transactions: apply a source transaction as one target transaction.
        on_conflict: ``fail``, ``overwrite`` or ``skip``.
        shard_target: shard on the target what is sharded on the source, alike: the
            collections sharded at T0 before their copy, and ``shardCollection`` events.
        batch_size: events per applied batch (one checkpoint each).
        copy_readers: pieces (collections, or ``_id`` ranges of big ones) copied at once
            in phase 1.
        copy_batch: documents per bulk insert of the copy.
        copy_range_docs: a collection with at least twice this many documents is copied
            in ``_id`` ranges of about this many or more.
        idle_exit_s: stop once no event arrived for this long (None: run until stopped).
        retry_for_s: how long a target that went away is retried.
        idle_noop_interval_s: write a no-op to a source shard idle this long (None: off).
        restart: forget the stored checkpoint first (a new initial copy).
        start_at: skip the initial copy and stream from this cluster time (the target
            already holds the source's data as of it, e.g. restored from a backup).
        verify_after_copy: once the stream has first caught up after this run's copy
            (a batch found nothing ready), compare source and target (``verify``) and
            report it; exact when the source was quiet meanwhile.
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
    retry_for_s: float = DEFAULT_RETRY_FOR_S
    idle_noop_interval_s: float | None = None
    start_at: Timestamp | None = None
    restart: bool = False
    verify_after_copy: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class SyncResult:
    """How a sync run ended: documents copied, events applied, the last checkpoint."""

    copied: int
    applied: int
    conflicts: int
    token: Mapping[str, Any] | None
    t0: Timestamp
    copy_verify: VerifyReport | None = None  # with ``verify_after_copy``, once caught up


class SyncJob:
    """One sync run; :meth:`run` blocks until :meth:`stop`, idle exit, or an error."""

    def __init__(
        self, options: SyncOptions, *, report: Callable[[str], None] | None = None
    ) -> None:
        """Args: the options, and where progress lines go (None: nowhere)."""
        self.options = options
        self._stopping = threading.Event()
        self._report = report

    def stop(self) -> None:
        """Stop after the batch in flight is applied and checkpointed (thread-safe)."""
        self._stopping.set()

    def run(self) -> SyncResult:
        """Copy (unless a checkpoint says it is done), then apply the stream until stopped.

        Raises:
            ChangeStreamHistoryLost: a shard's oplog no longer reaches the checkpoint;
                a new initial copy is needed (``--restart``).
            SyncConflict: a duplicate key on the target under ``on_conflict="fail"``.
        """
        options = self.options
        source: MongoClient[Any] = MongoClient(options.source)
        target: MongoClient[Any] = MongoClient(options.target)
        try:
            return self._run(source, target)
        finally:
            source.close()
            target.close()

    def _run(self, source: MongoClient[Any], target: MongoClient[Any]) -> SyncResult:
        options = self.options
        store = CheckpointStore(
            target,
            options.sync_id,
            source=redact_uri(options.source),
            retry_for_s=options.retry_for_s,
        )
        checkpoint = None if options.restart else store.load()
        if checkpoint is None and options.start_at is None and options.on_conflict == "fail":
            # Before anything is stored: a new copy refused later would leave its own
            # checkpoint (or none, after --restart) for a rerun to resume over old data.
            refuse_targets_holding_data(source, target, options.namespaces)
        if options.restart:
            store.clear()
        progress = SyncProgress(self._report)
        copied = CopyProgress()
        if checkpoint is None and options.start_at is not None:
            checkpoint = Checkpoint("stream", options.start_at)
            store.save(checkpoint)
        copied_now = checkpoint is None or checkpoint.phase == "copy"
        if copied_now:
            t0 = majority_time(source) if checkpoint is None else checkpoint.t0
            store.save(Checkpoint("copy", t0))
            progress.phase("copy", copied)
            with progress.ticking():
                copy_collections(
                    source,
                    target,
                    options.namespaces,
                    readers=options.copy_readers,
                    on_conflict=options.on_conflict,
                    progress=copied,
                    stopping=self._stopping.is_set,
                    batch=options.copy_batch,
                    range_docs=options.copy_range_docs,
                    shard_target=options.shard_target,
                    report=self._report,
                    at=t0,
                    retry_for_s=options.retry_for_s,
                )
            if self._stopping.is_set():
                return SyncResult(copied.copied, 0, 0, None, t0)
            checkpoint = Checkpoint("stream", t0)
            store.save(checkpoint)
        assert checkpoint is not None  # loaded, or stored by the copy just done
        writers = options.writers or len(source.admin.command("listShards")["shards"])
        applier = BatchApplier(
            target,
            options.namespaces,
            writers=max(1, writers),
            transactions=options.transactions,
            on_conflict=options.on_conflict,
            shard_target=options.shard_target,
            retry_for_s=options.retry_for_s,
        )
        progress.phase("stream", copied)
        checks: list[VerifyReport] = []

        def verify_caught_up() -> None:
            report = verify(source, target, options.namespaces)
            checks.append(report)
            for line in report.lines():
                if self._report is not None:
                    self._report(f"verify, caught up after the copy: {line}")

        after_copy = verify_caught_up if options.verify_after_copy and copied_now else None
        try:
            applied, token = self._stream(store, checkpoint, applier, progress, after_copy)
        except ChangeStreamHistoryLost as exc:
            # Raised by watch() or, later, by a shard's reader (the check of a shard's
            # oldest entry runs on its tailer thread): either way the hint belongs here.
            raise ChangeStreamHistoryLost(
                f"{exc}; the sync's checkpoint is no longer in the source's oplog, so a new "
                "initial copy is needed (shardstream sync --restart)"
            ) from exc
        finally:
            applier.close()
        copy_verify = checks[0] if checks else None
        return SyncResult(
            copied.copied, applied, applier.conflicts, token, checkpoint.t0, copy_verify
        )

    def _open(self, checkpoint: Checkpoint) -> ChangeStream:
        start: dict[str, Any] = (
            {"resume_after": checkpoint.token}
            if checkpoint.token is not None
            else {"start_at_operation_time": checkpoint.t0}
        )
        # The URI, not the client: the shards' connections need its credentials.
        return watch(
            self.options.source,
            show_expanded_events=True,
            show_raw_update_description=True,
            batch_size=self.options.batch_size,
            max_await_time_ms=200,
            **start,
        )

    def _stream(
        self,
        store: CheckpointStore,
        checkpoint: Checkpoint,
        applier: BatchApplier,
        progress: SyncProgress,
        after_copy: Callable[[], None] | None,
    ) -> tuple[int, Mapping[str, Any] | None]:
        namespaces = self.options.namespaces
        applied = 0
        saved = checkpoint.token  # the last token stored
        idle_since = time.monotonic()
        interval = self.options.idle_noop_interval_s
        nudger = None if interval is None else IdleShardNudger(self.options.source, interval)
        with self._open(checkpoint) as stream, contextlib.ExitStack() as cleanup:
            if nudger is not None:
                cleanup.callback(nudger.close)
            # Batch n+1 is read and planned while batch n is applied.
            reader = BatchReader(stream, namespaces, self.options.batch_size)
            cleanup.callback(reader.close)

            def save(at: Mapping[str, Any] | None) -> None:
                # After a batch and around its DDL events; a batch ending with a DDL event
                # would otherwise store the same token twice.
                nonlocal saved
                if at is not None and at != saved:
                    store.save(Checkpoint("stream", checkpoint.t0, at))
                    saved = at

            while not self._stopping.is_set():
                batch = reader.next()
                applier.apply(batch.items, checkpoint=save)
                applied += batch.events
                save(batch.token)
                progress.batch(batch.events, batch.last_time, batch.positions)
                if nudger is not None:
                    nudger.check(batch.positions)
                # Events held back are pending, not caught up, and keep the sync awake.
                if not batch.events and not batch.held and after_copy is not None:
                    after_copy()  # nothing ready: the stream has caught up with the copy
                    after_copy = None
                if batch.events or batch.held:
                    idle_since = time.monotonic()
                elif self._idle_for(idle_since):
                    break
        progress.done()
        return applied, saved

    def _idle_for(self, since: float) -> bool:
        idle = self.options.idle_exit_s
        return idle is not None and time.monotonic() - since >= idle
