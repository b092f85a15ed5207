"""The server's nesting limit for BSON, applied to every oplog entry before it is decoded.

server: ``BSONDepth::kDefaultMaxAllowableDepth`` (``bson/bson_depth.h``) is 200, and
``validateBSON`` (``bson/bson_validate.cpp``, ``ValidateBuffer::_pushFrame``) fails any BSON
nested deeper than that below its top ("BSONObj exceeds maximum nested object depth",
``Overflow``); a code-with-scope value takes two levels there (its string and its scope).
Stored documents are held 20 levels lower (``getMaxDepthForUserStorage``: 200 -
``kExtraSystemDepthLevels``, checked by ``validateDepth`` on insert) precisely so that system
documents wrapping them -- oplog entries: a document sits 1 level down in a CRUD entry, 4 in a
transaction's ``applyOps`` -- stay within 200. So an entry of a real oplog never nests deeper
than :data:`MAX_NESTING`, and one that does is refused, on every path (the fast path's check,
the reference decode, and therefore the JSON writer), with the same error. The change stream
adds no rule of its own for copied BSON (``Document::toBson`` checks only the levels it builds,
against the same 200).

Entries with too few bytes that could open a level (``bytes.count``, in C) are passed at once;
the others are measured on the decoded entry (:func:`deepest_decoded`), or, when pymongo's
decoder ran out of stack or the entry holds a DBRef or a code with scope, on its framing
(:func:`deepest_in_bytes`: types and lengths only, without recursion, so a document nested
100,000 deep costs no stack).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Final

from bson.code import Code
from bson.dbref import DBRef

MAX_NESTING: Final = 200  # server: BSONDepth::kDefaultMaxAllowableDepth
_INT32: Final = struct.Struct("<i").unpack_from
_FIXED_SIZES: Final = {
    0x01: 8, 0x06: 0, 0x07: 12, 0x08: 1, 0x09: 8, 0x0A: 0,
    0x10: 4, 0x11: 8, 0x12: 8, 0x13: 16, 0x7F: 0, 0xFF: 0,
}  # fmt: skip
_NESTED: Final = (0x03, 0x04)
_CODE_WITH_SCOPE: Final = 0x0F
_NESTED_TYPES: Final = (dict, list)
_OPENING: Final = frozenset((dict, list, DBRef, Code))  # decoded values that may nest


def nesting_beyond_limit(raw: bytes) -> int | None:
    """How deep ``raw`` nests below its top, when deeper than :data:`MAX_NESTING`; else None.

    Only framing is read; where the framing is broken the walk stops (the decoder reports
    that) and what it saw so far decides.
    """
    if not may_nest_too_deep(raw):
        return None
    deepest = deepest_in_bytes(raw)
    return deepest if deepest > MAX_NESTING else None


def may_nest_too_deep(raw: bytes) -> bool:
    """False when ``raw`` has too few type bytes that open a level to be too deep (a C count).

    Each nested level is an element whose type byte is 0x03 or 0x04 (0x0F: two levels).
    """
    return raw.count(3) + raw.count(4) + 2 * raw.count(_CODE_WITH_SCOPE) > MAX_NESTING


def deepest_decoded(entry: Mapping[str, Any]) -> int | None:
    """How deep a decoded entry nests below its top, as its bytes did; None: count the bytes.

    A level per dict and list, visited a level at a time (no recursion). A ``DBRef`` (a
    document holding ``$ref``, or a DBPointer, which nests nothing) or a code with scope (two
    levels) cannot be told apart from its value: None, and :func:`deepest_in_bytes` counts.
    Much faster than the byte walk for a large document (a list of a million numbers).
    """
    level: list[Any] = [entry]
    depth = 0
    while True:
        deeper: list[Any] = []
        for container in level:
            values = container.values() if type(container) is dict else container
            kinds = set(map(type, values))  # in C: most containers hold no container
            if kinds.isdisjoint(_OPENING):
                continue
            if DBRef in kinds or (
                Code in kinds and any(type(v) is Code and v.scope is not None for v in values)
            ):
                return None
            deeper.extend(value for value in values if type(value) in _NESTED_TYPES)
        if not deeper:
            return depth
        depth += 1
        level = deeper


def deepest_in_bytes(raw: bytes) -> int:
    """The deepest level the framing of ``raw`` reaches (0: no nested document)."""
    ends = [len(raw) - 1]  # the end (final NUL) of each open document, outermost first
    pos = 4
    deepest = 0
    try:
        while ends:
            if pos >= ends[-1]:
                pos = ends.pop() + 1
                continue
            kind = raw[pos]
            value = raw.index(0, pos + 1, ends[-1]) + 1
            size = _FIXED_SIZES.get(kind)
            if size is None:
                size = _open(raw, kind, value, ends)
                deepest = max(deepest, len(ends) - 1)
            pos = value + size
    except (ValueError, IndexError, struct.error):
        pass  # broken framing: the decoder says what is wrong
    return deepest


def _open(raw: bytes, kind: int, value: int, ends: list[int]) -> int:
    """The size of a variable value at ``value`` to step over; its documents are pushed on
    ``ends`` (and 4 returned: the walk goes on inside).

    Raises:
        ValueError: a length that would not move the walk forward, or past its document.
    """
    if kind in _NESTED:
        _push(ends, value + _INT32(raw, value)[0] - 1, value)
        return 4
    if kind == _CODE_WITH_SCOPE:  # int32 total, string, scope document
        _push(ends, value + _INT32(raw, value)[0] - 1, value)
        scope = value + 8 + max(int(_INT32(raw, value + 4)[0]), 1)
        _push(ends, scope + _INT32(raw, scope)[0] - 1, scope)
        return scope + 4 - value
    if kind in (0x02, 0x0D, 0x0E):
        return 4 + max(int(_INT32(raw, value)[0]), 1)
    if kind == 0x05:
        return 5 + max(int(_INT32(raw, value)[0]), 0)
    if kind == 0x0C:
        return 16 + max(int(_INT32(raw, value)[0]), 1)
    if kind == 0x0B:
        return raw.index(0, raw.index(0, value) + 1) + 1 - value
    raise ValueError(f"not a BSON type: {kind}")


def _push(ends: list[int], end: int, start: int) -> None:
    if end < start + 4 or end > ends[-1]:
        raise ValueError("a document length that does not fit")
    ends.append(end)
