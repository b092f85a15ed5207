"""Layer 3, fast path: a change event that stays BSON until its document is read.

The live merged stream's fast path (:mod:`fast_shard_reader`) writes each CRUD event
as BSON with :class:`~shardstream.transform.fast_path.FastShardPipeline`; an
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
from bson.raw_bson import RawBSONDocument

from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.resume_token import ResumeToken, ResumeTokenData, decode_token
from shardstream.transform.change_event import ChangeEvent
from shardstream.transform.field_list import FieldList
from shardstream.transform.raw_entry import value_size

_OPERATION_TYPE: Final = b"operationType"
_NAME: Final = _OPERATION_TYPE + b"\x00"
_UPDATE_DESCRIPTION: Final = b"updateDescription"
_UPDATED_FIELDS: Final = b"updatedFields"
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

    def raw_document(self) -> RawBSONDocument:
        """The event's BSON as a ``RawBSONDocument`` (no decoding)."""
        return RawBSONDocument(self.raw)


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


def operation_type_of(raw: bytes) -> str:
    """The ``operationType`` of an event's BSON, found by walking its top-level fields.

    A walk rather than a search: fields before it (``lsid``'s binaries) hold any bytes.
    """
    for start, end in _element_spans(raw, 0):
        if raw[start] == 0x02 and raw[start + 1 : start + 2 + len(_OPERATION_TYPE)] == _NAME:
            return raw[start + 6 + len(_OPERATION_TYPE) : end - 1].decode()
    raise ValueError("expected an event with an operationType, got none")


def _repeated_updated_fields(raw: bytes, decoded: int) -> FieldList | None:
    """``updatedFields`` as a FieldList if a name repeats in it (a dict keeps one), else None.

    ``decoded`` is how many names the decoded dict holds; the BSON holds more iff one repeats.
    """
    at = _sub_document(raw, 0, _UPDATE_DESCRIPTION)
    at = _sub_document(raw, at, _UPDATED_FIELDS) if at >= 0 else -1
    spans = _element_spans(raw, at) if at >= 0 else []
    if len(spans) <= decoded:
        return None
    pairs: list[tuple[str, Any]] = []
    for start, end in spans:
        wrapped = _pack_int32(end - start + 5) + raw[start:end] + b"\x00"
        value: dict[str, Any] = bson.decode(wrapped, codec_options=OPLOG_CODEC_OPTIONS)
        pairs.extend(value.items())
    return FieldList(pairs)


def _sub_document(raw: bytes, at: int, name: bytes) -> int:
    """Where the sub-document ``name`` of the document at ``raw[at]`` starts; -1 if none."""
    for start, _end in _element_spans(raw, at):
        if raw[start] == 0x03 and raw[start + 1 : start + 2 + len(name)] == name + b"\x00":
            return start + 2 + len(name)
    return -1


def _element_spans(raw: bytes, at: int) -> list[tuple[int, int]]:
    """(start, end) of each element (type byte to value end) of the document at ``raw[at]``.

    Only called on BSON that has just decoded, so it is well-formed.
    """
    spans = []
    end = at + _read_int32(raw, at)[0] - 1
    position = at + 4
    while position < end:
        kind = raw[position]
        value_at = raw.index(0, position + 1) + 1
        size = value_size(raw, kind, value_at)
        if size is None:
            size = _unsized_value_size(raw, kind, value_at)
        spans.append((position, value_at + size))
        position = value_at + size
    return spans


def _unsized_value_size(raw: bytes, kind: int, at: int) -> int:
    """The types raw_entry leaves to the decoder: regex (two C strings) and DBPointer."""
    if kind == _REGEX:
        return raw.index(0, raw.index(0, at) + 1) + 1 - at
    if kind == _DB_POINTER:
        size: int = _read_int32(raw, at)[0]
        return 4 + size + 12
    raise ValueError(f"expected a BSON type, got 0x{kind:02x} at byte {at}")
