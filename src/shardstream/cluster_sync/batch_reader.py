"""Sync: the merged stream read and planned one batch ahead, on a thread of its own.

Reading (tailers, merge, transform) and applying (the target's acknowledgements) would
otherwise take turns: while the writers wait for the target, nothing is read, and while
the next batch is read and planned, the target idles.  :class:`BatchReader` reads and
plans batch n+1 while batch n is applied.  Each :class:`PlannedBatch` carries the resume
token and shard positions as they were right after its last event, so the checkpoint
stored once it is applied names exactly what was applied; a batch read ahead but never
applied (the sync stopped) is not checkpointed, and is read again on the next run.

A batch leaves as soon as the stream has nothing more ready and the applier can take it
(behind a batch still queued it keeps growing instead): waiting out the stream's await
first would add it to every event's lag.  While nothing is ready the reader looks at the
stream every ``STEP_S`` and shows the shards' positions to ``on_poll`` (the idle-shard
nudger, which so sees a shard stand still within a step rather than a batch later).

A batch never ends inside a source transaction, or the target would commit it in two
parts. A transaction's events share its commit time, but the merged stream may interleave
another shard's events at that same time (the sort key's ``txnOpIndex`` comes before the
document key): so from a transaction's first event on, the events of its time are held
until the time is complete, then released with each transaction's events together. Until
then the batch's checkpoint stops before them. A transaction that ends the stream's
activity waits for the next event or no-op (``--idle-noop-interval`` shortens that).
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.change_stream import ChangeStream
from shardstream.cluster_sync.apply_rules import CrudWrite, DdlChange
from shardstream.cluster_sync.event_planner import (
    EventPlanner,
    PlannedEvent,
    timestamp_of,
)
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.resume_token import decode_token_document

AHEAD: Final = 1  # batches read ahead of the one being applied
WAIT_S: Final = 0.2  # nothing ready for this long: an empty batch (the run's control runs)
STEP_S: Final = 0.01  # how often the stream is looked at while nothing is ready
_POLL_S: Final = 0.1

PositionsHook = Callable[[Mapping[str, Timestamp | None]], object]


@dataclasses.dataclass(frozen=True, slots=True)
class PlannedBatch:
    """Up to ``batch_size`` events, planned as writes, with the stream's state after them."""

    items: list[CrudWrite | DdlChange]
    events: int
    last_time: Timestamp | None  # the cluster time of the last event
    token: Mapping[str, Any] | None  # the resume token right after the last event
    positions: Mapping[str, Timestamp | None]
    held: int = 0  # events read but held back (a transaction's time not yet complete)


class BatchReader:
    """Reads ``stream`` into planned batches on a daemon thread; :meth:`next` takes one."""

    def __init__(
        self,
        stream: ChangeStream,
        namespaces: NamespaceMap,
        batch_size: int,
        on_poll: PositionsHook | None = None,
    ) -> None:
        """Start reading at once (the stream is this reader's alone from now on).

        ``on_poll(positions)`` runs on the reader's thread each time it finds nothing
        ready; what it raises ends the reading, as a read error does.
        """
        self._stream = stream
        self._on_poll = on_poll
        self._planner = EventPlanner(namespaces)
        self._batch_size = batch_size
        self._ready: queue.Queue[PlannedBatch | BaseException] = queue.Queue(AHEAD)
        self._halt = threading.Event()
        # From a transaction's first event on, the events of its cluster time are held
        # until that time is complete (a later event, or the stream's postBatchResumeToken
        # past it): a batch never ends inside a transaction, which the target commits as
        # one, and another shard's events at the same time cannot cut it in two.
        self._held: list[PlannedEvent] = []
        self._held_time: int | None = None  # event_planner.time_key
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
        batch = _BatchBuilder()
        while batch.events < self._batch_size and not self._halt.is_set():
            events = self._next_events(batch.events)
            if not events:
                if self._held and self._released_past(self._held_time):
                    batch.take(*self._release())
                break
            for event in events:
                at, event_token, transaction, item = event
                if self._held and at != self._held_time:  # later: the held time is complete
                    batch.take(*self._release())
                if self._held or transaction is not None:
                    if not self._held:
                        self._held_time = at
                    self._held.append(event)
                else:
                    batch.take_one(at, event_token, item)
        # While events are held, the checkpoint may not pass the first of them.
        token = batch.token if self._held else stream.resume_token
        return PlannedBatch(
            batch.items,
            batch.events,
            None if batch.last_time is None else timestamp_of(batch.last_time),
            token,
            stream.shard_positions(),
            len(self._held),
        )

    def _next_events(self, in_hand: int) -> list[PlannedEvent]:
        """The events the stream has ready, up to the batch's room; none: time to end the
        batch (see the module's doc)."""
        stream = self._stream
        deadline = time.monotonic() + WAIT_S
        while True:  # bounded: WAIT_S with nothing in hand, else until the applier has room
            planner = self._planner
            events = stream.take_decoded(planner.raw, self._batch_size - in_hand, planner.document)
            if events or self._halt.is_set():
                return events
            if self._on_poll is not None:
                self._on_poll(stream.shard_positions())
            if in_hand and not self._ready.full():
                return []
            if self._held and self._released_past(self._held_time):
                return []
            if not in_hand and time.monotonic() >= deadline:
                return []
            time.sleep(STEP_S)

    def _release(self) -> tuple[list[PlannedEvent], Mapping[str, Any]]:
        """The held events, each transaction's together, and the last one's token.

        They share one cluster time, so they come from different shards' concurrent
        writes (a document lives on one shard): regrouping them keeps every document's
        order.  Each group goes where its first event was; the token is the last event's
        in stream order, which every held event sorts at or below.
        """
        held, self._held = self._held, []
        self._held_time = None
        groups: dict[Any, list[PlannedEvent]] = {}  # in order of first appearance
        for n, event in enumerate(held):
            groups.setdefault(event[2] or n, []).append(event)
        ordered = [event for group in groups.values() for event in group]
        return ordered, held[-1][1]

    def _released_past(self, at: int | None) -> bool:
        """Whether the stream has released everything at cluster time ``at``."""
        token = self._stream.resume_token
        return (
            at is not None
            and token is not None
            and (decode_token_document(token).cluster_time > timestamp_of(at))
        )


class _BatchBuilder:
    """One batch's planned writes, event count, last time and last event token."""

    def __init__(self) -> None:
        self.items: list[CrudWrite | DdlChange] = []
        self.events = 0
        self.last_time: int | None = None
        self.token: Mapping[str, Any] | None = None

    def take_one(
        self, at: int | None, token: Mapping[str, Any], item: CrudWrite | DdlChange | None
    ) -> None:
        """Add one planned event (not held: the stream's token follows it) at cluster time
        ``at`` (``event_planner.time_key``)."""
        self.events += 1
        if at is not None:
            self.last_time = at
        if item is not None:
            self.items.append(item)
        self.token = token

    def take(self, planned: list[PlannedEvent], token: Mapping[str, Any]) -> None:
        """Add planned events; ``token`` is the one after all of them (the stream's last)."""
        for at, event_token, _, item in planned:
            self.take_one(at, event_token, item)
        self.token = token
