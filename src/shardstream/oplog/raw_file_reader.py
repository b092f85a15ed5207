"""An oplog.bson file as raw BSON documents (bytes), for the fast path.

Reads the file in large chunks and slices each entry out of the chunk by its
length prefix, so memory stays bounded by the chunk size whatever the file's
size.  Nothing is decoded; framing errors are reported exactly as
:func:`shardstream.oplog.read_oplog_file` reports them.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Final

from shardstream.errors import OplogError
from shardstream.oplog.entry_size_limit import MAX_OPLOG_ENTRY_SIZE, oversized_entry

CHUNK_SIZE: Final = 1 << 20
# Above any oplog entry (16 MB documents, plus the entry's own fields).
_LARGEST_READ: Final = 64 << 20
_INT32: Final = struct.Struct("<i")


def read_raw_oplog_file(
    path: str, chunk_size: int = CHUNK_SIZE, *, offset: int = 0
) -> Iterator[list[bytes]]:
    """Yield the entries of an oplog.bson file (``-``: stdin) in batches of whole documents.

    Args:
        offset: where to start reading (a document's first byte; see ``ts_index``).

    Raises:
        OplogError: the file cannot be opened, or a document's length is impossible.
    """
    if path == "-":
        yield from _read(sys.stdin.buffer, "<stdin>", chunk_size)
        return
    try:
        with Path(path).open("rb") as stream:
            stream.seek(offset)
            yield from _read(stream, path, chunk_size, offset)
    except OSError as exc:
        raise OplogError(f"cannot read oplog file {path!r}: {exc.strerror}") from exc


def _read(stream: IO[bytes], name: str, chunk_size: int, offset: int = 0) -> Iterator[list[bytes]]:
    pending = b""  # offset: the file offset of pending[0]
    while True:
        if len(pending) >= 4 and not _plausible_length(pending):
            raise framing_error(pending, name, offset)  # before reading the rest of it
        chunk = stream.read(read_size(pending, chunk_size))
        data = pending + chunk if pending else chunk
        if not chunk:
            if data:
                raise framing_error(data, name, offset)
            return
        documents, used = frame_documents(data)
        if documents:
            yield documents
        elif len(data) >= 4 and not _plausible_length(data):
            raise framing_error(data, name, offset)
        offset += used
        pending = data[used:]


def _plausible_length(data: bytes) -> bool:
    """Whether the length prefix at the front of ``data`` can be an oplog entry's.

    Checked before reading the rest of an entry: one longer than any entry the server
    can write (see ``entry_size_limit``) is refused by its prefix alone.
    """
    return 5 <= int.from_bytes(data[:4], "little", signed=True) <= MAX_OPLOG_ENTRY_SIZE


def read_size(pending: bytes | memoryview, chunk_size: int) -> int:
    """How much to read next: a chunk, or the rest of a pending document larger than one.

    Reading a 16 MB entry a chunk at a time would copy what is pending again with every
    chunk (quadratic); its length prefix says how much is missing.  A corrupt length is
    capped, and reported once the file ends short of it.
    """
    if len(pending) < 4:
        return chunk_size
    missing = int.from_bytes(pending[:4], "little", signed=True) - len(pending)
    return min(max(chunk_size, missing), _LARGEST_READ)


def frame_documents(data: bytes) -> tuple[list[bytes], int]:
    """The whole documents at the front of ``data``, and where the rest begins."""
    documents: list[bytes] = []
    append = documents.append
    unpack_from = _INT32.unpack_from  # about half the cost of int.from_bytes on a slice
    total = len(data)
    pos = 0
    while pos + 4 <= total:
        size = unpack_from(data, pos)[0]
        end = pos + size
        if size < 5 or size > MAX_OPLOG_ENTRY_SIZE or end > total:
            break
        append(data[pos:end])
        pos = end
    return documents, pos


def framing_error(data: bytes, name: str, offset: int) -> OplogError:
    """The error for the document at the front of ``data`` (file offset ``offset``)."""
    prefix = data[:4]
    size = int.from_bytes(prefix, "little", signed=True) if len(prefix) == 4 else -1
    if size < 5:
        return OplogError(
            f"corrupt BSON in {name} at byte {offset}: expected a document length of at "
            f"least 5, got {prefix.hex()!r}"
        )
    if size > MAX_OPLOG_ENTRY_SIZE:
        return oversized_entry(name, offset, size)
    # A damaged length prefix and a cut file look alike: say what is left and what it asks.
    return OplogError(
        f"truncated BSON in {name} at byte {offset}: expected a BSON document length of at "
        f"most {len(data)} bytes left, got {size}"
    )
