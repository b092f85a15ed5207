"""One oplog entry's bytes decoded, or refused with one error naming where it is.

Every reader of oplog bytes -- the file reader, the fast path's reference fallback, the Spark
source's readers through it -- decodes an entry with :func:`decode_entry`, so a corrupt entry
gives the same one-line :class:`OplogError` whatever path met it::

    corrupt BSON entry in <file or shard> at byte <offset>: <what is wrong> (entry ts <ts>)

the entry's ``ts`` read from its top level when that much of it is readable. An entry nested
deeper than the server's limit (:mod:`bson_depth`) is refused the same way, whether it
decodes or not (a decode error, when there is one, is the one reported).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

import bson
from bson.codec_options import CodecOptions
from bson.errors import BSONError
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.errors import OplogError
from shardstream.oplog.bson_depth import (
    MAX_NESTING,
    deepest_decoded,
    deepest_in_bytes,
    may_nest_too_deep,
)

_INT32: Final = struct.Struct("<i").unpack_from
_TIMESTAMP: Final = struct.Struct("<II").unpack_from  # increment, then time
_FIXED_SIZES: Final = {
    0x01: 8, 0x06: 0, 0x07: 12, 0x08: 1, 0x09: 8, 0x0A: 0,
    0x10: 4, 0x11: 8, 0x12: 8, 0x13: 16, 0x7F: 0, 0xFF: 0,
}  # fmt: skip
_TS_NAME: Final = b"ts"


def decode_entry(
    raw: bytes, codec_options: CodecOptions[Any], locate: Callable[[], tuple[str, int]]
) -> dict[str, Any]:
    """``raw`` decoded with ``codec_options``.

    Args:
        locate: (the file or shard it was read from, its first byte's offset there), for the
            message; called only when there is one.

    Raises:
        OplogError: ``raw`` nests deeper than the server allows, or does not decode.
    """
    try:
        entry: dict[str, Any] = bson.decode(raw, codec_options=codec_options)
    except (BSONError, ValueError, OverflowError, RecursionError) as exc:
        # Too deep is said as such, also where pymongo's decoder ran out of stack (~900
        # levels: it recurses) and so failed first.
        if may_nest_too_deep(raw):
            deepest = deepest_in_bytes(raw)
            if deepest > MAX_NESTING:
                raise corrupt_entry(*locate(), raw, _too_deep(deepest)) from None
        raise corrupt_entry(*locate(), raw, str(exc)) from exc
    if may_nest_too_deep(raw):
        decoded = deepest_decoded(entry)
        deepest = deepest_in_bytes(raw) if decoded is None else decoded
        if deepest > MAX_NESTING:
            raise corrupt_entry(*locate(), raw, _too_deep(deepest))
    return entry


def raw_entry(
    raw: bytes, codec_options: CodecOptions[Any], locate: Callable[[], tuple[str, int]]
) -> RawBSONDocument:
    """``raw`` as a ``RawBSONDocument`` (decoded lazily, as the fast path's readers want it).

    Where pymongo will not even frame it, the error is the one :func:`decode_entry` gives
    the same bytes (the reference path's), never pymongo's own exception.

    Raises:
        OplogError: ``raw`` is not framed as one BSON document.
    """
    try:
        return RawBSONDocument(raw, codec_options)
    except (BSONError, ValueError) as exc:
        decode_entry(raw, codec_options, locate)  # raises the reference's error
        raise corrupt_entry(*locate(), raw, str(exc)) from exc


def _too_deep(deepest: int) -> str:
    return (
        f"expected at most {MAX_NESTING} levels of nested documents (the server's "
        f"BSONDepth::kDefaultMaxAllowableDepth), got {deepest}"
    )


def located(where: str, offset: int) -> Callable[[], tuple[str, int]]:
    """A ``locate`` for :func:`decode_entry` that knows its answer already."""
    return lambda: (where, offset)


def corrupt_entry(where: str, offset: int, raw: bytes, what: str) -> OplogError:
    """The error for entry ``raw`` at ``offset`` in ``where``: ``what`` is wrong with it."""
    ts = entry_ts(raw)
    known = f" (entry ts {ts!r})" if ts is not None else ""
    return OplogError(f"corrupt BSON entry in {where} at byte {offset}: {what}{known}")


def entry_ts(raw: bytes) -> Timestamp | None:
    """The entry's top-level ``ts`` if the elements up to it can be framed, else None."""
    pos = 4
    end = len(raw) - 1
    try:
        while pos < end:
            kind = raw[pos]
            value = raw.index(0, pos + 1, end) + 1
            if kind == 0x11 and raw[pos + 1 : value - 1] == _TS_NAME:
                inc, time = _TIMESTAMP(raw, value)
                return Timestamp(time, inc)
            size = _FIXED_SIZES.get(kind)
            if size is None:
                size = _variable_size(raw, kind, value)
            pos = value + size
    except (ValueError, IndexError, struct.error):
        pass
    return None


def _variable_size(raw: bytes, kind: int, value: int) -> int:
    """The size of a length-prefixed (or C-string) value; ValueError when it cannot be framed."""
    size: int
    if kind in (0x02, 0x0D, 0x0E):
        size = 4 + _INT32(raw, value)[0]
    elif kind in (0x03, 0x04, 0x0F):
        size = _INT32(raw, value)[0]
    elif kind == 0x05:
        size = 5 + _INT32(raw, value)[0]
    elif kind == 0x0C:
        size = 16 + _INT32(raw, value)[0]
    elif kind == 0x0B:
        size = raw.index(0, raw.index(0, value) + 1) + 1 - value
    else:
        raise ValueError(kind)
    if size < 1:
        raise ValueError(size)
    return size
