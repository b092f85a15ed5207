"""Where a time lies in an oplog.bson file: a sparse ``ts`` index, built by framing.

A shard's file is in ``ts`` order, so "the entries from time T on" start at one byte
offset.  Finding it by reading every entry from the file's start costs a backfill's every
micro-batch the whole prefix again (quadratic over a long file: measured as a third of a
Spark task's time).  The index records the ``ts``, byte offset and ordinal of every
:data:`STRIDE`-th entry, and of every entry that starts :data:`SAMPLE_BYTES` or more after
the sample before it (large documents: a planner sizing batches in bytes then never has
more than about that much, or one entry, of a shard's data between two samples); it is
built in one pass that reads only the documents' length prefixes and the sampled entries'
top level (in C, ``_framing.c``, which leaves anything unusual to the Python loop here).
A reader seeks to the last sample before T and skips at most a stride of entries, as the
server's oplog scan skips to its start.

Indexes are kept per process (a Spark worker reads many batches of one file), keyed by
the file's path, size and modification time, so a file that changes is indexed anew.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import struct
import threading
from pathlib import Path
from typing import Final

from bson.errors import BSONError
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.errors import OplogError
from shardstream.oplog.entry_size_limit import MAX_OPLOG_ENTRY_SIZE
from shardstream.oplog.file_reader import RAW_OPLOG_CODEC_OPTIONS
from shardstream.oplog.raw_file_reader import framing_error, read_size
from shardstream.oplog.ts_order import OUT_OF_CLOCK_BITS, clock_limit_error

try:
    from shardstream.oplog._framing import index_run as _index_run
except ImportError:  # installed without a C compiler: every entry is framed in Python
    _index_run = None  # type: ignore[assignment]

STRIDE: Final = 32
SAMPLE_BYTES: Final = 1 << 20
_READ_SIZE: Final = 1 << 20
_INT32: Final = struct.Struct("<i")
_cache: dict[tuple[str, int, int], TsIndex] = {}
_cache_lock = threading.Lock()


@dataclasses.dataclass(frozen=True, slots=True)
class TsIndex:
    """Sampled ``(ts, byte offset, ordinal)`` triples of one file, in file order.

    Attributes:
        times: the sampled entries' ``ts`` as ``(time << 32) | inc``.
        offsets: their byte offsets.
        ordinals: their positions among the file's entries (the first is 0).
        last: the file's last entry's ``ts`` the same way (-1: the file is empty).
    """

    times: tuple[int, ...]
    offsets: tuple[int, ...]
    ordinals: tuple[int, ...]
    last: int = -1
    defect: OplogError | None = None
    """The file's first framing or sampling defect; the index covers the entries before it.

    Kept, not raised, because the readers must meet it in its place: an earlier entry's
    own error (a transform error, a ts out of order) is what the reference path reports
    first, and a planner raising at the defect would report a later one instead.
    """

    def offset_before(self, start: Timestamp) -> int:
        """The offset of the last sampled entry whose ts is below ``start`` (0: none is).

        Every entry at or after ``start`` lies at or after it, and so does the entry just
        before ``start``, which a reader needs to see to know its history reaches back.
        """
        at = bisect.bisect_left(self.times, (start.time << 32) | start.inc) - 1
        return self.offsets[at] if at >= 0 else 0


def ts_index(path: str) -> TsIndex:
    """The index of the BSON oplog file ``path`` (built on first use, then cached).

    A file that is not framed as BSON documents, a sampled entry without a Timestamp
    ``ts``, or sampled ``ts`` values that do not increase give an index of the entries
    before that point with the error in :attr:`TsIndex.defect`.

    Raises:
        OplogError: the file cannot be read.
    """
    try:
        stat = Path(path).stat()
    except OSError as exc:
        raise OplogError(f"cannot read oplog file {path!r}: {exc.strerror}") from exc
    key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)
    with _cache_lock:
        found = _cache.get(key)
    if found is None:
        found = _build(path)
        with _cache_lock:
            _cache[key] = found
    return found


def _build(path: str) -> TsIndex:
    times: list[int] = []
    defect: OplogError | None = None
    offsets: list[int] = []
    ordinals: list[int] = []
    last_document, last_offset = b"", 0
    # Read into one buffer, the unframed rest moved to its front after each read: a new
    # bytes object per read and per joined chunk cost more than framing the entries.
    buffer = bytearray(_READ_SIZE)
    filled = 0  # buffer[:filled] holds the file from offset ``base`` on
    base = 0
    count = 0
    try:
        with Path(path).open("rb") as stream:
            while True:
                with memoryview(buffer) as whole:
                    want = read_size(whole[:filled], _READ_SIZE)
                if len(buffer) < filled + want:
                    buffer.extend(bytes(filled + want - len(buffer)))
                with memoryview(buffer) as whole:
                    read = stream.readinto(whole[filled : filled + want])
                if not read:
                    break
                filled += read
                with memoryview(buffer)[:filled] as data:
                    position, count, last_at, defect = _index_data(
                        data, base, count, path, times, offsets, ordinals
                    )
                    if last_at >= 0:  # the last whole document so far
                        last_document, last_offset = bytes(data[last_at:position]), base + last_at
                if defect is not None:
                    break
                buffer[: filled - position] = buffer[position:filled]
                filled -= position
                base += position
            if defect is None and filled:  # the file ends inside a document
                defect = framing_error(bytes(buffer[:filled]), path, base)
    except OSError as exc:
        raise OplogError(f"cannot read oplog file {path!r}: {exc.strerror}") from exc
    last = -1
    if last_document:
        try:
            last = _ts_of(last_document, path, last_offset)
        except OplogError as exc:
            defect = defect or exc
        else:
            if times and last < times[-1]:  # planners end windows at ``last``: it must be last
                defect = defect or _out_of_order(path, offsets[-1], times[-1], last_offset, last)
    return TsIndex(tuple(times), tuple(offsets), tuple(ordinals), last, defect)


def _index_data(
    data: memoryview,
    base: int,
    count: int,
    path: str,
    times: list[int],
    offsets: list[int],
    ordinals: list[int],
) -> tuple[int, int, int, OplogError | None]:
    """Index the whole documents of ``data`` (file offset ``base``; ``count`` entries
    before it) into the three lists: (where the first document not whole begins, the
    entries counted, the start of the last whole one or -1, the defect met or None)."""
    unpack_from = _INT32.unpack_from
    position = 0
    last_at = -1
    while position + 4 <= len(data):
        if _index_run is not None:
            # In C, every entry it passes cleanly (samples included); it stops where this
            # loop is to decide (see _framing.c).
            position, count, passed_to = _index_run(
                data,
                position,
                count,
                base,
                MAX_OPLOG_ENTRY_SIZE,
                STRIDE,
                SAMPLE_BYTES,
                OUT_OF_CLOCK_BITS,
                times,
                offsets,
                ordinals,
            )
            if passed_to >= 0:
                last_at = passed_to
            if position + 4 > len(data):
                break
        size = unpack_from(data, position)[0]
        if size < 5 or size > MAX_OPLOG_ENTRY_SIZE:
            return (
                position,
                count,
                last_at,
                framing_error(bytes(data[position:]), path, base + position),
            )
        if position + size > len(data):
            break
        at = base + position
        if not ordinals or (count - ordinals[-1] >= STRIDE or at - offsets[-1] >= SAMPLE_BYTES):
            try:
                time = _ts_of(bytes(data[position : position + size]), path, at)
            except OplogError as exc:
                return position, count, last_at, exc
            if times and time <= times[-1]:
                defect = _out_of_order(path, offsets[-1], times[-1], at, time)
                return position, count, last_at, defect
            times.append(time)
            offsets.append(at)
            ordinals.append(count)
        last_at = position
        count += 1
        position += size
    return position, count, last_at, None


def _out_of_order(path: str, before_at: int, before: int, at: int, time: int) -> OplogError:
    return OplogError(
        f"expected ts to increase in {path}: the entry at byte {at} "
        f"(ts {_timestamp(time)}) is not after the one at byte {before_at} "
        f"(ts {_timestamp(before)})"
    )


def _timestamp(key: int) -> Timestamp:
    return Timestamp(key >> 32, key & 0xFFFFFFFF)


def _ts_of(document: bytes, path: str, offset: int) -> int:
    # Only the top level is read: a sampled entry may hold a document of megabytes.
    try:
        ts = RawBSONDocument(document, RAW_OPLOG_CODEC_OPTIONS).get("ts")
    except (BSONError, ValueError, OverflowError) as exc:
        raise OplogError(f"corrupt BSON entry in {path} at byte {offset}: {exc}") from exc
    if not isinstance(ts, Timestamp):
        raise OplogError(
            f"expected an oplog entry with a Timestamp ts in {path} at byte {offset}, "
            f"got {ts!r:.60}"
        )
    key = (ts.time << 32) | ts.inc
    if key & OUT_OF_CLOCK_BITS:
        raise clock_limit_error(f"{path} at byte {offset}", ts)
    return key
