"""What a live tailer's reader thread hands its consumer, and the rules of the hand-off.

The reader puts batches (or the exception that ended it) on a bounded queue, so a slow
merge pauses the reader instead of growing memory, and publishes an idle promise (the
shard's majority point) while nothing is new. The consumer takes them through
:meth:`ReaderHandoff.next_batch` by :class:`~shardstream.oplog.source.Handout`'s rules.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.oplog.source import Handout, OplogBatch

Entry = Mapping[str, Any]
_PUT_POLL_S: Final = 0.05  # how often a reader blocked on a full queue checks for stop


class ReaderHandoff:
    """A bounded queue of the reader's batches, its failure, and its idle promise.

    ``stop`` is the tailer's: once set, a blocked :meth:`put` gives up and
    :meth:`next_batch` ends the stream after what was queued.
    """

    def __init__(self, max_queued_batches: int, stop: threading.Event) -> None:
        self._stop = stop
        # The lock spans the queue and the idle promise: see next_batch.
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[Entry, ...] | BaseException] = queue.Queue(
            max_queued_batches
        )
        self._idle_promise: Timestamp | None = None
        self._handout = Handout()  # consumer side only

    # -- reader side -------------------------------------------------------------------

    def put(self, item: tuple[Entry, ...] | BaseException) -> bool:
        """Queue ``item``, waiting while the queue is full; False if stopped first."""
        while not self._stop.is_set():  # bounded: ends when the tailer stops
            try:
                self._queue.put(item, timeout=_PUT_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def publish_idle(self, ts: Timestamp | None) -> None:
        """Offer ``ts`` as the idle promise; only a higher one replaces the last."""
        with self._lock:
            if ts is not None and (self._idle_promise is None or ts > self._idle_promise):
                self._idle_promise = ts

    # -- consumer side -----------------------------------------------------------------

    def next_batch(self, max_entries: int) -> OplogBatch | None:
        """Up to ``max_entries`` queued entries, the reader's failure, an idle promise
        above the last one handed out, the end once stopped, or None."""
        # The reader queues entries first and only then publishes an idle promise, under
        # the lock; checking the queue and the promise under the same lock means an idle
        # promise is never handed out while entries at or below it are still queued.
        with self._lock:
            out = self._handout
            if not out.pending and out.failure is None:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    item = ()
                if isinstance(item, BaseException):
                    out.failure = item
                else:
                    out.entries.extend(item)
            batch = out.take(max_entries, ended=self._stop.is_set())
            if batch is not None:
                return batch
            idle = self._idle_promise
            if idle is not None and (out.promise is None or idle > out.promise):
                out.promise = idle
                return OplogBatch((), idle)
            return None
