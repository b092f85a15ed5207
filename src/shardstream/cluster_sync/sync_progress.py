"""Sync: the progress line (phase, copy counts, events/s applied, lag behind the source).

Lag is read from cluster times, not wall clocks: how far the applied time (the stored
checkpoint's) is behind the source's newest committed time, read from the source's shards
(:class:`~shardstream.cluster_sync.source_clock.SourceClock`) when a line is written, not
taken from what the merge has seen; so it is never 0 while the merge holds events back.
Per shard: how far its position in the merge (its promise) is behind the newest one.  An
idle shard's position moves only with its periodic no-op, which is why one idle shard can
hold the whole stream back by up to that interval.

The same numbers are kept for the progress API (:meth:`SyncProgress.sample`): the source's
time as last read (about once a second, whether or not a line is written), the applied
time, the shards' positions and the counts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from bson.timestamp import Timestamp
from pymongo.errors import PyMongoError

from shardstream.cluster_sync.initial_copy import CopyProgress
from shardstream.errors import ShardstreamError

REPORT_EVERY_S: Final = 1.0


@dataclasses.dataclass(frozen=True, slots=True)
class ProgressSample:
    """The progress as last measured.

    Attributes:
        phase: ``copy`` or ``stream``.
        copied / estimated: documents copied, and the sources' estimated counts.
        applied: events applied by this run.
        applied_through: the stored checkpoint's cluster time (None: not streaming yet).
        source_time: the source's newest committed time as last read (None: unread).
        positions: each shard's position in the merge, after the last batch.
    """

    phase: str
    copied: int
    estimated: int
    applied: int
    applied_through: Timestamp | None
    source_time: Timestamp | None
    positions: Mapping[str, Timestamp | None]


class SyncProgress:
    """Writes a progress line at most once per ``REPORT_EVERY_S`` (and at phase changes)."""

    def __init__(
        self,
        report: Callable[[str], None] | None,
        source_time: Callable[[], Timestamp] | None = None,
    ) -> None:
        """Args: where lines go (None: nowhere), and how to read the source's newest
        committed time (None: no lag shown)."""
        self._report = report
        self._source_time = source_time
        self._applied_through: Timestamp | None = None
        self._phase = "copy"
        self._copy = CopyProgress()
        self._started = time.monotonic()
        self._last_line = 0.0
        self._applied = 0
        self._window_events = 0
        self._window_start = time.monotonic()
        self._shards = ""
        self._positions: Mapping[str, Timestamp | None] = {}
        self._source_read: Timestamp | None = None

    def phase(
        self, name: str, copy: CopyProgress, applied_through: Timestamp | None = None
    ) -> None:
        """Enter phase ``name`` (``copy`` or ``stream``, with the time it starts from)."""
        self._phase, self._copy = name, copy
        self._applied_through = applied_through
        self._emit(force=True)

    @contextlib.contextmanager
    def ticking(self) -> Iterator[None]:
        """Write the line every ``REPORT_EVERY_S`` while the block runs, and once at its end.

        For the copy, whose readers only count documents: without it the only copy line
        would be the one written as the copy starts, before any total is known.
        """
        done = threading.Event()

        def tick() -> None:
            while not done.wait(REPORT_EVERY_S):  # bounded by the block's end
                self._emit(force=True)

        thread = threading.Thread(target=tick, name="shardstream-sync-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
            self._emit(force=True)

    def batch(
        self,
        events: int,
        applied_through: Timestamp | None,
        positions: Mapping[str, Timestamp | None],
    ) -> None:
        """Count one applied batch; ``applied_through`` is the stored checkpoint's time,
        ``positions`` the shards' positions in the merge."""
        self._applied += events
        self._window_events += events
        self._applied_through = applied_through
        self._positions = dict(positions)
        known = [ts for ts in positions.values() if ts is not None]
        newest = max(known, default=None)
        if newest is not None:
            self._shards = " ".join(
                f"{name} {newest.time - ts.time if ts else '?'} s"
                for name, ts in sorted(positions.items())
            )
        self._emit()

    def _lag(self) -> str:
        """The source's newest committed time minus the applied time, read now."""
        if self._phase != "stream" or self._source_time is None:
            return "-"
        try:
            newest = self._source_read = self._source_time()
        except (ShardstreamError, PyMongoError):
            return "? (the source's time could not be read)"
        applied = self._applied_through
        if applied is None:
            return "?"
        if applied >= newest:
            return "0 s"
        seconds = newest.time - applied.time
        return f"{seconds} s" if seconds > 0 else "<1 s"

    def done(self) -> None:
        """Write the final line."""
        self._emit(force=True)

    def refresh(self) -> None:
        """Measure (and write the line) if it is due: while nothing is applied, as when
        paused, the lag still grows."""
        self._emit()

    def sample(self) -> ProgressSample:
        """The numbers as last measured."""
        copy = self._copy
        return ProgressSample(
            self._phase,
            copy.copied,
            copy.total,
            self._applied,
            self._applied_through,
            self._source_read,
            self._positions,
        )

    def _emit(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_line < REPORT_EVERY_S:
            return
        lag = self._lag()  # read for the progress API too, when no line is written
        self._last_line = now
        if self._report is None:
            return
        window = max(now - self._window_start, 1e-9)
        run = max(now - self._started, 1e-9)
        copy = self._copy
        self._report(
            f"sync {self._phase}: copied {copy.copied:,}/{copy.total:,} documents, "
            f"applied {self._applied:,} events ({self._window_events / window:,.0f} events/s, "
            f"run {self._applied / run:,.0f}/s), lag {lag}"
            + (f", shards: {self._shards}" if self._shards else "")
        )
        self._window_events = 0
        self._window_start = now
