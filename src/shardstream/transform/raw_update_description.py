"""Layer 2, fast path: ``updateDescription`` of a simple ``$v:2`` update, from raw bytes.

Most delta updates only set or add top-level fields: ``o`` is
``{$v: 2, diff: {u: {...}, i: {...}}}``.  Their ``updatedFields`` is the ``u``
section's elements followed by the ``i`` section's, byte for byte, and nothing is
removed or truncated.  Any other diff (deletes, sub-diffs, binary sections, odd
types) returns None, and the caller decodes it for the reference parser
(:func:`shardstream.transform.update_description.parse_update_diff`).
"""

from __future__ import annotations

from typing import Final

_V2_HEADERS: Final = (
    b"\x10$v\x00\x02\x00\x00\x00\x03diff\x00",  # $v: int32 2
    b"\x12$v\x00\x02\x00\x00\x00\x00\x00\x00\x00\x03diff\x00",  # $v: int64 2
)
_SECTION_ORDER: Final = {b"\x03u\x00": 0, b"\x03i\x00": 1}
_FIELD_NAME: Final = b"\x03updateDescription\x00"
_UPDATED_FIELDS: Final = b"\x03updatedFields\x00"
_EMPTY_LISTS: Final = (
    b"\x04removedFields\x00\x05\x00\x00\x00\x00\x04truncatedArrays\x00\x05\x00\x00\x00\x00\x00"
)


def simple_update_description(o: bytes) -> bytes | None:
    """The ``updateDescription`` element (type, name, value) of ``o``, or None if not simple.

    ``o`` is the whole BSON of the entry's ``o`` (length prefix checked by the caller).
    """
    for header in _V2_HEADERS:
        if o.startswith(header, 4):
            diff_at = 4 + len(header)
            break
    else:
        return None
    diff_end = diff_at + int.from_bytes(o[diff_at : diff_at + 4], "little")
    if diff_end != len(o) - 1 or o[diff_end - 1] != 0:
        return None  # more fields after diff, or a malformed diff
    pos = diff_at + 4
    last = diff_end - 1  # the diff's closing NUL
    if pos == last:
        return None  # an empty diff is an error the reference reports
    body = b""
    previous = -1
    while pos < last:
        rank = _SECTION_ORDER.get(o[pos : pos + 3])
        if rank is None or rank <= previous:
            return None
        previous = rank
        size = int.from_bytes(o[pos + 3 : pos + 7], "little")
        section_end = pos + 3 + size
        if size < 5 or section_end > last or o[section_end - 1] != 0:
            return None
        body += o[pos + 7 : section_end - 1]
        pos = section_end
    if pos != last:
        return None
    updated = (len(body) + 5).to_bytes(4, "little") + body + b"\x00"
    value_size = 4 + len(_UPDATED_FIELDS) + len(updated) + len(_EMPTY_LISTS)
    return _FIELD_NAME + value_size.to_bytes(4, "little") + _UPDATED_FIELDS + updated + _EMPTY_LISTS
