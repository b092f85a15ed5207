"""An event's BSON without some of its top-level fields, and those fields as bytes.

For a reader that wants most of an event decoded but a large field kept as the bytes it is:
the sync decodes an insert's event without its ``fullDocument`` and hands the target that
document's own bytes (decoding it, then having pymongo encode it again, was the largest cost
of the sync's reading thread; ``benchmarks/README.md``, "Less CPU per event").

:func:`split_fields` is the compiled cut (``_event_split.c``) where it was built, else
:func:`split_fields_python`; ``tests/transform/raw/test_event_split.py`` holds the two to
each other and to ``bson.decode``.  Both frame the top level only: a value cut out is not
validated, so only bytes a writer vouched for (the fast path's, checked by ``bson_check``,
or the reference path's encoder) may be passed on undecoded.
"""

from __future__ import annotations

import struct
from typing import Final

from shardstream.transform.raw.oplog_entry import elements

try:
    from shardstream.transform.raw._ejson import split_fields as _compiled
except ImportError:  # installed without a C compiler: the Python walk cuts instead
    _compiled = None  # type: ignore[assignment]

Split = tuple[bytes, tuple[tuple[int, bytes] | None, ...]]
"""(the rest of the document, per name None or (type byte, value bytes))."""

_pack_int32: Final = struct.Struct("<i").pack
MAX_NAMES: Final = 8  # as _event_split.c's MAX_NAMES
# Types whose value is 5 bytes or more: a string (its length counts its NUL), a binary (its
# length, never negative, and subtype), a document.
_AT_LEAST_5: Final = frozenset((0x02, 0x03, 0x04, 0x05, 0x0D, 0x0E, 0x0F))


def split_fields_python(raw: bytes, names: tuple[str, ...]) -> Split | None:
    """The Python walk of :func:`split_fields`, with the same results."""
    _check_names(names)
    found = elements(raw, 0) if len(raw) >= 5 and _pack_int32(len(raw)) == raw[:4] else None
    if found is None:  # not one framed document, or a regex / DBPointer (not sized there)
        return None
    if any(end - start < 5 for kind, _, start, end in found if kind in _AT_LEAST_5):
        return None  # shorter than its type allows, as the compiled cut refuses it
    wanted = {name.encode(): n for n, name in enumerate(names)}
    values: list[tuple[int, bytes] | None] = [None] * len(names)
    parts, taken = [], 4
    for kind, name, value_start, value_end in found:
        n = wanted.get(name)
        if n is None:
            continue
        if values[n] is not None:  # twice: a decoded dict keeps the last, a cut the first
            return None
        values[n] = (kind, raw[value_start:value_end])
        element_start = value_start - len(name) - 2  # the type byte, the name, its NUL
        parts.append(raw[taken:element_start])
        taken = value_end
    parts.append(raw[taken:])
    body = b"".join(parts)
    return _pack_int32(len(body) + 4) + body, tuple(values)


def _check_names(names: tuple[str, ...]) -> None:
    # As the compiled cut checks them: it compares C strings, one slot per name.
    if (
        len(names) > MAX_NAMES
        or len(set(names)) != len(names)
        or not all(name and "\x00" not in name for name in names)
    ):
        raise ValueError(
            f"expected at most {MAX_NAMES} distinct non-empty str names without NUL, got {names!r}"
        )


def split_fields(raw: bytes, names: tuple[str, ...]) -> Split | None:
    """``raw`` without its top-level fields ``names`` (its length prefix set to the new
    size), and each one's type byte and value bytes (None where absent).

    None when ``raw`` is not one document framed element by element, holds a regex or a
    DBPointer at its top level, or holds one of ``names`` twice: the caller decodes it whole.

    Raises:
        ValueError: more than 8 names, a name twice, an empty name or one holding NUL.

    >>> import bson
    >>> rest, values = split_fields(bson.encode({"a": 1, "b": {"c": 2}}), ("b", "z"))
    >>> bson.decode(rest), values[0][0], bson.decode(values[0][1]), values[1]
    ({'a': 1}, 3, {'c': 2}, None)
    """
    if _compiled is not None:
        return _compiled(raw, names)
    return split_fields_python(raw, names)
