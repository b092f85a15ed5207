"""Fast path: ``updateDescription`` of a common ``$v:2`` update, from raw bytes.

Most delta updates set or add fields, at the top level or below it:
``o = {$v: 2, diff: {u: {...}, i: {...}, s<field>: <sub-diff>...}}``, where an
array sub-diff is ``{a: true, u<index>: <value>, s<index>: <sub-diff>...}``.  Their
``updatedFields`` is every ``u``/``i`` element in walk order, renamed to its dotted
path, with the value's bytes copied (values are framed, not validated, as everywhere on
the fast path); nothing is removed or truncated.  Diffs with
anything else (deletes, binary sections, array truncation, section names the
server reads by their first letter only, malformed parts) return None, and the
caller decodes them for the reference parser
(:func:`shardstream.transform.update.update_description.parse_update_diff`), which also
raises the server's errors.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Final

import bson
from bson.errors import BSONError
from bson.int64 import Int64

from shardstream.errors import TransformError
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.transform.raw.event_writer import update_description_element
from shardstream.transform.raw.oplog_entry import elements, value_size

_V2_HEADERS: Final = (
    b"\x10$v\x00\x02\x00\x00\x00\x03diff\x00",  # $v: int32 2
    b"\x12$v\x00\x02\x00\x00\x00\x00\x00\x00\x00\x03diff\x00",  # $v: int64 2
)
_SECTION_RANK: Final = {b"u": 1, b"i": 2}
_ARRAY_HEADER: Final = b"\x08a\x00\x01"  # a: true
_INT32_MAX: Final = 2**31 - 1
_read_int32: Final = struct.Struct("<i").unpack_from
_pack_int32: Final = struct.Struct("<i").pack
_FIELD_NAME: Final = b"\x03updateDescription\x00"
_RAW_FIELD_NAME: Final = b"\x03rawUpdateDescription\x00"
_UPDATED_FIELDS: Final = b"\x03updatedFields\x00"
_EMPTY_LISTS: Final = (
    b"\x04removedFields\x00\x05\x00\x00\x00\x00\x04truncatedArrays\x00\x05\x00\x00\x00\x00\x00"
)
# updateDescription's length less its updatedFields body: its own length, updatedFields'
# name, length and NUL, the two empty lists and its final NUL (the last byte of _EMPTY_LISTS).
_DESCRIPTION_OVERHEAD: Final = 4 + len(_UPDATED_FIELDS) + 4 + 1 + len(_EMPTY_LISTS)


class _Unsupported(Exception):
    """The diff needs the reference parser."""


def update_description_bytes(o: bytes) -> bytes | None:
    """The ``updateDescription`` element of a ``$v:2`` update's ``o``; None for any other update.

    Common diffs are copied (:func:`_simple_update_description`); the others are decoded
    for the reference parser.  None also when the reference would raise: it reports the
    error with the entry's ``ts``.
    """
    simple = _simple_update_description(o)
    if simple is not None:
        return simple
    try:
        decoded = bson.decode(o, codec_options=OPLOG_CODEC_OPTIONS)
    except (BSONError, ValueError, OverflowError):
        return None
    version = decoded.get("$v")
    diff = decoded.get("diff")
    # As EventTransform._update: an int32/int64 2 (a double 2.0 is not), and a document diff.
    if type(version) not in (int, Int64) or version != 2 or not isinstance(diff, Mapping):
        return None
    try:
        return update_description_element(diff)
    except TransformError:
        return None


def raw_update_description_bytes(o: bytes) -> bytes | None:
    """The ``rawUpdateDescription`` element of a ``$v:2`` update: its ``o``, as it is.

    As the reference (``EventTransform._update``), the diff is not parsed, only found:
    ``o`` must be ``{$v: 2, diff: {...}}`` exactly.  None for any other update (modifier
    updates, replacements, a malformed ``o``): the reference decides, or reports it.
    """
    diff_at = _diff_offset(o)
    if diff_at < 0 or diff_at + 4 > len(o) or diff_at + _read_int32(o, diff_at)[0] != len(o) - 1:
        return None
    return _RAW_FIELD_NAME + o


def _diff_offset(o: bytes) -> int:
    """Where ``o``'s diff document starts, when ``o`` begins ``$v: 2, diff: {``; else -1."""
    for header in _V2_HEADERS:
        if o.startswith(header, 4):
            return 4 + len(header)
    return -1


def _simple_update_description(o: bytes) -> bytes | None:
    """The ``updateDescription`` element (type, name, value) of ``o``, or None if not common.

    ``o`` is the whole BSON of the entry's ``o`` (length prefix checked by the caller).
    """
    diff_at = _diff_offset(o)
    if diff_at < 0:
        return None
    if diff_at + 4 > len(o):
        return None  # cut short: the reference reports it
    diff_end = diff_at + _read_int32(o, diff_at)[0]
    if diff_end != len(o) - 1:
        return None  # more fields after diff, or a malformed diff
    section = diff_at + 4
    if section + 7 > len(o):
        return None  # an empty diff: the reference reports it
    section_end = section + 3 + _read_int32(o, section + 3)[0]
    if o.startswith(b"\x03u\x00", section) and section_end == diff_end - 1 == len(o) - 2:
        # The commonest diff, {u: {...}} alone: its body is updatedFields'.
        if section_end < section + 8 or o[section_end - 1] != 0 or o[diff_end - 1] != 0:
            return None
        body = o[section + 7 : section_end - 1]
    else:
        updated: list[bytes] = []
        try:
            _document_diff(o, diff_at, b"", updated)
        except (_Unsupported, ValueError, IndexError, struct.error):
            return None
        body = b"".join(updated)
    size = len(body)
    return b"".join(
        (
            _FIELD_NAME,
            _pack_int32(size + _DESCRIPTION_OVERHEAD),
            _UPDATED_FIELDS,
            _pack_int32(size + 5),
            body,
            b"\x00",
            _EMPTY_LISTS,
        )
    )


def _elements(o: bytes, at: int) -> list[tuple[int, bytes, int, int]]:
    found = elements(o, at)
    if found is None:
        raise _Unsupported
    return found


def _document_diff(o: bytes, at: int, prefix: bytes, updated: list[bytes]) -> None:
    """A document diff: ``u`` then ``i`` sections, then ``s<field>`` sub-diffs.

    Every element of a document diff is a document, so the walk is inline (no generic
    element list): this runs for a quarter of the oplog.
    """
    end = at + _read_int32(o, at)[0] - 1
    if end >= len(o) or o[end] != 0:
        raise _Unsupported
    pos = at + 4
    if pos >= end:
        raise _Unsupported  # an empty diff is an error the reference reports
    previous = 0
    in_sub_diffs = False
    while pos < end:
        if o[pos] != 0x03:
            raise _Unsupported
        name_end = o.index(0, pos + 1, end)
        value_at = name_end + 1
        value_end = value_at + _read_int32(o, value_at)[0]
        if value_end < value_at + 5 or value_end > end or o[value_end - 1] != 0:
            raise _Unsupported
        name = o[pos + 1 : name_end]
        rank = _SECTION_RANK.get(name)
        if rank is not None and not in_sub_diffs and rank > previous:
            previous = rank
            if not prefix:  # at the root the elements keep their names: copy the body
                updated.append(o[value_at + 4 : value_end - 1])
            else:
                for inner_kind, inner_name, inner_at, inner_end in _elements(o, value_at):
                    updated.append(
                        b"".join(
                            (
                                bytes((inner_kind,)),
                                prefix,
                                inner_name,
                                b"\x00",
                                o[inner_at:inner_end],
                            )
                        )
                    )
        elif name[:1] == b"s":
            in_sub_diffs = True
            _sub_diff(o, value_at, prefix + name[1:] + b".", updated)
        else:
            raise _Unsupported
        pos = value_end


def _sub_diff(o: bytes, at: int, prefix: bytes, updated: list[bytes]) -> None:
    if not o.startswith(_ARRAY_HEADER, at + 4):
        _document_diff(o, at, prefix, updated)
        return
    end = at + _read_int32(o, at)[0] - 1
    if end >= len(o) or o[end] != 0:
        raise _Unsupported
    pos = at + 4 + len(_ARRAY_HEADER)
    while pos < end:  # inline, as in _document_diff
        kind = o[pos]
        name_end = o.index(0, pos + 1, end)
        value_at = name_end + 1
        size = value_size(o, kind, value_at)
        if size is None or value_at + size > end:
            raise _Unsupported
        value_end = value_at + size
        digits = o[pos + 2 : name_end]
        if not (digits.isdigit() and int(digits) <= _INT32_MAX):
            raise _Unsupported
        # The index as the server prints it: leading zeros dropped ("01" -> "1").
        path = prefix + (digits if digits[:1] != b"0" or digits == b"0" else b"%d" % int(digits))
        section = o[pos + 1]
        if section == 0x75:  # u
            updated.append(b"".join((bytes((kind,)), path, b"\x00", o[value_at:value_end])))
        elif section == 0x73 and kind == 0x03:  # s
            _sub_diff(o, value_at, path + b".", updated)
        else:
            raise _Unsupported  # l (truncation), or a malformed entry
        pos = value_end
    if pos != end:
        raise _Unsupported
