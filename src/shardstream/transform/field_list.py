"""Value type: a BSON document whose field names may repeat (server ``MutableDocument``).

The change stream's ``updatedFields`` (and ``disambiguatedPaths``) are built with
``MutableDocument::addField`` in ``change_stream_document_diff_parser.cpp``, which
appends without looking for an existing name, so one event can carry the same key
twice. A ``dict`` would silently keep one of them; :class:`FieldList` keeps every
pair in order and can encode them all.
"""

from __future__ import annotations

import struct
from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from typing import Any

import bson
from bson.codec_options import CodecOptions
from bson.errors import InvalidBSON
from bson.raw_bson import DEFAULT_RAW_BSON_OPTIONS, RawBSONDocument

__all__ = ["FieldList", "mapping_from_pairs"]

_INT32 = struct.Struct("<i")

# Value sizes of the fixed-width BSON types, by type byte.
_FIXED_SIZES = {
    0x01: 8, 0x06: 0, 0x07: 12, 0x08: 1, 0x09: 8, 0x0A: 0,
    0x10: 4, 0x11: 8, 0x12: 8, 0x13: 16, 0x7F: 0, 0xFF: 0,
}  # fmt: skip


class FieldList(Mapping[str, Any]):
    """An ordered list of ``(name, value)`` pairs that may repeat a name.

    Reads like a mapping whose lookups see the first pair of a name (as the
    server's ``Document::getField`` does), while ``items()``, ``values()``,
    iteration and ``len()`` cover every pair, repeats included.

    >>> fields = FieldList([("a.b", 2), ("a.b", 1)])
    >>> fields["a.b"], len(fields), list(fields.items())
    (2, 2, [('a.b', 2), ('a.b', 1)])
    """

    __slots__ = ("_first", "_pairs")

    def __init__(self, pairs: Iterable[tuple[str, Any]] = ()) -> None:
        self._pairs: tuple[tuple[str, Any], ...] = tuple(pairs)
        self._first: dict[str, Any] = {}
        for name, value in self._pairs:
            self._first.setdefault(name, value)

    @classmethod
    def from_bson(
        cls,
        data: bytes | RawBSONDocument,
        codec_options: CodecOptions[RawBSONDocument] = DEFAULT_RAW_BSON_OPTIONS,
    ) -> FieldList:
        """Decode one BSON document's top-level elements, repeated names included.

        Values decode as a ``RawBSONDocument`` would decode them (sub-documents
        stay raw); ``RawBSONDocument.items()`` alone would drop repeated names. When
        ``data`` is a ``RawBSONDocument`` without repeats, its own ``items()`` are used;
        otherwise values decode with ``codec_options``.

        Raises:
            bson.errors.InvalidBSON: ``data`` is not one well-formed document.
        """
        raw = bytes(data.raw if isinstance(data, RawBSONDocument) else data)
        elements = list(_elements(raw))
        names = {element[1 : element.index(b"\x00", 1)] for element in elements}
        if isinstance(data, RawBSONDocument) and len(names) == len(elements):
            # Without repeats the document's own items() are exact, and keep its codec options.
            return cls(data.items())
        pairs: list[tuple[str, Any]] = []
        for element in elements:
            wrapped = _INT32.pack(len(element) + 5) + element + b"\x00"
            pairs.extend(RawBSONDocument(wrapped, codec_options).items())
        return cls(pairs)

    @property
    def has_duplicates(self) -> bool:
        """Whether some name occurs in more than one pair."""
        return len(self._first) != len(self._pairs)

    def __getitem__(self, name: str) -> Any:
        return self._first[name]

    def __contains__(self, name: object) -> bool:
        return name in self._first

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def items(self) -> ItemsView[str, Any]:
        """Every ``(name, value)`` pair in order, repeated names included."""
        return _PairsView(self)

    def values(self) -> ValuesView[Any]:
        """Every value in order, including those of repeated names."""
        return _ValuesView(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FieldList):
            return self._pairs == other._pairs
        if isinstance(other, Mapping):
            # A plain mapping cannot hold repeats, so it only matches a list without them;
            # order counts because it counts in BSON.
            return not self.has_duplicates and list(other.items()) == list(self._pairs)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FieldList({list(self._pairs)!r})"

    def to_raw_bson(
        self, codec_options: CodecOptions[RawBSONDocument] = DEFAULT_RAW_BSON_OPTIONS
    ) -> RawBSONDocument:
        """Encode every pair in order, repeated names included.

        Nested ``FieldList`` values (also inside lists and dicts) are encoded the same
        way; pymongo's own encoder would look their names up and repeat the first value.
        """
        body = bytearray()
        for name, value in self._pairs:
            encoded = bson.encode({name: _encodable(value, codec_options)}, False, codec_options)
            body += encoded[4:-1]
        return RawBSONDocument(_INT32.pack(len(body) + 5) + bytes(body) + b"\x00", codec_options)


class _PairsView(ItemsView[str, Any]):
    _mapping: FieldList

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter(self._mapping._pairs)

    def __contains__(self, item: object) -> bool:
        return item in self._mapping._pairs


class _ValuesView(ValuesView[Any]):
    _mapping: FieldList

    def __iter__(self) -> Iterator[Any]:
        return (value for _, value in self._mapping._pairs)


def mapping_from_pairs(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any] | FieldList:
    """A ``dict`` of ``pairs``, or a :class:`FieldList` when a name repeats."""
    fields = FieldList(pairs)
    return fields if fields.has_duplicates else dict(fields._pairs)


def _encodable(value: Any, codec_options: CodecOptions[RawBSONDocument]) -> Any:
    if isinstance(value, FieldList):
        return value.to_raw_bson(codec_options)
    if isinstance(value, list | tuple):
        return [_encodable(item, codec_options) for item in value]
    if type(value) is dict:
        return {name: _encodable(item, codec_options) for name, item in value.items()}
    return value


def _elements(data: bytes) -> Iterator[bytes]:
    """Split one BSON document into its raw elements (type byte, name, value)."""
    if len(data) < 5 or _INT32.unpack_from(data)[0] != len(data) or data[-1] != 0:
        raise InvalidBSON(f"expected one BSON document, got {len(data)} bytes {data[:16]!r}")
    position, end = 4, len(data) - 1
    while position < end:
        kind = data[position]
        name_end = data.find(b"\x00", position + 1, end)
        if name_end < 0:
            raise InvalidBSON(f"unterminated field name at byte {position}")
        element_end = name_end + 1 + _value_size(data, kind, name_end + 1)
        if not name_end < element_end <= end:
            raise InvalidBSON(f"element at byte {position} runs past the document's end")
        yield data[position:element_end]
        position = element_end


def _value_size(data: bytes, kind: int, start: int) -> int:
    if kind in _FIXED_SIZES:
        return _FIXED_SIZES[kind]
    if kind == 0x0B:  # regex: pattern and options, two C strings
        options_start = data.find(b"\x00", start) + 1
        options_end = data.find(b"\x00", options_start) if options_start else -1
        if options_end < 0:
            raise InvalidBSON(f"unterminated regex at byte {start}")
        return options_end + 1 - start
    if start + 4 > len(data):
        raise InvalidBSON(f"truncated value at byte {start}")
    length: int = _INT32.unpack_from(data, start)[0]
    if kind in (0x02, 0x0D, 0x0E):  # string, code, symbol: length-prefixed, length excludes it
        return 4 + length
    if kind in (0x03, 0x04, 0x0F):  # document, array, code with scope: length includes itself
        return length
    if kind == 0x05:  # binary: length, subtype byte, bytes
        return 5 + length
    if kind == 0x0C:  # DBPointer: namespace string, then an ObjectId
        return 4 + length + 12
    raise InvalidBSON(f"unknown BSON type 0x{kind:02x} at byte {start}")
