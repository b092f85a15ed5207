"""A file or simulated oplog positioned at the stream's start, as a tailer is.

A live tailer's cursor starts at the stream's start time (``ts >= start``); oplog files
and simulated runs hand out everything from their first entry, so every task of a long
backfill would otherwise push the whole prefix through the shard pipeline just to drop
it.  Entries before the start are skipped here instead, as the server's scan skips them;
a transaction whose earlier entries lie before the start still finds them, through the
source's ``fetch_entry`` (the pipeline's transaction history), as it would on a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.errors import ChangeStreamHistoryLost
from shardstream.oplog import corrupt_entry
from shardstream.oplog.source import OplogBatch, OplogSource
from shardstream.transform.raw.oplog_entry import elements

_TIMESTAMP = 0x11  # BSON's Timestamp type byte


class PositionedSource:
    """``source`` read from ``start`` on (an :class:`OplogSource`).

    Like a live tailer it checks its own history (``verifies_history``): the oplog must
    hold an entry at or before ``start``, or the stream could miss what came between.

    Args:
        source: a source that starts at its first entry.
        start: the stream's start time.
    """

    verifies_history = True

    def __init__(self, source: OplogSource, start: Timestamp) -> None:
        self._source = source
        self._start = start
        self._checked = False
        self._positioned = False

    @property
    def name(self) -> str:
        """The shard's name."""
        return self._source.name

    @property
    def raw_entries(self) -> bool:
        """Whether the entries are ``RawBSONDocument`` s (the fast path reads those)."""
        return bool(getattr(self._source, "raw_entries", False))

    def next_batch(self, max_entries: int) -> OplogBatch | None:
        """The next batch, without the entries before the start.

        Raises:
            ChangeStreamHistoryLost: the oplog's first entry comes after the start.
        """
        batch = self._source.next_batch(max_entries)
        if batch is None or self._positioned:
            return batch
        entries = batch.entries
        if entries and not self._checked:
            self._checked = True
            first = entry_ts(entries[0])
            if isinstance(first, Timestamp) and first > self._start:
                raise ChangeStreamHistoryLost(
                    f"Resume of change stream was not possible, as the resume point may no "
                    f"longer be in the oplog: shard {self.name!r} starts at {first!r}, after "
                    f"the stream's start {self._start!r} (server error 286)"
                )
        # An entry without a readable Timestamp ts is kept: the pipeline refuses it, naming it.
        kept = [entry for entry in entries if not _before(entry_ts(entry), self._start)]
        self._positioned = bool(kept) or batch.exhausted
        # A batch wholly before the start still reports its promise: it only moves forward.
        return OplogBatch(kept, batch.promise, batch.exhausted)

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        """Read back an older entry (before the start too: a transaction's first entries)."""
        return self._source.fetch_entry(ts)

    def close(self) -> None:
        """Close the underlying source."""
        self._source.close()


def entry_ts(entry: Mapping[str, Any]) -> Any:
    """An entry's ``ts``: from a raw entry's bytes without decoding the rest of it.

    None when a raw entry's top level cannot be framed (a corrupt entry: the pipeline's
    decode reports it, with the file and offset, rather than this read).
    """
    if not isinstance(entry, RawBSONDocument):
        return entry.get("ts")
    raw = entry.raw if isinstance(entry.raw, bytes) else bytes(entry.raw)
    found = elements(raw, 0)
    if found is None:
        return corrupt_entry.entry_ts(raw)  # the ts if the elements before it can be framed
    for kind, name, start, _end in found:
        if name == b"ts" and kind == _TIMESTAMP:
            inc = int.from_bytes(raw[start : start + 4], "little")
            time = int.from_bytes(raw[start + 4 : start + 8], "little")
            return Timestamp(time, inc)
    return None  # no Timestamp ts: the pipeline reports it


def _before(ts: Any, start: Timestamp) -> bool:
    return isinstance(ts, Timestamp) and ts < start
