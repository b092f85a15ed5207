"""Sync: phase 2, the merged change stream applied in batches until the run stops.

A batch is what the merged stream has ready (up to ``batch_size`` events, read and planned
one batch ahead by :class:`~shardstream.cluster_sync.batch_reader.BatchReader`); once the
target acknowledged all of it the stream's resume token is stored as the checkpoint.
Between batches the loop honours the run's control: it waits while paused, starts a
commit when one is asked for and drives it (``sync_cutover``), and ends on a stop, on
``--idle-exit``, or once committed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

from bson.timestamp import Timestamp

from shardstream.change_stream import ChangeStream
from shardstream.cluster_sync.batch_applier import BatchApplier
from shardstream.cluster_sync.batch_reader import BatchReader
from shardstream.cluster_sync.checkpoint import Checkpoint, CheckpointStore
from shardstream.cluster_sync.idle_exit import IdleExit
from shardstream.cluster_sync.idle_noop import IdleShardNudger
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.source_clock import SourceClock
from shardstream.cluster_sync.sync_control import SyncControl
from shardstream.cluster_sync.sync_cutover import CommitDriver, Cutover
from shardstream.cluster_sync.sync_options import SyncOptions
from shardstream.cluster_sync.sync_progress import SyncProgress
from shardstream.resume_token import decode_token_document
from shardstream.stream import watch


class StreamEnd:
    """What the stream phase leaves: events applied, the last token stored, and the
    source's time it was measured against (None: unread)."""

    def __init__(
        self, applied: int, token: Mapping[str, Any] | None, source_time: Timestamp | None
    ) -> None:
        self.applied, self.token, self.source_time = applied, token, source_time


def applied_through(token: Mapping[str, Any] | None, t0: Timestamp) -> Timestamp:
    """The cluster time the target holds everything before: the stored token's, or T0
    (the copy's, whose stream starts there)."""
    return t0 if token is None else decode_token_document(token).cluster_time


def _stream_scope(namespaces: NamespaceMap) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The scope as ``watch()``'s patterns, so the shards' oplog filter drops what the sync
    would not write before it is transformed (``in_scope`` still decides each write).
    ``--db``/``--coll`` become an include, not ``watch(db=, coll=)``: a collection stream
    ends at its collection's drop, which the sync applies and goes on."""
    db, coll = namespaces.db, namespaces.coll
    include = namespaces.include
    # No --db: every user database; a name with "*" a pattern would read as a wildcard.
    if not include and db is not None and "*" not in db + (coll or ""):
        include = (f"{db}.{coll or '*'}",)
    return include, namespaces.exclude


class StreamPhase:
    """The stream phase of one run (its options, control and stop flag are the job's)."""

    def __init__(self, options: SyncOptions, control: SyncControl, stopping: threading.Event):
        self.options, self.control, self._stopping = options, control, stopping

    def _open(self, checkpoint: Checkpoint) -> ChangeStream:
        # After its own checkpoint the stream resumes on the fast path (fast_resume): a
        # start at the token's time, the events up to the token dropped.
        start: dict[str, Any] = (
            {"resume_after": checkpoint.token, "fast_resume": True}
            if checkpoint.token is not None
            else {"start_at_operation_time": checkpoint.t0}
        )
        include, exclude = _stream_scope(self.options.namespaces)
        # The URI, not the client: the shards' connections need its credentials.
        return watch(
            self.options.source,
            show_expanded_events=True,
            show_raw_update_description=True,
            batch_size=self.options.batch_size,
            # The tailers' getMore await (an idle tailer asks its promise this often); the
            # batch reader takes what is ready without waiting (take_decoded), at its own pace.
            max_await_time_ms=200,
            include=include,
            exclude=exclude,
            tailer=self.options.tailer,
            **start,
        )

    def run(
        self,
        store: CheckpointStore,
        checkpoint: Checkpoint,
        applier: BatchApplier,
        progress: SyncProgress,
        clock: SourceClock,
        after_copy: Callable[[], None] | None,
        new_cutover: Callable[[], Cutover],
    ) -> StreamEnd:
        """Apply batches until stopped, idle-exited or committed."""
        options, stopping = self.options, self._stopping
        applied = 0
        saved = checkpoint.token  # the last token stored
        idle = IdleExit(options.idle_exit_s, options.idle_exit_wait_s, clock)
        interval = options.idle_noop_interval_s
        nudger = None if interval is None else IdleShardNudger(options.source, interval)
        commits = CommitDriver(self.control, new_cutover)
        with self._open(checkpoint) as stream, contextlib.ExitStack() as cleanup:
            cleanup.callback(commits.close)  # a commit cut short lifts its write block
            if nudger is not None:
                cleanup.callback(nudger.close)
            # Batch n+1 is read and planned while batch n is applied; the reader's thread
            # also nudges idle shards, as soon as one stood still (not a batch later).
            poll = None if nudger is None else nudger.check
            reader = BatchReader(stream, options.namespaces, options.batch_size, poll)
            cleanup.callback(reader.close)

            def save(at: Mapping[str, Any] | None) -> None:
                # After a batch and around its DDL events; a batch ending with a DDL event
                # would otherwise store the same token twice.
                nonlocal saved
                if at is not None and at != saved:
                    store.save(Checkpoint("stream", checkpoint.t0, at))
                    saved = at

            while not stopping.is_set():
                self.control.wait_while_paused(stopping.is_set, progress.refresh)
                if stopping.is_set():
                    break
                batch = reader.next()
                applier.apply(batch.items, checkpoint=save)
                applied += batch.events
                save(batch.token)
                through = applied_through(saved, checkpoint.t0)
                progress.batch(batch.events, through, batch.positions)
                # Events held back are pending, not caught up, and keep the sync awake.
                quiet = not batch.events and not batch.held
                if quiet and after_copy is not None:
                    after_copy()  # nothing ready: the stream has caught up with the copy
                    after_copy = None
                if commits.after_batch(through, batch.positions) or idle.done(quiet, through):
                    break
        progress.done()
        return StreamEnd(applied, saved, commits.committed_at or idle.source_time)
