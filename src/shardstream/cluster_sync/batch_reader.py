"""Sync: the merged stream read and planned one batch ahead, on a thread of its own.

Reading (tailers, merge, transform) and applying (the target's acknowledgements) would
otherwise take turns: while the writers wait for the target, nothing is read, and while
the next batch is read and planned, the target idles.  :class:`BatchReader` reads and
plans batch n+1 while batch n is applied.  Each :class:`PlannedBatch` carries the resume
token and shard positions as they were right after its last event, so the checkpoint
stored once it is applied names exactly what was applied; a batch read ahead but never
applied (the sync stopped) is not checkpointed, and is read again on the next run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
from collections.abc import Mapping
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.cluster_sync.apply_rules import CrudWrite, DdlChange, plan_event
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.stream import ChangeStream

AHEAD: Final = 1  # batches read ahead of the one being applied
_POLL_S: Final = 0.1


@dataclasses.dataclass(frozen=True, slots=True)
class PlannedBatch:
    """Up to ``batch_size`` events, planned as writes, with the stream's state after them."""

    items: list[CrudWrite | DdlChange]
    events: int
    last_time: Timestamp | None  # the cluster time of the last event
    token: Mapping[str, Any] | None  # the resume token right after the last event
    positions: Mapping[str, Timestamp | None]


class BatchReader:
    """Reads ``stream`` into planned batches on a daemon thread; :meth:`next` takes one."""

    def __init__(self, stream: ChangeStream, namespaces: NamespaceMap, batch_size: int) -> None:
        """Start reading at once (the stream is this reader's alone from now on)."""
        self._stream = stream
        self._namespaces = namespaces
        self._batch_size = batch_size
        self._ready: queue.Queue[PlannedBatch | BaseException] = queue.Queue(AHEAD)
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shardstream-sync-read")
        self._thread.daemon = True
        self._thread.start()

    def next(self) -> PlannedBatch:
        """The next batch (an empty one when nothing was ready).

        Raises:
            Whatever reading the stream raised (e.g. ``ChangeStreamHistoryLost``).
        """
        item = self._ready.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        """Stop reading and wait for the thread (a batch read ahead is dropped)."""
        self._halt.set()
        while self._thread.is_alive():
            with contextlib.suppress(queue.Empty):  # unblock a put() waiting for room
                self._ready.get(timeout=_POLL_S)

    def _run(self) -> None:
        try:
            while not self._halt.is_set():
                batch = self._read()
                while not self._halt.is_set():
                    try:
                        self._ready.put(batch, timeout=_POLL_S)
                        break
                    except queue.Full:
                        continue
        except BaseException as exc:  # handed to the applying thread
            self._ready.put(exc)

    def _read(self) -> PlannedBatch:
        stream = self._stream
        items: list[CrudWrite | DdlChange] = []
        events = 0
        last_time: Timestamp | None = None
        while events < self._batch_size and not self._halt.is_set():
            event = stream.try_next()
            if event is None:
                break
            events += 1
            last_time = event.get("clusterTime", last_time)
            item = plan_event(event, self._namespaces)
            if item is not None:
                items.append(item)
        return PlannedBatch(items, events, last_time, stream.resume_token, stream.shard_positions())
