"""An oplog file as an :class:`OplogSource` (one shard of a replay).

The file is read in order; after each batch the promise is the last entry's ``ts``
(a shard's timestamps are unique and increasing, so nothing at or below it can
follow).  The end of the file exhausts the source.  Older entries are read back
by rescanning the file, which only transactions that began before the stream's
start need.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from contextlib import closing
from typing import Any

from bson.timestamp import Timestamp

from shardstream.errors import OplogError
from shardstream.oplog.file_reader import InputFormat, read_oplog_file
from shardstream.oplog.source import OplogBatch


class FileOplogSource:
    """Reads ``path`` (concatenated BSON or Extended JSON lines) as shard ``name``."""

    def __init__(self, name: str, path: str, input_format: InputFormat | None = None) -> None:
        self._name = name
        self._path = path
        self._format = input_format
        self._entries: Generator[Mapping[str, Any], None, None] | None = None
        self._last_ts: Timestamp | None = None
        self._done = False

    @property
    def name(self) -> str:
        """The shard's name."""
        return self._name

    def next_batch(self, max_entries: int) -> OplogBatch:
        """Read up to ``max_entries`` entries.

        Raises:
            OplogError: the file is unreadable, or its ``ts`` values are not increasing.
        """
        if self._done:
            return OplogBatch((), self._last_ts, exhausted=True)
        if self._entries is None:
            self._entries = read_oplog_file(self._path, self._format)
        batch: list[Mapping[str, Any]] = []
        for entry in self._entries:
            ts = entry.get("ts")
            if not isinstance(ts, Timestamp):
                raise OplogError(
                    f"shard {self._name!r} ({self._path}): expected every entry to have a "
                    f"Timestamp ts, got {ts!r:.60} after ts {self._last_ts!r}"
                )
            if self._last_ts is not None and ts <= self._last_ts:
                raise OplogError(
                    f"shard {self._name!r} ({self._path}): expected ts to increase, got {ts!r} "
                    f"after {self._last_ts!r}"
                )
            self._last_ts = ts
            batch.append(entry)
            if len(batch) >= max_entries:
                return OplogBatch(batch, ts)
        self._done = True
        self.close()
        return OplogBatch(batch, self._last_ts, exhausted=True)

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        """Find the entry at ``ts`` by reading the file again from the start."""
        with closing(read_oplog_file(self._path, self._format)) as entries:
            for entry in entries:
                if entry.get("ts") == ts:
                    return entry
        return None

    def close(self) -> None:
        """Close the file."""
        if self._entries is not None:
            self._entries.close()
            self._entries = None
