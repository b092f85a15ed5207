"""Sync: ``--idle-exit``, which stops only once the target has caught up with the source.

A quiet stream is no proof of that: an idle source shard that promised nothing holds
every other shard's events back at the merge, and the stream then looks quiet while
writes pile up. So once nothing was applied or held for ``idle_exit_s``, the source's
time is read from its shards (:class:`~shardstream.cluster_sync.source_clock.SourceClock`)
and the sync stops when the applied time reaches it; if it does not within ``wait_s``,
the sync stops behind, and says so (``SyncResult.caught_up``; the CLI exits 1).
"""

from __future__ import annotations

import time

from bson.timestamp import Timestamp

from shardstream.cluster_sync.source_clock import SourceClock


class IdleExit:
    """``idle_exit_s``: after that long with nothing applied or held, the source's time is
    read (its shards' majority points); the sync stops as soon as the applied time reaches
    it, or, ``wait_s`` later, behind it. Anything applied meanwhile starts over.

    The time is read once, when the quiet period is up, not at every check: a source's
    shards keep writing periodic no-ops, so "the newest time now" moves on while the
    merge (which waits for every shard) follows the oldest of them.
    """

    def __init__(self, idle_s: float | None, wait_s: float, clock: SourceClock) -> None:
        self._idle_s, self._wait_s, self._clock = idle_s, wait_s, clock
        self._quiet_since = time.monotonic()
        self._read_at = 0.0
        self.source_time: Timestamp | None = None  # read when the quiet period was up

    def done(self, quiet: bool, applied_through: Timestamp) -> bool:
        """Whether to stop after a batch: ``quiet`` (nothing applied or held) and the
        applied time reached the source's time read when the quiet period was up, or
        the wait for it is over (the caller reports the run behind)."""
        if self._idle_s is None:
            return False
        now = time.monotonic()
        if not quiet:
            self._quiet_since, self.source_time = now, None
            return False
        if now - self._quiet_since < self._idle_s:
            return False
        if self.source_time is None:
            self.source_time, self._read_at = self._clock.newest(), now
        return applied_through >= self.source_time or now - self._read_at >= self._wait_s
