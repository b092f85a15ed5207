"""Encode resume token data as versions 0, 1 and 2 (hex KeyString + type bits).

Server counterpart: ``ResumeToken(const ResumeTokenData&)`` in resume_token.cpp,
including the rules it asserts (HWM tokens carry nothing but the time, v2
events need an eventIdentifier, fragmentNum only in v2).

Complexity: O(n) in the token size.
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Mapping
from typing import Any

from bson.timestamp import Timestamp

from shardstream.errors import ResumeTokenError
from shardstream.resume_token import ctype
from shardstream.resume_token.keystring import append_value
from shardstream.resume_token.keystring_numbers import TYPE_INT32, append_int
from shardstream.resume_token.token import ResumeToken
from shardstream.resume_token.token_data import ResumeTokenData, TokenType
from shardstream.resume_token.type_bits import TypeBitsWriter

_INT32_MAX = (1 << 31) - 1
_END = bytes((ctype.END,))


def encode_token(data: ResumeTokenData) -> ResumeToken:
    """Encode token data as the server does (hex upper case, type bits if any).

    Raises:
        ResumeTokenError: the data breaks a rule the server's encoder asserts.
    """
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
