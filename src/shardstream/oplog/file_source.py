"""An oplog file as an :class:`OplogSource` (one shard of a replay).

The file is read in order; after each batch the promise is the last entry's ``ts``
(a shard's timestamps are unique and increasing, so nothing at or below it can
follow).  The end of the file exhausts the source.  Older entries are read back
by rescanning the file, which only transactions that began before the stream's
start need.  A source opened ``near`` a time starts reading at the file's ``ts`` index
entry just before it, instead of the first entry.

With ``raw_entries`` (BSON files only) the entries are ``RawBSONDocument`` s of the file's
bytes (:class:`~shardstream.oplog.raw_entries.RawEntries`: made when read; the fast path
takes the bytes), which the merge reads through the fast path; as for a live raw tailer, the fast
pipeline checks every entry's ``ts`` order from the bytes, and this source reads only each
batch's last one (its promise).
"""

from __future__ import annotations

import struct
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import closing
from typing import Any

from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError, OplogError
from shardstream.oplog.corrupt_entry import entry_ts, located, raw_entry
from shardstream.oplog.file_reader import (
    RAW_OPLOG_CODEC_OPTIONS as _RAW_OPTIONS,
)
from shardstream.oplog.file_reader import InputFormat, read_oplog_file
from shardstream.oplog.raw_entries import RawEntries
from shardstream.oplog.raw_file_reader import read_raw_oplog_file
from shardstream.oplog.source import OplogBatch
from shardstream.oplog.ts_index import ts_index
from shardstream.oplog.ts_order import entry_timestamp

# Entries as the file's bytes; values decode as the reference's when read.
_TIMESTAMP_BYTES = struct.Struct("<II")  # a BSON Timestamp: increment, then time


class FileOplogSource:
    """Reads ``path`` (concatenated BSON or Extended JSON lines) as shard ``name``.

    Raises:
        ConfigurationError: ``raw_entries`` for a file that is not BSON.
    """

    def __init__(
        self,
        name: str,
        path: str,
        input_format: InputFormat | None = None,
        *,
        raw_entries: bool = False,
        near: Timestamp | None = None,
    ) -> None:
        file_format = input_format or InputFormat.for_path(path)
        if raw_entries and file_format is not InputFormat.BSON:
            raise ConfigurationError(
                f"shard {name!r} ({path}): raw entries need a BSON oplog file, got "
                f"{file_format.value}"
            )
        self._name = name
        self._path = path
        self._format = input_format
        # A BSON file can be entered at an indexed entry (see ts_index); stdin cannot.
        self._seekable = path != "-" and file_format is InputFormat.BSON
        # Start at the indexed entry just before ``near``: entries from near on all
        # follow, and at most a stride of earlier ones.
        self._offset = self._offset_before(near) if near else 0
        self.raw_entries = raw_entries
        self._entries: Iterator[Mapping[str, Any]] | None = None
        self._raw: Generator[bytes, None, None] | None = None  # raw_entries: the file's bytes
        self._last_ts: Timestamp | None = None
        self._done = False
        self._failed: OplogError | None = None  # raised at the next read (see _fail_after)

    @property
    def name(self) -> str:
        """The shard's name."""
        return self._name

    def next_batch(self, max_entries: int) -> OplogBatch:
        """Read up to ``max_entries`` entries.

        Raises:
            OplogError: the file is unreadable, or its ``ts`` values are not increasing.
        """
        if self._failed is not None:
            raise self._failed
        if self._done:
            return OplogBatch((), self._last_ts, exhausted=True)
        if self.raw_entries:
            return self._next_raw_batch(max_entries)
        if self._entries is None:
            self._entries = read_oplog_file(self._path, self._format, offset=self._offset)
        batch: list[Mapping[str, Any]] = []
        where = self._where
        try:
            for entry in self._entries:
                ts = entry_timestamp(entry, where, self._last_ts)
                self._last_ts = ts
                batch.append(entry)
                if len(batch) >= max_entries:
                    return OplogBatch(batch, ts)
        except OplogError as exc:
            return self._fail_after(batch, exc)
        self._done = True
        self.close()
        return OplogBatch(batch, self._last_ts, exhausted=True)

    def _next_raw_batch(self, max_entries: int) -> OplogBatch:
        if self._raw is None:
            self._raw = _raw_entries(self._path, self._offset)
        batch: list[bytes] = []
        try:
            for entry in self._raw:
                batch.append(entry)
                if len(batch) >= max_entries:
                    break
            else:
                self._done = True
                self.close()
        except OplogError as exc:
            self._fail_after(RawEntries(batch), exc)
        if batch:
            # The promise reads this one entry only, and never goes back: the fast pipeline
            # checks every entry's ts in order, and refuses the first out of place itself.
            # From its bytes: inflating the entry would raise on damage elsewhere in it.
            ts = entry_ts(batch[-1])
            if isinstance(ts, Timestamp) and (self._last_ts is None or ts > self._last_ts):
                self._last_ts = ts
        return OplogBatch(RawEntries(batch), self._last_ts, exhausted=self._done)

    def _fail_after(self, batch: Sequence[Mapping[str, Any]], error: OplogError) -> OplogBatch:
        """The entries read before a bad one, then ``error`` at the next read.

        Every path meets an oplog's defects in oplog order (the first one decides), as the
        server would: the entries before a bad one still go through the pipeline first.
        """
        self.close()
        if not batch:
            raise error
        self._failed = error
        return OplogBatch(batch, self._last_ts)

    @property
    def _where(self) -> str:
        return f"shard {self._name!r} ({self._path})"

    def _offset_before(self, ts: Timestamp) -> int:
        """Where to start reading for entries at or after ``ts`` (0: the file's start)."""
        return ts_index(self._path).offset_before(ts) if self._seekable else 0

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        """Find the entry at ``ts`` by reading the file again from just before it."""
        offset = self._offset_before(ts)
        if self.raw_entries:
            # Raw entries are matched by their ts element's bytes first (a decode each
            # would cost a whole entry's), then confirmed by decoding the one found.
            element = b"\x11ts\x00" + _TIMESTAMP_BYTES.pack(ts.inc, ts.time)
            with closing(_raw_entries(self._path, offset)) as raw:
                for candidate in raw:
                    if element in candidate:
                        document = RawBSONDocument(candidate, _RAW_OPTIONS)
                        if document.get("ts") == ts:
                            return document
            return None
        with closing(read_oplog_file(self._path, self._format, offset=offset)) as entries:
            for entry in entries:
                if entry.get("ts") == ts:
                    return entry
        return None

    def close(self) -> None:
        """Close the file."""
        if isinstance(self._entries, Generator):
            self._entries.close()
        if self._raw is not None:
            self._raw.close()
        self._entries = self._raw = None


def _raw_entries(path: str, offset: int = 0) -> Generator[bytes, None, None]:
    """The file's entries as bytes, each a document ``RawBSONDocument`` accepts."""
    chunks = read_raw_oplog_file(path, offset=offset)
    try:
        for chunk in chunks:
            for document in chunk:
                # Framed by its length prefix; RawBSONDocument also wants the final NUL.
                # Without it, the file reader's error for the entry (corrupt_entry).
                if document[-1]:
                    raw_entry(document, _RAW_OPTIONS, located(path, offset))
                yield document
                offset += len(document)
    finally:
        close = getattr(chunks, "close", None)  # a generator: closing it closes the file
        if close is not None:
            close()
