"""Fast path: Extended JSON written straight from an event's BSON bytes.

The text is exactly what ``bson.json_util.dumps(bson.decode(raw), json_options=...)`` writes
for the same bytes, canonical or relaxed (the twin of :mod:`shardstream.transform.extended_json`),
without building the Python values first: one walk over the bytes, each element written by
its type byte. Decoding quirks json_util's output depends on are kept:

- a subdocument shaped like a DBRef (``$ref`` a string, ``$id`` present, ``$db`` a string,
  null or absent) is written ``$ref``, ``$id``, ``$db`` (unless null) first, as pymongo
  decodes it to a ``DBRef`` and writes ``DBRef.as_doc()``;
- a DBPointer is written as that DBRef, a Symbol as a string, Undefined as null;
- a regex's flags are the known ones (``ilmsux``), each once, in that order.

One difference, on purpose: a field name repeated inside one document (the server's
``updatedFields`` can hold one) is written twice, as the bytes hold it, where a decoded
dict would keep one pair.

The events reaching it are valid and nested at most :data:`MAX_EVENT_NESTING` levels: the
fast path copies only bytes ``bson_check`` vouches for, the reference path writes what it
decoded, and every path refuses an entry nested deeper than the server allows
(:mod:`shardstream.oplog.bson_depth`). Should invalid or deeper bytes reach it anyway, it
raises an :class:`OplogError` naming what was expected, never a ``ValueError`` or a
``RecursionError``.
"""

from __future__ import annotations

import base64
import datetime
import math
import struct
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Final

from bson.decimal128 import Decimal128

from shardstream.errors import OplogError
from shardstream.oplog.bson_depth import MAX_NESTING

try:
    from shardstream.transform.raw._ejson import dumps as _compiled
except ImportError:  # installed without a C compiler: the walker writes everything
    _compiled = None  # type: ignore[assignment]

_I32: Final = struct.Struct("<i").unpack_from
_I64: Final = struct.Struct("<q").unpack_from
_F64: Final = struct.Struct("<d").unpack_from
_U32_PAIR: Final = struct.Struct("<II").unpack_from  # a Timestamp: increment, then time
_quote: Final[Callable[[str], str]] = encode_basestring_ascii
_EPOCH: Final = datetime.datetime(1970, 1, 1)
_MAX_ISO_MS: Final = 253402300799999  # 9999-12-31T23:59:59.999Z, json_util's _MAX_UTC_MS
_REGEX_FLAGS: Final = "ilmsux"  # json_util writes the flags it knows, in this order
# An event nests like the entry it comes from, or less (fullDocument sits where o sat); one
# level of margin. Also the compiled writer's MAX_DEPTH. Two Python frames per level.
MAX_EVENT_NESTING: Final = MAX_NESTING + 1


def bson_to_json(raw: bytes, *, relaxed: bool = False) -> str:
    """One BSON document as Extended JSON text (canonical unless ``relaxed``).

    >>> import bson
    >>> bson_to_json(bson.encode({"a": 1, "b": [1.5, "x"]}))
    '{"a": {"$numberInt": "1"}, "b": [{"$numberDouble": "1.5"}, "x"]}'
    >>> bson_to_json(bson.encode({"a": 1, "b": [1.5, "x"]}), relaxed=True)
    '{"a": 1, "b": [1.5, "x"]}'

    The compiled writer (``_ejson.c``) takes the common case; what it leaves (a ``$ref``
    subdocument, Decimal128, malformed bytes) is written by :func:`walk_bson_to_json`.

    Raises:
        OplogError: ``raw`` is not one well-formed BSON document, or nests deeper than
            :data:`MAX_EVENT_NESTING`.
    """
    if _compiled is not None:
        text = _compiled(raw, relaxed)
        if text is not None:
            return text
    return walk_bson_to_json(raw, relaxed=relaxed)


def walk_bson_to_json(raw: bytes, *, relaxed: bool = False) -> str:
    """:func:`bson_to_json` in Python alone: the reference the compiled writer follows."""
    out: list[str] = []
    try:
        end = _document(raw, 0, out, relaxed, False, True, 0)
    except (IndexError, struct.error, UnicodeDecodeError, ValueError) as exc:
        raise OplogError(
            f"expected an event of well-formed BSON for Extended JSON, got bytes that fail: {exc}"
        ) from exc
    if end != len(raw):
        raise OplogError(f"expected one BSON document of {len(raw)} bytes, its length says {end}")
    return "".join(out)


def _document(
    raw: bytes, start: int, out: list[str], relaxed: bool, is_array: bool, top: bool, depth: int
) -> int:
    """Write the document (or array) at ``start``, ``depth`` levels down; return its end."""
    if depth > MAX_EVENT_NESTING:
        raise ValueError(
            f"expected at most {MAX_EVENT_NESTING} levels of nested documents, got more"
        )
    size: int = _I32(raw, start)[0]
    end = start + size - 1
    if size < 5 or end >= len(raw) or raw[end] != 0:
        raise ValueError(f"expected a BSON document of {size} bytes ending in NUL at {start}")
    if not top and not is_array and raw.find(b"$ref\x00", start, end) >= 0:
        _dbref_or_document(raw, start, end, out, relaxed, depth)
        return end + 1
    out.append("[" if is_array else "{")
    pos = start + 4
    while pos < end:
        if pos > start + 4:
            out.append(", ")
        stop = raw.index(0, pos + 1)
        if not is_array:
            out.append(_quote(raw[pos + 1 : stop].decode()) + ": ")
        pos = _value(raw, raw[pos], stop + 1, out, relaxed, depth)
    if pos != end:
        raise ValueError(
            f"expected the document at {start} to end at {end}, its fields end at {pos}"
        )
    out.append("]" if is_array else "}")
    return end + 1


def _value(raw: bytes, kind: int, pos: int, out: list[str], relaxed: bool, depth: int) -> int:
    """Write one value of BSON type ``kind`` at ``pos``; return the offset past it."""
    if kind == 0x02 or kind == 0x0E:  # string, symbol (pymongo decodes a symbol to str)
        n: int = _I32(raw, pos)[0]
        out.append(_quote(raw[pos + 4 : pos + 3 + n].decode()))
        return pos + 4 + n
    if kind == 0x10:  # int32
        value: int = _I32(raw, pos)[0]
        out.append(str(value) if relaxed else f'{{"$numberInt": "{value}"}}')
        return pos + 4
    if kind == 0x03 or kind == 0x04:  # document, array
        return _document(raw, pos, out, relaxed, kind == 0x04, False, depth + 1)
    if kind == 0x01:
        out.append(_double(_F64(raw, pos)[0], relaxed))
        return pos + 8
    if kind == 0x07:
        out.append(f'{{"$oid": "{raw[pos : pos + 12].hex()}"}}')
        return pos + 12
    if kind == 0x09:
        out.append(_date(_I64(raw, pos)[0], relaxed))
        return pos + 8
    if kind == 0x08:
        flag = raw[pos]
        if flag > 1:
            raise ValueError(f"expected a boolean byte 0 or 1 at {pos}, got {flag}")
        out.append("true" if flag else "false")
        return pos + 1
    if kind == 0x12:  # int64
        value = _I64(raw, pos)[0]
        out.append(str(value) if relaxed else f'{{"$numberLong": "{value}"}}')
        return pos + 8
    if kind == 0x0A or kind == 0x06:  # null, undefined (pymongo decodes both to None)
        out.append("null")
        return pos
    return _rare_value(raw, kind, pos, out, relaxed, depth)


def _rare_value(raw: bytes, kind: int, pos: int, out: list[str], relaxed: bool, depth: int) -> int:
    if kind == 0x11:  # timestamp: increment, then time
        inc, time = _U32_PAIR(raw, pos)
        out.append(f'{{"$timestamp": {{"t": {time}, "i": {inc}}}}}')
        return pos + 8
    if kind == 0x05:
        return _binary(raw, pos, out)
    if kind == 0x13:
        out.append(f'{{"$numberDecimal": "{Decimal128.from_bid(raw[pos : pos + 16])}"}}')
        return pos + 16
    if kind == 0x0B:  # regex: two C strings
        stop = raw.index(0, pos)
        flags_stop = raw.index(0, stop + 1)
        flags = raw[stop + 1 : flags_stop].decode()
        known = "".join(flag for flag in _REGEX_FLAGS if flag in flags)
        pattern = _quote(raw[pos:stop].decode())
        out.append(f'{{"$regularExpression": {{"pattern": {pattern}, "options": "{known}"}}}}')
        return flags_stop + 1
    if kind == 0x0D:  # code
        n: int = _I32(raw, pos)[0]
        out.append(f'{{"$code": {_quote(raw[pos + 4 : pos + 3 + n].decode())}}}')
        return pos + 4 + n
    if kind == 0x0F:  # code with scope: total size, code string, scope document
        n = _I32(raw, pos + 4)[0]
        out.append(f'{{"$code": {_quote(raw[pos + 8 : pos + 7 + n].decode())}, "$scope": ')
        end = _document(raw, pos + 8 + n, out, relaxed, False, False, depth + 1)
        out.append("}")
        return end
    if kind == 0x0C:  # DBPointer: namespace string + ObjectId, decoded as a DBRef
        n = _I32(raw, pos)[0]
        ref = _quote(raw[pos + 4 : pos + 3 + n].decode())
        oid = raw[pos + 4 + n : pos + 16 + n].hex()
        out.append(f'{{"$ref": {ref}, "$id": {{"$oid": "{oid}"}}}}')
        return pos + 16 + n
    if kind == 0xFF:
        out.append('{"$minKey": 1}')
        return pos
    if kind == 0x7F:
        out.append('{"$maxKey": 1}')
        return pos
    raise ValueError(f"expected a known BSON type byte, got 0x{kind:02x} (value at offset {pos})")


def _double(value: float, relaxed: bool) -> str:
    if math.isnan(value):
        return '{"$numberDouble": "NaN"}'
    if math.isinf(value):
        return '{"$numberDouble": "Infinity"}' if value > 0 else '{"$numberDouble": "-Infinity"}'
    return repr(value) if relaxed else f'{{"$numberDouble": "{value!r}"}}'


def _date(millis: int, relaxed: bool) -> str:
    if relaxed and 0 <= millis <= _MAX_ISO_MS:
        moment = _EPOCH + datetime.timedelta(milliseconds=millis)
        fraction = f".{millis % 1000:03d}" if millis % 1000 else ""
        return f'{{"$date": "{moment:%Y-%m-%dT%H:%M:%S}{fraction}Z"}}'
    return f'{{"$date": {{"$numberLong": "{millis}"}}}}'


def _binary(raw: bytes, pos: int, out: list[str]) -> int:
    n: int = _I32(raw, pos)[0]
    subtype = raw[pos + 4]
    data_start = pos + 5
    if subtype == 2:  # the old binary subtype repeats the length inside
        inner: int = _I32(raw, data_start)[0]
        if inner != n - 4:
            raise ValueError(f"expected binary subtype 2's inner length {n - 4}, got {inner}")
        data_start += 4
    data = raw[data_start : pos + 5 + n]
    text = base64.b64encode(data).decode()
    out.append(f'{{"$binary": {{"base64": "{text}", "subType": "{subtype:02x}"}}}}')
    return pos + 5 + n


def _dbref_or_document(
    raw: bytes, start: int, end: int, out: list[str], relaxed: bool, depth: int
) -> None:
    """A subdocument holding ``$ref``: a DBRef's field order if pymongo would decode one."""
    fields: dict[str, tuple[int, str]] = {}  # name -> (type byte, written value)
    order: list[tuple[str, str]] = []
    pos = start + 4
    while pos < end:
        kind = raw[pos]
        stop = raw.index(0, pos + 1)
        name = raw[pos + 1 : stop].decode()
        written: list[str] = []
        pos = _value(raw, kind, stop + 1, written, relaxed, depth)
        value = "".join(written)
        fields[name] = (kind, value)
        order.append((name, value))
    strings = (0x02, 0x0D, 0x0E)  # str, and Code and Symbol, which pymongo decodes to str types
    ref, db = fields.get("$ref"), fields.get("$db")
    is_dbref = (
        ref is not None
        and ref[0] in strings
        and "$id" in fields
        and (db is None or db[0] in (*strings, 0x0A, 0x06))
    )
    if is_dbref:
        first = [("$ref", fields["$ref"][1]), ("$id", fields["$id"][1])]
        if db is not None and db[0] not in (0x0A, 0x06):  # a null $db is dropped
            first.append(("$db", db[1]))
        rest = [(k, v) for k, v in _last_values(order) if k not in ("$ref", "$id", "$db")]
        order = first + rest
    out.append("{" + ", ".join(f"{_quote(k)}: {v}" for k, v in order) + "}")


def _last_values(order: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Pairs as a dict keeps them: each name once, at its first place, with its last value."""
    values = dict(order)
    return list(values.items())
