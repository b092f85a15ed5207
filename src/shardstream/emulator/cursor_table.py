"""Emulator: a node's open server-side cursors and the commands that page through them.

A command that opens a cursor (``find``, ``aggregate``) answers with its first batch and
keeps the cursor under a new id unless that batch exhausted it; ``getMore`` pages through
it (an error ends it, as on the server: a retry gets ``CursorNotFound``);
``killCursors`` forgets it.  Ids start high and only grow, so a stale id never names a
newer cursor.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from bson.int64 import Int64

from shardstream.emulator.cursors import ServerCursor
from shardstream.emulator.faults import CommandError

DEFAULT_BATCH_SIZE = 101  # the server's default first batch
Body = dict[str, Any]


class CursorTable:
    """The open cursors of one node; ``stopping`` ends the waits of awaitData cursors."""

    def __init__(self, stopping: threading.Event) -> None:
        self._stopping = stopping
        self._lock = threading.Lock()
        self._cursors: dict[int, ServerCursor] = {}
        self._ids = itertools.count(7_000_000_001)

    def __len__(self) -> int:
        with self._lock:
            return len(self._cursors)

    def first_batch(self, cursor: ServerCursor, size: Any, single_batch: bool = False) -> Body:
        """The reply to a command that opens ``cursor`` (``find``, ``aggregate``).

        The cursor is kept for ``getMore`` unless its first batch exhausts it.
        """
        # A find never waits for data, even on an awaitData cursor: only getMore does.
        first = DEFAULT_BATCH_SIZE if size is None else int(size)
        batch = cursor.next_batch(first, 0, self._stopping)
        if single_batch:
            cursor.exhausted = True
        cursor_id = 0
        if not cursor.exhausted:
            with self._lock:
                cursor_id = next(self._ids)
                self._cursors[cursor_id] = cursor
        ns = cursor.ns
        return {"cursor": {"firstBatch": batch, "id": Int64(cursor_id), "ns": ns}, "ok": 1.0}

    def get_more(self, body: Body) -> Body:
        """The reply to ``getMore``."""
        cursor_id = int(body["getMore"])
        with self._lock:
            cursor = self._cursors.get(cursor_id)
        if cursor is None:
            raise CommandError(43, "CursorNotFound", f"cursor id {cursor_id} not found")
        size, max_time = body.get("batchSize"), body.get("maxTimeMS")
        try:
            batch = cursor.next_batch(
                None if size is None else int(size),
                None if max_time is None else int(max_time),
                self._stopping,
            )
        except CommandError:
            self.forget(cursor_id)  # an error ends the cursor on the server too
            raise
        if cursor.exhausted:
            self.forget(cursor_id)
            cursor_id = 0
        return {"cursor": {"nextBatch": batch, "id": Int64(cursor_id), "ns": cursor.ns}, "ok": 1.0}

    def forget(self, cursor_id: object) -> ServerCursor | None:
        """Drop the cursor ``cursor_id`` names (None: no such cursor, or not an id)."""
        if not isinstance(cursor_id, int):
            return None
        with self._lock:
            return self._cursors.pop(int(cursor_id), None)

    def kill(self, body: Body) -> Body:
        """The reply to ``killCursors``."""
        killed: list[Any] = []
        missing: list[Any] = []
        for cursor_id in body.get("cursors", []):
            (killed if self.forget(cursor_id) else missing).append(cursor_id)
        return {
            "cursorsKilled": killed,
            "cursorsNotFound": missing,
            "cursorsAlive": [],
            "cursorsUnknown": [],
            "ok": 1.0,
        }
