"""Encode resume token data as versions 0, 1 and 2 (hex KeyString + type bits).

Server counterpart: ``ResumeToken(const ResumeTokenData&)`` in resume_token.cpp,
including the rules it asserts (HWM tokens carry nothing but the time, v2
events need an eventIdentifier, fragmentNum only in v2).

Complexity: O(n) in the token size.
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Mapping
from typing import Any, Final

from bson.objectid import ObjectId
from bson.timestamp import Timestamp

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.keystring import ctype
from shardstream.resume_token.keystring.codec import append_value
from shardstream.resume_token.keystring.numeric import TYPE_INT32, append_int
from shardstream.resume_token.keystring.type_bits import TypeBitsWriter
from shardstream.resume_token.token import ResumeToken
from shardstream.resume_token.token_data import ResumeTokenData, TokenType

_INT32_MAX = (1 << 31) - 1
_END = bytes((ctype.END,))


def encode_token(data: ResumeTokenData) -> ResumeToken:
    """Encode token data as the server does (hex upper case, type bits if any).

    Raises:
        ResumeTokenError: the data breaks a rule the server's encoder asserts.
    """
    fast = _encode_object_id_event(data)
    if fast is not None:
        return fast
    _check_encodable(data)
    out = bytearray((ctype.TIMESTAMP,))
    out += data.cluster_time.time.to_bytes(4, "big") + data.cluster_time.inc.to_bytes(4, "big")
    bits = TypeBitsWriter()
    append_int(out, bits, data.version, TYPE_INT32)
    if data.version >= 1:
        append_int(out, bits, int(data.token_type), TYPE_INT32)
    append_int(out, bits, data.txn_op_index, TYPE_INT32)
    if data.version >= 1:
        out.append(ctype.BOOL_TRUE if data.from_invalidate else ctype.BOOL_FALSE)
    if data.uuid is not None:
        out += b"\x5a\x10\x04" + data.uuid.bytes
    elif data.version >= 2:
        out.append(ctype.NULL)
    slot = data.event_slot
    if slot is not None:
        append_value(out, bits, slot)
    if data.fragment_num is not None:
        append_int(out, bits, data.fragment_num, TYPE_INT32)
    out += _END
    return ResumeToken(out.hex().upper(), bits.serialize())


# The most common token by far: a v2 CRUD event on a document whose key is just an
# ObjectId _id.  Its hex is a fixed template, so it is assembled from cached hex
# pieces instead of walking values (about 3x faster); every other shape takes the
# general path.  Tests check both paths agree on random tokens.
_EVENT_V2_HEX: Final = "2B042C0100"
_TXN_INDEX_HEX: Final = tuple("29" if index == 0 else f"2B{index << 1:02X}" for index in range(128))
_OID_KEY_HEX: Final = b"documentKey\x00\x46\x64_id\x00\x64".hex().upper()
_IDENTIFIER_CACHE_LIMIT: Final = 4096
_identifier_prefix_cache: dict[tuple[uuid_module.UUID | None, str, bool], str] = {}


def _encode_object_id_event(data: ResumeTokenData) -> ResumeToken | None:
    if data.version != 2 or data.token_type != TokenType.EVENT or data.fragment_num is not None:
        return None
    identifier = data.event_identifier
    if type(identifier) is not dict or len(identifier) != 2:
        return None
    names = iter(identifier)
    if next(names) != "operationType" or next(names) != "documentKey":
        return None
    operation_type = identifier["operationType"]
    document_key = identifier["documentKey"]
    if type(operation_type) is not str or type(document_key) is not dict or len(document_key) != 1:
        return None
    object_id = document_key.get("_id")
    cluster_time = data.cluster_time
    txn_op_index = data.txn_op_index
    if (
        type(object_id) is not ObjectId
        or type(cluster_time) is not Timestamp
        or type(txn_op_index) is not int
        or not 0 <= txn_op_index < 128
        or data.document_key is not None
    ):
        return None
    cache_key = (data.uuid, operation_type, data.from_invalidate)
    prefix = _identifier_prefix_cache.get(cache_key)
    if prefix is None:
        prefix = _identifier_prefix_hex(*cache_key)
        if prefix is None:
            return None
        if len(_identifier_prefix_cache) >= _IDENTIFIER_CACHE_LIMIT:
            _identifier_prefix_cache.clear()
        _identifier_prefix_cache[cache_key] = prefix
    return ResumeToken(
        f"82{cluster_time.time:08X}{cluster_time.inc:08X}{_EVENT_V2_HEX}"
        f"{_TXN_INDEX_HEX[txn_op_index]}{prefix}{object_id.binary.hex().upper()}000004"
    )


def _identifier_prefix_hex(
    uuid_value: uuid_module.UUID | None, operation_type: str, from_invalidate: bool
) -> str | None:
    """Hex from fromInvalidate up to the ObjectId bytes, or None if not templatable."""
    if "\x00" in operation_type or not (uuid_value is None or type(uuid_value) is uuid_module.UUID):
        return None
    out = bytearray((ctype.BOOL_TRUE if from_invalidate else ctype.BOOL_FALSE,))
    out += b"\x14" if uuid_value is None else b"\x5a\x10\x04" + uuid_value.bytes
    out += b"\x46\x3coperationType\x00\x3c" + operation_type.encode() + b"\x00\x46"
    return out.hex().upper() + _OID_KEY_HEX


def _check_encodable(data: ResumeTokenData) -> None:
    if not isinstance(data.cluster_time, Timestamp):
        raise ResumeTokenError(
            f"expected cluster_time to be a bson Timestamp, got {data.cluster_time!r}"
        )
    if data.version not in (0, 1, 2) or isinstance(data.version, bool):
        raise ResumeTokenError(f"expected token version 0, 1 or 2, got {data.version!r}")
    if data.token_type not in (TokenType.EVENT, TokenType.HIGH_WATER_MARK):
        raise ResumeTokenError(f"expected token_type 0 or 128, got {data.token_type!r}")
    _check_int32("txn_op_index", data.txn_op_index)
    slot = data.event_slot
    other = data.document_key if data.version >= 2 else data.event_identifier
    if other is not None:
        wanted = "event_identifier" if data.version >= 2 else "document_key"
        raise ResumeTokenError(
            f"a version {data.version} token carries its identifier in {wanted}, "
            f"got {other!r:.100} in the other field"
        )
    if data.version == 0 and data.from_invalidate:
        raise ResumeTokenError("version 0 tokens cannot encode from_invalidate=True")
    if data.is_high_water_mark and (
        data.txn_op_index or data.from_invalidate or data.uuid is not None or slot is not None
    ):
        raise ResumeTokenError(
            "invalid high water mark token: expected txn_op_index 0, from_invalidate False, "
            f"no uuid and no identifier, got {data!r:.200}"
        )
    if data.uuid is not None and not isinstance(data.uuid, uuid_module.UUID):
        raise ResumeTokenError(f"expected uuid to be a uuid.UUID or None, got {data.uuid!r}")
    if data.uuid is None and slot is not None and data.version <= 1:
        raise ResumeTokenError(
            f"a version {data.version} token with a documentKey needs a uuid, got none"
        )
    if data.version >= 2 and not data.is_high_water_mark and not isinstance(slot, Mapping):
        raise ResumeTokenError(
            f"expected an event_identifier document for a v2 event token, got {slot!r:.100}"
        )
    if data.fragment_num is not None:
        if data.version < 2:
            raise ResumeTokenError(
                f"tokens of version {data.version} cannot have a fragmentNum, "
                f"got {data.fragment_num!r}"
            )
        _check_int32("fragment_num", data.fragment_num)


def _check_int32(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT32_MAX:
        raise ResumeTokenError(f"expected {name} to be an int32 >= 0, got {value!r}")
