"""Fast path: change events written as BSON by concatenating byte pieces.

A CRUD event's BSON is mostly constant per (namespace, collection UUID, operation
type): the field names, ``operationType``, ``ns`` and most of the resume token.
:class:`CrudEventTemplate` holds those pieces, derived once from the reference
token encoder (so the template cannot drift from it); each event then adds its
``ts``, ``wall``, ObjectId and document bodies, copied from the oplog entry's bytes.

:func:`encode_event_document` is the reference side: an event document (a dict of
BSON values, as the reference pipeline builds it) to the bytes the fast path must
produce.
"""

from __future__ import annotations

import binascii
import struct
import uuid as uuid_module
from collections.abc import Mapping
from typing import Any, Final

import bson
from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.resume_token import encode_token, event_token_data
from shardstream.transform.event_bson import EVENT_CODEC_OPTIONS as EVENT_CODEC_OPTIONS
from shardstream.transform.event_bson import encodable_description
from shardstream.transform.event_bson import encode_event_document as encode_event_document
from shardstream.transform.stages.ddl_description import namespace_field, split_namespace
from shardstream.transform.update.update_description import parse_update_diff

_INT32: Final = struct.Struct("<i")
_pack_int32: Final = _INT32.pack
_hexlify: Final = binascii.hexlify

_ID_FIELD: Final = b"\x03_id\x00"
_DATA_FIELD: Final = b"\x02_data\x00"
_CLUSTER_TIME_FIELD: Final = b"\x11clusterTime\x00"
_WALL_TIME_FIELD: Final = b"\x09wallTime\x00"
_COLLECTION_UUID_FIELD: Final = b"\x05collectionUUID\x00\x10\x00\x00\x00\x04"  # binary, 16, UUID
_FULL_DOCUMENT_FIELD: Final = b"\x03fullDocument\x00"
_DOCUMENT_KEY_FIELD: Final = b"\x03documentKey\x00"
OBJECT_ID_KEY_HEADER: Final = b"\x16\x00\x00\x00\x07_id\x00"  # {_id: ObjectId}, 22 bytes
OBJECT_ID_KEY_SIZE: Final = 22


def is_object_id_key(key: bytes) -> bool:
    """Whether ``key`` is the whole BSON of ``{_id: <ObjectId>}`` (header, 12 bytes, NUL)."""
    return len(key) == OBJECT_ID_KEY_SIZE and key.startswith(OBJECT_ID_KEY_HEADER) and not key[-1]


# Two probes that differ in every byte the template leaves open (time, increment, ObjectId).
_PROBES: Final = (
    (Timestamp(0x01020304, 0x05060708), ObjectId(bytes(range(0x11, 0x1D)))),
    (Timestamp(0x7A7B7C7D, 0x6A6B6C6D), ObjectId(bytes(range(0x41, 0x4D)))),
)


def _bson_string(value: str) -> bytes:
    """A BSON string value: int32 length (with the NUL), UTF-8 bytes, NUL."""
    encoded = value.encode()
    return _INT32.pack(len(encoded) + 1) + encoded + b"\x00"


def _document_element(name: str, value: Mapping[str, Any]) -> bytes:
    """One BSON element ``name: value`` (type byte, name, value) for a sub-document."""
    return bson.encode({name: value}, codec_options=EVENT_CODEC_OPTIONS)[4:-1]


class CrudEventTemplate:
    """The constant pieces of one (namespace, collection UUID, operation type)'s events.

    ``expanded`` (``showExpandedEvents``): ``collectionUUID`` between ``clusterTime`` and
    ``wallTime``, as the server places it.  Only for events whose documentKey is
    ``{_id: <ObjectId>}`` and whose token is a plain (non-transaction) event token, laid
    out as ``time | middle | ObjectId | suffix`` (versions 1 and 2); ``token_middle`` is
    None when it is not.
    ``matched`` is False for a namespace the stream's oplog filter drops.
    """

    __slots__ = (
        "after_token",
        "fixed_size",
        "id_prefix",
        "matched",
        "ns_key",
        "token_middle",
        "token_suffix",
        "wall_field",
    )

    def __init__(
        self,
        namespace: str,
        ui: uuid_module.UUID,
        operation_type: str,
        token_version: int,
        *,
        matched: bool = True,
        txn_op_index: int = 0,
        expanded: bool = False,
    ) -> None:
        self.matched = matched
        # What comes between clusterTime's value and wallTime's.
        self.wall_field = _WALL_TIME_FIELD
        if expanded:
            self.wall_field = _COLLECTION_UUID_FIELD + ui.bytes + _WALL_TIME_FIELD
        layout = _token_layout(ui, operation_type, token_version, txn_op_index)
        self.token_middle: bytes | None = None
        self.token_suffix = b""
        if layout is not None:
            self.token_middle, self.token_suffix = layout
        middle = self.token_middle or b""
        hex_size = 2 * (9 + len(middle) + 12 + len(self.token_suffix))
        # _id: {_data: <hex>}: the sub-document's length, the string's length, then the hex.
        self.id_prefix = _ID_FIELD + _INT32.pack(hex_size + 17) + _DATA_FIELD
        self.id_prefix += _INT32.pack(hex_size + 1)
        self.after_token = (
            b"\x00\x00\x02operationType\x00" + _bson_string(operation_type) + _CLUSTER_TIME_FIELD
        )
        db, coll = split_namespace(namespace)
        self.ns_key = _document_element("ns", namespace_field(db, coll)) + _DOCUMENT_KEY_FIELD
        self.fixed_size = (
            4
            + len(self.id_prefix)
            + hex_size
            + len(self.after_token)
            + 8
            + len(self.wall_field)
            + 8
            + len(self.ns_key)
            + OBJECT_ID_KEY_SIZE
            + 1
        )


def _token_layout(
    ui: uuid_module.UUID, operation_type: str, version: int, txn_op_index: int
) -> tuple[bytes, bytes] | None:
    """The token bytes between the time and the ObjectId, and after it (reference encoder).

    None when the token is not ``time | middle | ObjectId | suffix`` with constant pieces.
    """
    layouts = set()
    for ts, object_id in _PROBES:
        data = event_token_data(
            cluster_time=ts,
            operation_type=operation_type,
            version=version,
            txn_op_index=txn_op_index,
            uuid=ui,
            document_key={"_id": object_id},
        )
        token = encode_token(data)
        if token.type_bits is not None:
            return None
        raw = bytes.fromhex(token.data)
        time_part = b"\x82" + ts.time.to_bytes(4, "big") + ts.inc.to_bytes(4, "big")
        at = raw.find(object_id.binary)
        if not raw.startswith(time_part) or at < 0:
            return None
        layouts.add((raw[len(time_part) : at], raw[at + len(object_id.binary) :]))
    return layouts.pop() if len(layouts) == 1 else None


def write_crud_event(
    template: CrudEventTemplate,
    ts: int,
    ts_value: bytes,
    wall_value: bytes,
    full_document: bytes | None,
    document_key: bytes,
    update_description: bytes,
    leading: bytes = b"",
) -> tuple[bytes, bytes]:
    """Return (sort key, event BSON) of one CRUD event, fields in the server's order.

    ``ts`` is the entry's ts as ``time << 32 | increment``; ``ts_value`` and
    ``wall_value`` are its raw 8 bytes.  The sort key is the token's ``_data`` (upper-case
    hex), which orders the merge.  ``full_document`` and ``document_key`` are whole BSON
    documents, the key being ``{_id: ObjectId}``; ``update_description`` is a whole
    element (type, name, value), or b"".  ``leading`` holds whole elements that come
    before ``_id`` (a transaction's ``txnNumber`` and ``lsid``).
    """
    assert template.token_middle is not None
    data = _hexlify(
        b"".join(
            (
                b"\x82",
                ts.to_bytes(8, "big"),
                template.token_middle,
                document_key[9:21],
                template.token_suffix,
            )
        )
    ).upper()
    size = template.fixed_size + len(update_description) + len(leading)
    if full_document is None:
        full_document = field = b""
    else:
        field = _FULL_DOCUMENT_FIELD
        size += len(field) + len(full_document)
    event = b"".join(
        (
            _pack_int32(size),
            leading,
            template.id_prefix,
            data,
            template.after_token,
            ts_value,
            template.wall_field,
            wall_value,
            field,
            full_document,
            template.ns_key,
            document_key,
            update_description,
            b"\x00",
        )
    )
    return data, event


def update_description_element(diff: Mapping[str, Any]) -> bytes:
    """The ``updateDescription`` element of a ``$v:2`` diff (default options).

    Raises:
        TransformError: the diff is malformed.
    """
    description = parse_update_diff(diff, with_disambiguated_paths=False)
    return _document_element("updateDescription", encodable_description(description))
