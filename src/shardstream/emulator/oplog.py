"""Emulator: an in-memory capped oplog and the tailable cursors that read it.

Entries are kept as ``RawBSONDocument`` so a reader gets back exactly the bytes a test
appended. A cursor remembers the ``ts`` of the last entry it examined, as a real capped
collection scan remembers its RecordId; if that entry is truncated away before the next
getMore, the getMore fails with ``CappedPositionLost`` (136), as on a real server.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Mapping
from typing import Any

import bson
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.emulator.cursors import MAX_BATCH_BYTES, ServerCursor, doc_size, matches
from shardstream.emulator.faults import CommandError

# A getMore without maxTimeMS on an awaitData cursor waits this long, like the server.
DEFAULT_AWAIT_MS = 1000


def _as_raw(entry: Mapping[str, Any]) -> RawBSONDocument:
    if isinstance(entry, RawBSONDocument):
        return entry
    return RawBSONDocument(bson.encode(entry))


class OplogStore:
    """An ordered, truncatable list of oplog entries with a majority commit point."""

    def __init__(self) -> None:
        """Create an empty oplog."""
        self.changed = threading.Condition()
        self._entries: list[RawBSONDocument] = []
        self._ts: list[Timestamp] = []
        self._majority: Timestamp | None = None

    def append(self, entry: Mapping[str, Any]) -> RawBSONDocument:
        """Append one entry and wake waiting cursors.

        Args:
            entry: A document with a ``ts`` Timestamp greater than the last entry's.

        Returns:
            The stored raw entry.

        Raises:
            ValueError: If ``ts`` is missing, not a Timestamp, or not increasing.
        """
        raw = _as_raw(entry)
        ts = raw.get("ts")
        if not isinstance(ts, Timestamp):
            raise ValueError("an oplog entry needs a bson Timestamp 'ts'")
        with self.changed:
            if self._ts and ts <= self._ts[-1]:
                raise ValueError(f"oplog ts must increase: {ts} after {self._ts[-1]}")
            self._entries.append(raw)
            self._ts.append(ts)
            self.changed.notify_all()
        return raw

    def truncate_before(self, ts: Timestamp) -> int:
        """Drop every entry older than ``ts`` (a capped roll-over); return how many went."""
        with self.changed:
            cut = bisect.bisect_left(self._ts, ts)
            del self._entries[:cut]
            del self._ts[:cut]
            self.changed.notify_all()
            return cut

    def set_majority(self, ts: Timestamp) -> None:
        """Move the majority commit point to ``ts``; it never moves backwards."""
        with self.changed:
            if self._majority is not None and ts < self._majority:
                raise ValueError(f"majority point cannot go back from {self._majority} to {ts}")
            self._majority = ts
            self.changed.notify_all()

    @property
    def majority(self) -> Timestamp | None:
        """The majority commit point (None until set)."""
        with self.changed:
            return self._majority

    @property
    def first_ts(self) -> Timestamp | None:
        """The oldest entry's ts (None when empty)."""
        with self.changed:
            return self._ts[0] if self._ts else None

    @property
    def last_ts(self) -> Timestamp | None:
        """The newest entry's ts (None when empty)."""
        with self.changed:
            return self._ts[-1] if self._ts else None

    def entries(self) -> list[RawBSONDocument]:
        """A snapshot of the current entries."""
        with self.changed:
            return list(self._entries)

    def scan(
        self,
        after: Timestamp | None,
        query: Mapping[str, Any],
        limit: int | None,
        majority_only: bool,
    ) -> tuple[list[RawBSONDocument], Timestamp | None]:
        """Read matching entries after position ``after``.

        Args:
            after: The last examined ts (None: scan from the filter's lower bound).
            query: The find filter.
            limit: The most entries to return.
            majority_only: Stop at the majority commit point (readConcern majority).

        Returns:
            The batch and the new position (``after`` when nothing was examined).

        Raises:
            CommandError: ``CappedPositionLost`` if ``after`` was truncated away.
        """
        with self.changed:
            if after is not None and (not self._ts or after < self._ts[0]):
                raise CommandError(
                    136,
                    "CappedPositionLost",
                    "CollectionScan died due to position in capped collection being deleted.",
                )
            if after is not None:
                start = bisect.bisect_right(self._ts, after)
            else:
                start = _lower_bound(self._ts, query)
            end = self._visible_end(majority_only)
            batch: list[RawBSONDocument] = []
            size = 0
            position = after
            for index in range(start, end):
                entry = self._entries[index]
                if matches(entry, query):
                    if batch and size + doc_size(entry) > MAX_BATCH_BYTES:
                        break
                    batch.append(entry)
                    size += doc_size(entry)
                position = self._ts[index]
                if limit is not None and len(batch) >= limit:
                    break
            return batch, position

    def at_end(self, position: Timestamp | None, majority_only: bool) -> bool:
        """Whether no visible entry follows ``position``."""
        with self.changed:
            end = self._visible_end(majority_only)
            return end == 0 or (position is not None and self._ts[end - 1] <= position)

    def _visible_end(self, majority_only: bool) -> int:
        # Caller holds the lock. With readConcern majority only committed entries are visible.
        if not majority_only:
            return len(self._ts)
        return bisect.bisect_right(self._ts, self._majority) if self._majority is not None else 0

    def wait_after(
        self,
        position: Timestamp | None,
        majority_only: bool,
        deadline: float,
        stop: threading.Event,
    ) -> None:
        """Block until a visible entry newer than ``position`` exists, the deadline, or stop."""
        with self.changed:
            while not stop.is_set():  # bounded by the deadline
                end = self._visible_end(majority_only)
                if end and (position is None or self._ts[end - 1] > position):
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self.changed.wait(remaining)


def _lower_bound(ts_list: list[Timestamp], query: Mapping[str, Any]) -> int:
    # Use the ts range to skip straight to the first candidate, as the server's oplog
    # scan does with a ts lower bound; the full filter is still applied to every entry.
    cond = query.get("ts")
    if isinstance(cond, Timestamp):
        return bisect.bisect_left(ts_list, cond)
    if isinstance(cond, Mapping):
        if isinstance(cond.get("$gt"), Timestamp):
            return bisect.bisect_right(ts_list, cond["$gt"])
        if isinstance(cond.get("$gte"), Timestamp):
            return bisect.bisect_left(ts_list, cond["$gte"])
    return 0


class OplogCursor(ServerCursor):
    """A cursor on ``local.oplog.rs``: plain, tailable, or tailable with awaitData."""

    def __init__(
        self,
        store: OplogStore,
        query: Mapping[str, Any],
        *,
        tailable: bool,
        await_data: bool,
        majority_only: bool,
    ) -> None:
        """Create the cursor; nothing is read until the first batch."""
        super().__init__("local.oplog.rs")
        self._store = store
        self._query = query
        self._tailable = tailable
        self._await_data = await_data
        self._majority_only = majority_only
        self._position: Timestamp | None = None

    def next_batch(
        self, batch_size: int | None, max_time_ms: int | None, stopping: threading.Event
    ) -> list[Any]:
        """Return the next batch, waiting for new entries on a getMore of an awaitData cursor."""
        batch = self._read(batch_size)
        if not batch and self._tailable and self._await_data and max_time_ms != 0:
            wait_ms = DEFAULT_AWAIT_MS if max_time_ms is None else max_time_ms
            deadline = time.monotonic() + wait_ms / 1000
            # Bounded: each pass either returns or waits until the fixed deadline.
            while not batch and time.monotonic() < deadline and not stopping.is_set():
                self._store.wait_after(self._position, self._majority_only, deadline, stopping)
                batch = self._read(batch_size)
        if not self._tailable and (
            not batch or self._store.at_end(self._position, self._majority_only)
        ):
            self.exhausted = True
        return batch

    def _read(self, batch_size: int | None) -> list[Any]:
        batch, self._position = self._store.scan(
            self._position, self._query, batch_size, self._majority_only
        )
        return list(batch)
