"""Sync: the commit (cutover), run by the sync's loop between batches once it is asked for.

1. **Block the source's user writes**: ``setUserWriteBlockMode`` with ``global: true``
   through mongos (6.0+; it reaches every shard, each refusing user writes with
   ``UserWritesBlocked`` from then on). With ``write_blocking=False`` the user promised
   to have stopped the writes themselves.
2. **Read the source's time after the block**: the newest of its shards' majority points
   (:class:`~shardstream.cluster_sync.source_clock.SourceClock`). Every user write the
   source acknowledged is at or before it.
3. **Apply up to past it**: the loop goes on applying batches; with writes blocked the
   shards fall silent, and a silent shard promises nothing to the merge, so every shard
   whose position stands still gets a no-op (``appendOplogNote``, as
   ``--idle-noop-interval`` does) every :data:`NUDGE_EVERY_S`. The commit time is reached
   when the stored checkpoint's time is past it: every event up to it is applied.
4. **Verify**: source and target compared (``verify``); equal, the target's majority
   time is read and stored with the checkpoint (phase ``committed``: where a reverse sync
   would start, since everything on the target before it is the sync's own writes), and
   only then is the sync ``COMMITTED``; the source stays blocked (writes go to the target).

Anything that fails on the way (the block refused, the time not reached within
``timeout_s``, a difference found) lifts the block again, so the source is writable as
before, and the commit fails with the reason; the sync goes on streaming.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn

from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from shardstream.cluster_sync.compare_clusters import verify
from shardstream.cluster_sync.idle_noop import IdleShardNudger
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.cluster_sync.source_catalog import majority_time
from shardstream.cluster_sync.source_clock import SourceClock
from shardstream.cluster_sync.sync_control import COMMITTED, SyncControl
from shardstream.errors import ShardstreamError
from shardstream.oplog.redaction import redact_text

NUDGE_EVERY_S: Final = 0.2
DEFAULT_COMMIT_TIMEOUT_S: Final = 120.0


class CommitFailed(ShardstreamError):
    """The commit could not finish; the source's write block was lifted again."""


class Cutover:
    """One commit attempt: :meth:`begin`, then :meth:`after_batch` until it returns True."""

    def __init__(
        self,
        source: MongoClient[Any],
        target: MongoClient[Any],
        *,
        source_uri: str,
        clock: SourceClock,
        namespaces: NamespaceMap,
        write_blocking: bool,
        timeout_s: float,
        report: Callable[[str], None] | None,
        record: Callable[[Timestamp], None],
    ) -> None:
        """``record`` stores the commit with the target's time to reverse from."""
        self._source, self._target = source, target
        self._record = record
        self._source_uri = source_uri
        self._clock = clock
        self._namespaces = namespaces
        self._write_blocking = write_blocking
        self._timeout_s = timeout_s
        self._report = report
        self._blocked = False
        self._nudger: IdleShardNudger | None = None
        self._deadline = 0.0
        self.commit_time: Timestamp | None = None

    def begin(self) -> None:
        """Block the source's writes and read the time to apply up to.

        Raises:
            CommitFailed: the block was refused or the time could not be read (the block
                lifted again).
        """
        try:
            if self._write_blocking:
                self._set_write_block(True)
                self._blocked = True
            self.commit_time = self._clock.newest()
            self._nudger = IdleShardNudger(self._source_uri, NUDGE_EVERY_S)
        except (ShardstreamError, PyMongoError) as exc:
            self.abort()
            raise CommitFailed(f"the commit could not start: {_text(exc)}") from None
        self._deadline = time.monotonic() + self._timeout_s
        self._say(
            f"commit: source writes {'blocked' if self._blocked else 'stopped by the user'}; "
            f"applying up to cluster time {self.commit_time.time},{self.commit_time.inc}"
        )

    def after_batch(
        self, applied_through: Timestamp, positions: Mapping[str, Timestamp | None]
    ) -> bool:
        """After a batch: True once everything up to the commit time is applied and the
        clusters compare equal.

        Raises:
            CommitFailed: the time was not reached within the timeout, or verify found a
                difference (the block lifted again).
        """
        assert self.commit_time is not None  # begin() ran
        assert self._nudger is not None
        if applied_through <= self.commit_time:
            if time.monotonic() > self._deadline:
                self._fail(
                    f"the stream did not apply up to the commit's cluster time within "
                    f"{self._timeout_s:g} s (applied through {applied_through.time},"
                    f"{applied_through.inc}, needed past {self.commit_time.time},"
                    f"{self.commit_time.inc})"
                )
            try:
                self._nudger.check(positions)
            except ShardstreamError as exc:
                self._fail(str(exc))
            return False
        try:
            report = verify(self._source, self._target, self._namespaces)
        except (ShardstreamError, PyMongoError) as exc:
            self._fail(f"verify could not compare the clusters: {_text(exc)}")
        if not report.equal:
            different = "; ".join(
                " ".join(line.split()) for line in report.lines() if not line.startswith("equal")
            )
            self._fail(f"verify found the target different from the source: {different:.500}")
        try:
            self._record(majority_time(self._target))
        except (ShardstreamError, PyMongoError) as exc:
            self._fail(f"the commit could not be recorded in the target: {_text(exc)}")
        self._say("commit: the target is equal to the source; writes may go to the target")
        self.close()
        return True

    def abort(self) -> None:
        """Lift the write block this attempt set (reporting, not raising, a failure)."""
        self.close()
        if not self._blocked:
            return
        try:
            self._set_write_block(False)
            self._blocked = False
        except PyMongoError as exc:
            self._say(f"commit: could not lift the source's write block: {_text(exc)}")

    def close(self) -> None:
        """Close the shard connections the nudges opened."""
        if self._nudger is not None:
            self._nudger.close()
            self._nudger = None

    def _fail(self, reason: str) -> NoReturn:
        self.abort()
        state = "blocked still" if self._blocked else "writable again"
        raise CommitFailed(f"{reason}; the source is {state}")

    def _set_write_block(self, on: bool) -> None:
        self._source.admin.command({"setUserWriteBlockMode": 1, "global": on})

    def _say(self, line: str) -> None:
        if self._report is not None:
            self._report(line)


def _text(exc: BaseException) -> str:
    return redact_text(str(exc)).splitlines()[0] if str(exc) else type(exc).__name__


class CommitDriver:
    """The stream loop's side of commits: starts one when the control says it was asked
    for, steps it after each batch, and reports its end to the control."""

    def __init__(self, control: SyncControl, new_cutover: Callable[[], Cutover]) -> None:
        self._control, self._new = control, new_cutover
        self._running: Cutover | None = None
        self.committed_at: Timestamp | None = None  # the commit time, once COMMITTED

    def after_batch(
        self, applied_through: Timestamp, positions: Mapping[str, Timestamp | None]
    ) -> bool:
        """Whether the sync is committed now (the loop ends)."""
        if self._running is None and self._control.take_commit():
            self._running = self._new()
            if not self._step(self._running.begin):
                return False
        running = self._running
        if running is None:
            return False
        done = False

        def step() -> None:
            nonlocal done
            done = running.after_batch(applied_through, positions)

        if self._step(step) and done:
            self._running, self.committed_at = None, running.commit_time
            self._control.enter(COMMITTED)
        return done

    def _step(self, call: Callable[[], None]) -> bool:
        """``call()``; False (the commit given up, the control told why) if it failed."""
        try:
            call()
        except CommitFailed as exc:
            self._running = None
            self._control.commit_failed(str(exc))
            return False
        return True

    def close(self) -> None:
        """The loop ended: a commit still running is given up (its write block lifted)."""
        if self._running is not None:
            self._running.abort()
            self._running = None
            self._control.commit_failed("the sync stopped before the commit finished")
