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
from bson.raw_bson import RawBSONDocument

from shardstream.errors import OplogError
from shardstream.oplog.corrupt_entry import decode_entry, located
from shardstream.oplog.entry_size_limit import (
    MAX_OPLOG_ENTRY_SIZE,
    json_entry_may_be_oversized,
    oversized_entry,
    oversized_json_entry,
)
from shardstream.resume_token.json_input import EXTENDED_JSON_ERRORS, depth_problem

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
# A line is read whole before it is parsed, so its length is bounded: /dev/zero or a file
# without newlines must not fill the memory. Extended JSON of the largest entry stays far
# below: the worst value, a MinKey with an empty name, is 2 bytes of BSON and 19 characters
# of json_util's text ('"": {"$minKey": 1}, '), under 10 per byte.
MAX_EJSON_LINE: Final = 16 * MAX_OPLOG_ENTRY_SIZE


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
        # Bytes for EJSON too (when stdin has them): each line is decoded on its own, so a
        # byte that is not UTF-8 is named by its line (tests may give a bare text stream).
        stream: IO[Any] = getattr(sys.stdin, "buffer", sys.stdin)
        yield from _read(stream, "<stdin>", chosen)
        return
    try:
        if chosen is InputFormat.BSON:
            with Path(path).open("rb") as binary:
                binary.seek(offset)
                yield from _read_bson(binary, path, offset)
        else:
            with Path(path).open("rb") as lines:
                yield from _read_ejson(lines, path)
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
        if size > MAX_OPLOG_ENTRY_SIZE:  # refused before its body is read (entry_size_limit)
            raise oversized_entry(name, offset, size)
        body = stream.read(size - _BSON_LENGTH_PREFIX)
        if len(body) != size - _BSON_LENGTH_PREFIX:
            raise OplogError(
                f"truncated BSON in {name} at byte {offset}: expected a BSON document length "
                f"of at most {len(body) + _BSON_LENGTH_PREFIX} bytes left, got {size}"
            )
        # The same verdict and message as the fast path's (corrupt_entry: depth, then decode).
        yield decode_entry(prefix + body, OPLOG_CODEC_OPTIONS, located(name, offset))
        offset += size


def _read_ejson(stream: IO[Any], name: str) -> Iterator[Mapping[str, Any]]:
    """Lines of bytes (a file, stdin) or, from a bare text stream, of text."""
    line: bytes | str
    lines = iter(lambda: stream.readline(MAX_EJSON_LINE + 1), stream.read(0))
    for line_number, line in enumerate(lines, start=1):
        if len(line) > MAX_EJSON_LINE:
            raise OplogError(
                f"oversized Extended JSON entry in {name} line {line_number}: expected a line "
                f"of at most {MAX_EJSON_LINE} bytes, got more"
            )
        text = line if isinstance(line, str) else _utf8_line(line, name, line_number)
        if not text.strip():
            continue
        entry = _parse_ejson_line(text, name, line_number)
        if json_entry_may_be_oversized(text):
            _check_json_entry_size(entry, name, line_number)
        yield entry


def _check_json_entry_size(entry: Mapping[str, Any], name: str, line_number: int) -> None:
    """Refuse an entry larger as BSON than any oplog entry (see entry_size_limit)."""
    size = len(bson.encode(entry, codec_options=OPLOG_CODEC_OPTIONS))
    if size > MAX_OPLOG_ENTRY_SIZE:
        raise oversized_json_entry(name, line_number, size)


def _utf8_line(line: bytes, name: str, line_number: int) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OplogError(
            f"expected UTF-8 text in {name} line {line_number}, got the byte "
            f"0x{line[exc.start]:02x} at column {exc.start + 1}"
        ) from None


def _parse_ejson_line(text: str, name: str, line_number: int) -> Mapping[str, Any]:
    """One line of Extended JSON as an oplog entry; anything else is an OplogError naming it."""
    problem = depth_problem(text)
    if problem is not None:  # refused before parsing: json recurses once per level
        raise OplogError(f"corrupt Extended JSON entry in {name} line {line_number}: {problem}")
    try:
        entry = json_util.loads(text, json_options=_JSON_OPTIONS)
    except EXTENDED_JSON_ERRORS as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise OplogError(
            f"corrupt Extended JSON entry in {name} line {line_number}: {reason:.200}"
        ) from exc
    if not isinstance(entry, Mapping):
        raise OplogError(
            f"expected an oplog entry (a JSON object) in {name} line {line_number}, got "
            f"{type(entry).__name__}"
        )
    return entry
