"""Fast path: a change event that stays BSON until its document is read.

The live merged stream's fast path (:mod:`shard_reader`) writes each CRUD event
as BSON with :class:`~shardstream.transform.raw.pipeline.FastShardPipeline`; an
:class:`EncodedEvent` carries those bytes through the merge, which only needs the
token's ``_data``, and decodes them when someone reads the document.

Decoding gives the reference path's dict exactly: the reference copies the values of
the entry as the tailer decoded them (``OPLOG_CODEC_OPTIONS``), and the fast path
copies the same bytes, so decoding them with the same options brings back the same
types (Int64, tz-aware datetimes, BinData 4 as ``Binary``) and field order.  The one
structure a ``dict`` cannot hold is a repeated name in ``updatedFields`` (a ``$v:2``
diff that sets ``a.b`` both directly and through a sub-diff): the reference keeps it
as a :class:`~shardstream.transform.field_list.FieldList`, and so does
:func:`decode_event`.
"""

from __future__ import annotations

import struct
from typing import Any, Final

import bson

from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.resume_token import ResumeToken, ResumeTokenData, decode_token
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.field_list import FieldList
from shardstream.transform.raw.oplog_entry import value_size

_OPERATION_TYPE: Final = b"operationType"
_OPERATION_TYPE_ELEMENT: Final = b"\x02" + _OPERATION_TYPE + b"\x00"
_LEADING_ID: Final = b"\x03_id\x00"
_UPDATE_DESCRIPTION: Final = b"updateDescription"
_UPDATED_FIELDS: Final = b"updatedFields"
_UPDATED_FIELDS_ELEMENT: Final = b"\x03" + _UPDATED_FIELDS + b"\x00"
_pack_int32: Final = struct.Struct("<i").pack
_read_int32: Final = struct.Struct("<i").unpack_from
_REGEX: Final = 0x0B
_DB_POINTER: Final = 0x0C


class EncodedEvent(ChangeEvent):
    """A change event written by the fast path: its BSON and its token, decoded on demand.

    Reads like the :class:`ChangeEvent` the reference path would have built for the
    same entry: :attr:`document` and :attr:`token_data` are decoded on first use.

    Args:
        raw: the event's BSON, as the server would send it.
        key: the token's ``_data`` as ASCII bytes (the fast path's sort key).
        shard: the shard the event came from.
    """

    __slots__ = ("_document", "_operation_type", "_token_data", "raw")

    def __init__(self, raw: bytes, key: bytes, shard: str) -> None:
        # Not the dataclass __init__: the decoded fields stay empty until read.
        self.raw = raw
        self.token = ResumeToken(key.decode())
        self.shard = shard
        self.pre_image_id = None
        self.raw_update = None
        self.fragment_of = None
        self._document: dict[str, Any] | None = None
        self._token_data: ResumeTokenData | None = None
        self._operation_type: str | None = None

    @property
    def document(self) -> dict[str, Any]:
        """The event as the reference path builds it (see :func:`decode_event`)."""
        document = self._document
        if document is None:
            document = self._document = decode_event(self.raw)
        return document

    @document.setter
    def document(self, value: dict[str, Any]) -> None:
        # As on ChangeEvent; ``raw`` is not rewritten (no stage of the live merge edits events).
        self._document = value

    @property
    def token_data(self) -> ResumeTokenData:
        """The decoded fields of the event's token."""
        data = self._token_data
        if data is None:
            data = self._token_data = decode_token(self.token)
        return data

    @token_data.setter
    def token_data(self, value: ResumeTokenData) -> None:
        self._token_data = value

    @property
    def operation_type(self) -> str:
        """The event's ``operationType`` (the merge asks for every event's: read from the BSON)."""
        kind = self._operation_type
        if kind is None:
            kind = self._operation_type = operation_type_of(self.raw)
        return kind


def decode_event(raw: bytes) -> dict[str, Any]:
    """Decode an event's BSON into the dict the reference path would have built.

    Raises:
        bson.errors.InvalidBSON: the event is not valid BSON (the fast path frames the
            values it copies but does not validate them).
    """
    document: dict[str, Any] = bson.decode(raw, codec_options=OPLOG_CODEC_OPTIONS)
    description = document.get("updateDescription")
    if isinstance(description, dict) and "updatedFields" in description:
        repeated = _repeated_updated_fields(raw, len(description["updatedFields"]))
        if repeated is not None:
            description["updatedFields"] = repeated
    return document


def leading_id(raw: bytes) -> dict[str, Any] | None:
    """The event's ``_id`` (its resume token) when it leads the event, as the fast path
    writes it, decoded alone; None otherwise (the caller decodes the event).

    >>> leading_id(bson.encode({"_id": {"_data": "82"}, "operationType": "insert"}))
    {'_data': '82'}
    """
    if raw[4:9] != _LEADING_ID:
        return None
    size: int = _read_int32(raw, 9)[0]
    token: dict[str, Any] = bson.decode(raw[9 : 9 + size], codec_options=OPLOG_CODEC_OPTIONS)
    return token


def operation_type_of(raw: bytes) -> str:
    """The ``operationType`` of an event's BSON.

    The fast path writes it right after a leading ``_id``; otherwise (session fields
    first) the top-level fields are walked, never searched: ``lsid``'s binaries hold any bytes.
    """
    at = -1
    if raw[4:9] == _LEADING_ID:
        at = 9 + _read_int32(raw, 9)[0]
        at = at + 2 + len(_OPERATION_TYPE) if raw[at : at + 15] == _OPERATION_TYPE_ELEMENT else -1
    if at < 0:
        at = _value_at(raw, 0, 0x02, _OPERATION_TYPE)
    if at < 0:
        raise ValueError("expected an event with an operationType, got none")
    size: int = _read_int32(raw, at)[0]
    return raw[at + 4 : at + 3 + size].decode()


def _repeated_updated_fields(raw: bytes, decoded: int) -> FieldList | None:
    """``updatedFields`` as a FieldList if a name repeats in it (a dict keeps one), else None.

    ``decoded`` is how many names the decoded dict holds; the BSON holds more iff one repeats.
    """
    at = _value_at(raw, 0, 0x03, _UPDATE_DESCRIPTION)
    if at >= 0 and raw[at + 4 : at + 19] == _UPDATED_FIELDS_ELEMENT:
        at += 19  # written first, by the fast path as by the reference
    elif at >= 0:
        at = _value_at(raw, at, 0x03, _UPDATED_FIELDS)
    if at < 0:
        return None
    spans = _element_spans(raw, at)
    if len(spans) <= decoded:
        return None
    pairs: list[tuple[str, Any]] = []
    for start, end in spans:
        wrapped = _pack_int32(end - start + 5) + raw[start:end] + b"\x00"
        value: dict[str, Any] = bson.decode(wrapped, codec_options=OPLOG_CODEC_OPTIONS)
        pairs.extend(value.items())
    return FieldList(pairs)


def _value_at(raw: bytes, at: int, kind: int, name: bytes) -> int:
    """Where the value of field ``name`` (of type ``kind``) of the document at ``raw[at]``
    starts; -1 if it has none."""
    end = at + _read_int32(raw, at)[0] - 1
    position = at + 4
    while position < end:
        name_end = raw.index(0, position + 1)
        element_kind = raw[position]
        if element_kind == kind and raw[position + 1 : name_end] == name:
            return name_end + 1
        position = _value_end(raw, element_kind, name_end + 1)
    return -1


def _element_spans(raw: bytes, at: int) -> list[tuple[int, int]]:
    """(start, end) of each element (type byte to value end) of the document at ``raw[at]``.

    Only called on BSON that has just decoded, so it is well-formed.
    """
    spans = []
    end = at + _read_int32(raw, at)[0] - 1
    position = at + 4
    while position < end:
        value_end = _value_end(raw, raw[position], raw.index(0, position + 1) + 1)
        spans.append((position, value_end))
        position = value_end
    return spans


def _value_end(raw: bytes, kind: int, at: int) -> int:
    size = value_size(raw, kind, at)
    if size is not None:
        return at + size
    if kind == _REGEX:  # two C strings
        return raw.index(0, raw.index(0, at) + 1) + 1
    if kind == _DB_POINTER:  # a string, then an ObjectId
        length: int = _read_int32(raw, at)[0]
        return at + 4 + length + 12
    raise ValueError(f"expected a BSON type, got 0x{kind:02x} at byte {at}")
