"""Read oplog entries from a file: concatenated BSON or Extended JSON lines.

``bson`` is what ``mongodump`` writes for ``local.oplog.rs`` (``oplog.bson``);
``ejson`` is one Extended JSON entry per line.  ``-`` reads standard input.  A
corrupt entry is an :class:`OplogError` naming the file and where it is, never a
silent skip.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterator, Mapping
from enum import Enum
from pathlib import Path
from typing import IO, Any, Final

import bson
from bson import json_util
from bson.binary import UuidRepresentation
from bson.codec_options import CodecOptions, DatetimeConversion
from bson.errors import BSONError
from bson.raw_bson import RawBSONDocument

from shardstream.errors import OplogError

OPLOG_CODEC_OPTIONS: Final[CodecOptions[dict[str, Any]]] = CodecOptions(
    tz_aware=True,
    uuid_representation=UuidRepresentation.UNSPECIFIED,  # keep ui as BinData subtype 4
    datetime_conversion=DatetimeConversion.DATETIME_AUTO,
)
# Entries as the server's bytes (the fast path's input); values decode as the reference's.
RAW_OPLOG_CODEC_OPTIONS: Final = OPLOG_CODEC_OPTIONS.with_options(document_class=RawBSONDocument)
_JSON_OPTIONS: Final = json_util.CANONICAL_JSON_OPTIONS.with_options(
    datetime_conversion=DatetimeConversion.DATETIME_AUTO
)
_BSON_LENGTH_PREFIX: Final = 4


class InputFormat(Enum):
    """How an oplog file is laid out."""

    BSON = "bson"
    EJSON = "ejson"

    @classmethod
    def for_path(cls, path: str) -> InputFormat:
        """Guess from the file name: ``.bson`` is BSON, anything else Extended JSON lines."""
        return cls.BSON if path.endswith(".bson") else cls.EJSON


def read_oplog_file(
    path: str, input_format: InputFormat | None = None, *, offset: int = 0
) -> Generator[Mapping[str, Any], None, None]:
    """Yield the entries of an oplog file in file order.

    Args:
        offset: a BSON file: where to start reading (a document's first byte).

    Raises:
        OplogError: the file cannot be opened, or an entry is not valid BSON / JSON.
    """
    chosen = input_format or InputFormat.for_path(path)
    if path == "-":
        stream: IO[Any] = sys.stdin.buffer if chosen is InputFormat.BSON else sys.stdin
        yield from _read(stream, "<stdin>", chosen)
        return
    try:
        if chosen is InputFormat.BSON:
            with Path(path).open("rb") as binary:
                binary.seek(offset)
                yield from _read_bson(binary, path, offset)
        else:
            with Path(path).open(encoding="utf-8") as text:
                yield from _read_ejson(text, path)
    except OSError as exc:
        raise OplogError(f"cannot read oplog file {path!r}: {exc.strerror}") from exc


def _read(stream: IO[Any], name: str, chosen: InputFormat) -> Iterator[Mapping[str, Any]]:
    if chosen is InputFormat.BSON:
        yield from _read_bson(stream, name)
    else:
        yield from _read_ejson(stream, name)


def _read_bson(stream: IO[bytes], name: str, offset: int = 0) -> Iterator[Mapping[str, Any]]:
    while True:
        prefix = stream.read(_BSON_LENGTH_PREFIX)
        if not prefix:
            return
        size = int.from_bytes(prefix, "little", signed=True) if len(prefix) == 4 else -1
        if size < 5:
            raise OplogError(
                f"corrupt BSON in {name} at byte {offset}: expected a document length of at "
                f"least 5, got {prefix.hex()!r}"
            )
        body = stream.read(size - _BSON_LENGTH_PREFIX)
        if len(body) != size - _BSON_LENGTH_PREFIX:
            raise OplogError(
                f"truncated BSON in {name} at byte {offset}: expected {size} bytes, the file "
                f"ends after {len(body) + _BSON_LENGTH_PREFIX}"
            )
        try:
            entry = bson.decode(prefix + body, codec_options=OPLOG_CODEC_OPTIONS)
        except (BSONError, ValueError, OverflowError) as exc:
            raise OplogError(f"corrupt BSON entry in {name} at byte {offset}: {exc}") from exc
        yield entry
        offset += size


def _read_ejson(stream: IO[str], name: str) -> Iterator[Mapping[str, Any]]:
    for line_number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            entry = json_util.loads(line, json_options=_JSON_OPTIONS)
        except (ValueError, TypeError, KeyError, OverflowError, BSONError) as exc:
            raise OplogError(
                f"corrupt Extended JSON entry in {name} line {line_number}: {exc}"
            ) from exc
        if not isinstance(entry, Mapping):
            raise OplogError(
                f"expected an oplog entry (a JSON object) in {name} line {line_number}, got "
                f"{type(entry).__name__}"
            )
        yield entry
