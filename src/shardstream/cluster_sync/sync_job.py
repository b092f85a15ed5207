"""Sync: the whole job — checkpoint, initial copy, then the merged stream applied in batches.

A batch is what the merged stream has ready (up to ``batch_size`` events); once the
target acknowledged all of it (write concern majority) the stream's resume token is
stored as the checkpoint, so a stop after any batch, or a kill -9 anywhere, resumes
without a gap, and what it replays is harmless.  :meth:`SyncJob.stop` (Ctrl-C in the CLI)
ends the loop after the batch in flight is acknowledged and checkpointed.

Before anything is written the run refuses what would do harm (a target that is the
source, maps that collide or name nothing, a checkpoint of another source), and a run
ends saying whether the target had caught up with the source's committed time, read
from its shards (``SyncResult.caught_up``): ``idle_exit_s`` stops only once it has.

:attr:`SyncJob.control` takes pause, resume and commit requests from other threads (the
HTTP API, ``control_api``), acted on between batches; :meth:`SyncJob.progress` is the
progress document they read. A commit (``sync_cutover``) ends the run once the target is
equal to the write-blocked source.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from shardstream.cluster_sync.batch_applier import BatchApplier
from shardstream.cluster_sync.checkpoint import Checkpoint, CheckpointStore
from shardstream.cluster_sync.cluster_identity import (
    SyncRefused,
    open_cluster,
    refuse_same_cluster,
)
from shardstream.cluster_sync.compare_clusters import VerifyReport, verify
from shardstream.cluster_sync.conflict_log import ConflictLog
from shardstream.cluster_sync.initial_copy import CopyProgress, copy_collections
from shardstream.cluster_sync.namespace_checks import refuse_unsafe_scope
from shardstream.cluster_sync.progress_document import progress_document
from shardstream.cluster_sync.source_catalog import majority_time
from shardstream.cluster_sync.source_clock import SourceClock
from shardstream.cluster_sync.stream_phase import StreamPhase, applied_through
from shardstream.cluster_sync.sync_control import COPYING, STREAMING, SyncControl
from shardstream.cluster_sync.sync_cutover import Cutover
from shardstream.cluster_sync.sync_options import SyncOptions, SyncResult
from shardstream.cluster_sync.sync_progress import SyncProgress
from shardstream.cluster_sync.target_catalog import refuse_targets_holding_data
from shardstream.errors import ChangeStreamHistoryLost, ShardstreamError
from shardstream.oplog.redaction import password_of, redact_text, redact_uri
from shardstream.transform.raw.encoded_stream import quiet_collector

__all__ = ["SyncJob", "SyncOptions", "SyncResult"]


class SyncJob:
    """One sync run; :meth:`run` blocks until :meth:`stop`, idle exit, or an error."""

    def __init__(
        self, options: SyncOptions, *, report: Callable[[str], None] | None = None
    ) -> None:
        """Args: the options, and where progress lines go (None: nowhere)."""
        self.options = options
        self.control = SyncControl()
        self._stopping = threading.Event()
        self._report = report
        self._progress = SyncProgress(None)  # replaced as the run starts
        self._conflicts: ConflictLog | None = None

    def __repr__(self) -> str:
        return f"SyncJob({self.options!r})"  # the options' repr redacts the URIs

    def stop(self) -> None:
        """Stop after the batch in flight is applied and checkpointed (thread-safe)."""
        self._stopping.set()
        self.control.wake()

    def progress(self) -> dict[str, Any]:
        """The progress document the API serves (thread-safe; see ``progress_document``)."""
        conflicts = self._conflicts
        return progress_document(
            self.control,
            self._progress.sample(),
            sync_id=self.options.sync_id,
            conflicts=0 if conflicts is None else conflicts.count,
        )

    def run(self) -> SyncResult:
        """Copy (unless a checkpoint says it is done), then apply the stream until stopped.

        Raises:
            ClusterUnreachable: the source or the target did not answer in time.
            SyncRefused: the target is the source, the maps collide or name nothing on
                the source, or the checkpoint is another source's (nothing written).
            ChangeStreamHistoryLost: a shard's oplog no longer reaches the checkpoint;
                a new initial copy is needed (``--restart``).
            SyncConflict: a duplicate key on the target under ``on_conflict="fail"``.
        """
        try:
            return self._connect_and_run()
        except BaseException as exc:
            secrets = (password_of(self.options.source), password_of(self.options.target))
            self.control.failed(redact_text(str(exc), *secrets) or type(exc).__name__)
            raise

    def _connect_and_run(self) -> SyncResult:
        options = self.options
        source = open_cluster(options.source, "source", options.connect_timeout_s)
        try:
            target = open_cluster(options.target, "target", options.connect_timeout_s)
        except BaseException:
            source.close()
            raise
        clock = SourceClock(source, options.source, timeout_s=options.connect_timeout_s)
        try:
            # Every event makes containers that live a batch or two and form no cycle: the
            # collector walked them over and over (with take_decoded, 6-8 % of the sync's
            # instructions per event: benchmarks/README.md "Instructions per event").
            with quiet_collector():
                return self._run(source, target, clock)
        finally:
            clock.close()
            source.close()
            target.close()

    def _run(
        self, source: MongoClient[Any], target: MongoClient[Any], clock: SourceClock
    ) -> SyncResult:
        options = self.options
        source_id = refuse_same_cluster(source, target, options.source, options.target)
        store = CheckpointStore(
            target,
            options.sync_id,
            source=redact_uri(options.source),
            source_id=source_id,
            scope=options.namespaces.described(),
            retry_for_s=options.retry_for_s,
        )
        checkpoint = None if options.restart else store.load()
        if checkpoint is not None and checkpoint.phase == "committed":
            raise SyncRefused(
                f"expected sync {options.sync_id!r} to be running, but it was committed (the "
                "target took over from the source): start its reverse sync with --reverse, "
                "or forget it with --restart"
            )
        refuse_unsafe_scope(source, options.namespaces, new_sync=checkpoint is None)
        if checkpoint is None and options.start_at is None and options.on_conflict == "fail":
            # Before anything is stored: a new copy refused later would leave its own
            # checkpoint (or none, after --restart) for a rerun to resume over old data.
            refuse_targets_holding_data(source, target, options.namespaces)
        if options.restart:
            store.clear()
        progress = self._progress = SyncProgress(self._report, clock.newest)
        conflicts = self._conflicts = ConflictLog(
            target, options.sync_id, options.on_conflict, retry_for_s=options.retry_for_s
        )
        copied = CopyProgress()
        if checkpoint is None and options.start_at is not None:
            checkpoint = Checkpoint("stream", options.start_at)
            store.save(checkpoint)
        copied_now = checkpoint is None or checkpoint.phase == "copy"
        if copied_now:
            t0 = majority_time(source) if checkpoint is None else checkpoint.t0
            store.save(Checkpoint("copy", t0))
            self.control.enter(COPYING)
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
                    conflicts=conflicts,
                )
            if self._stopping.is_set():  # stopped in the copy: behind by definition
                return SyncResult(copied.copied, 0, 0, None, t0, None, None, _read(clock))
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
            conflict_log=conflicts,
        )
        progress.phase("stream", copied, applied_through(checkpoint.token, checkpoint.t0))
        self.control.enter(STREAMING)
        checks: list[VerifyReport] = []

        def verify_caught_up() -> None:
            report = verify(source, target, options.namespaces)
            checks.append(report)
            for line in report.lines():
                if self._report is not None:
                    self._report(f"verify, caught up after the copy: {line}")

        after_copy = verify_caught_up if options.verify_after_copy and copied_now else None
        t0_of_stream = checkpoint.t0

        def cutover() -> Cutover:
            return Cutover(
                source,
                target,
                source_uri=options.source,
                clock=clock,
                namespaces=options.namespaces,
                write_blocking=options.write_blocking,
                timeout_s=options.commit_timeout_s,
                report=self._report,
                record=lambda at: store.save(Checkpoint("committed", t0_of_stream, None, at)),
            )

        try:
            stream = StreamPhase(options, self.control, self._stopping).run(
                store, checkpoint, applier, progress, clock, after_copy, cutover
            )
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
            copied.copied,
            stream.applied,
            conflicts.count,
            stream.token,
            checkpoint.t0,
            copy_verify,
            applied_through(stream.token, checkpoint.t0),
            stream.source_time or _read(clock),
        )


def _read(clock: SourceClock) -> Timestamp | None:
    """The source's time for the result; None when it cannot be read (reported so)."""
    try:
        return clock.newest()
    except (ShardstreamError, PyMongoError):
        return None
