"""Sync: a migration — the sync, its commit, and, when ``reversible``, its reverse sync.

What the API (``control_api``) and ``shardstream sync`` drive. :meth:`Migration.run` runs
the sync (:class:`~shardstream.cluster_sync.sync_job.SyncJob`); once it is committed and
was started ``reversible``, it waits for :meth:`Migration.reverse` (``POST
/api/v1/reverse``) or a stop. The reverse sync is the fallback after a cutover: the
target, which took the application's writes since the commit, becomes the source and the
old source the target, with no copy: it streams from the target's time stored with the
commit (``reverse_from``: everything on the target before it is the sync's own writes,
equal on both sides when it was read), under its own checkpoint (sync id
``<id>-reverse``, stored in the old source). The old source's write block (the commit's)
is lifted as the reverse starts, since the reverse writes there.

``run(reverse_only=True)`` (``sync --reverse``) starts the reverse of a sync committed by
an earlier process, from the committed checkpoint in the target; run again it resumes
from the reverse's own checkpoint.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any, Final

from bson.timestamp import Timestamp
from pymongo.errors import PyMongoError

from shardstream.cluster_sync.checkpoint import CheckpointStore
from shardstream.cluster_sync.cluster_identity import SyncRefused, cluster_identity, open_cluster
from shardstream.cluster_sync.sync_control import COMMITTED, RequestRefused, SyncControl
from shardstream.cluster_sync.sync_job import SyncJob
from shardstream.cluster_sync.sync_options import SyncOptions, SyncResult
from shardstream.oplog.redaction import password_of, redact_text, redact_uri

REVERSE_SUFFIX: Final = "-reverse"


class Migration:
    """A sync and its optional reverse; :meth:`run` blocks, the rest is thread-safe."""

    def __init__(self, options: SyncOptions, *, report: Callable[[str], None] | None = None):
        """Args: the forward sync's options, and where progress lines go."""
        self.options = options
        self._report = report
        self._lock = threading.Lock()
        self._job = SyncJob(options, report=report)
        self._direction = "forward"
        self._reverse_asked = threading.Event()
        self._stopping = threading.Event()

    @property
    def job(self) -> SyncJob:
        """The sync running now (the reverse one once reversed)."""
        with self._lock:
            return self._job

    @property
    def control(self) -> SyncControl:
        """The running sync's state and requests."""
        return self.job.control

    def progress(self) -> dict[str, Any]:
        """The running sync's progress document, with ``direction`` and ``canReverse``."""
        with self._lock:
            job, direction = self._job, self._direction
        document = job.progress()
        document["direction"] = direction
        document["canReverse"] = (
            self.options.reversible
            and direction == "forward"
            and document["state"] == COMMITTED
            and not self._reverse_asked.is_set()
        )
        return document

    def reverse(self) -> str:
        """Ask for the reverse sync; return ``REVERSING``.

        Raises:
            RequestRefused: not started ``reversible``, not committed, or reversed already.
        """
        if not self.options.reversible:
            raise RequestRefused("expected a sync started with --reversible to reverse")
        with self._lock:
            state = self._job.control.state
            if self._direction != "forward" or self._reverse_asked.is_set():
                raise RequestRefused("expected a sync not reversed yet, but it was reversed")
            if state != COMMITTED:
                raise RequestRefused(f"expected a committed sync to reverse, but it is {state}")
            self._reverse_asked.set()
        return "REVERSING"

    def stop(self) -> None:
        """Stop the running sync after its batch in flight (and any wait for a reverse)."""
        self._stopping.set()
        self.job.stop()

    def run(self, *, reverse_only: bool = False) -> SyncResult:
        """The sync, then (committed, ``reversible``) the reverse once asked for.

        Raises:
            SyncRefused: (``reverse_only``) the sync was not committed.
            Whatever :meth:`SyncJob.run` raises.
        """
        if not reverse_only:
            result = self._job.run()
            if self._job.control.state != COMMITTED or not self.options.reversible:
                return result
            self._say(
                "sync committed: waiting for its reverse (shardstream sync reverse, POST "
                "/api/v1/reverse) or a stop"
            )
            while not (self._reverse_asked.wait(0.5) or self._stopping.is_set()):
                pass
            if self._stopping.is_set():
                return result
        return self._run_reverse()

    def _run_reverse(self) -> SyncResult:
        forward = self.options
        reverse_from = self._committed_at()
        if forward.write_blocking:
            self._lift_block(forward.source)
        options = dataclasses.replace(
            forward,
            source=forward.target,
            target=forward.source,
            sync_id=forward.sync_id + REVERSE_SUFFIX,
            start_at=reverse_from,
            restart=False,
            verify_after_copy=False,
        )
        job = SyncJob(options, report=self._report)
        with self._lock:
            self._job, self._direction = job, "reverse"
        if self._stopping.is_set():
            job.stop()
        self._say(
            f"reverse sync: from the target at cluster time {reverse_from.time},"
            f"{reverse_from.inc} into the source"
        )
        return job.run()

    def _committed_at(self) -> Timestamp:
        """``reverse_from`` of the forward sync's committed checkpoint in the target."""
        forward = self.options
        source = open_cluster(forward.source, "source", forward.connect_timeout_s)
        target = open_cluster(forward.target, "target", forward.connect_timeout_s)
        try:
            store = CheckpointStore(
                target,
                forward.sync_id,
                source=redact_uri(forward.source),
                source_id=cluster_identity(source),
            )
            checkpoint = store.load()
        finally:
            source.close()
            target.close()
        if checkpoint is None or checkpoint.phase != "committed":
            phase = "none" if checkpoint is None else checkpoint.phase
            raise SyncRefused(
                f"expected sync {forward.sync_id!r} to be committed before its reverse, got "
                f"checkpoint phase {phase} in the target"
            )
        assert checkpoint.reverse_from is not None  # load() checks a committed one has it
        return checkpoint.reverse_from

    def _lift_block(self, uri: str) -> None:
        client = open_cluster(uri, "source", self.options.connect_timeout_s)
        try:
            client.admin.command({"setUserWriteBlockMode": 1, "global": False})
        except PyMongoError as exc:
            text = redact_text(str(exc), password_of(uri))
            raise SyncRefused(
                f"expected to lift the source's write block before the reverse sync, got {text}"
            ) from None
        finally:
            client.close()
        self._say("reverse sync: the source's write block is lifted")

    def _say(self, line: str) -> None:
        if self._report is not None:
            self._report(line)
