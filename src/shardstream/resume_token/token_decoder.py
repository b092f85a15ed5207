"""Decode resume tokens of versions 0, 1, 2 and the legacy BinData form of 3.6.

Server counterpart: ``ResumeToken::getData()`` in resume_token.cpp.  Its checks
run in the server's order; each failure is a :class:`ResumeTokenError` saying
what was expected and what arrived, never any other exception.

Complexity: O(n) in the token size.
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Mapping
from typing import Any, Final

from bson.binary import Binary
from bson.timestamp import Timestamp

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.keystring import ctype
from shardstream.resume_token.keystring.byte_reader import ByteReader
from shardstream.resume_token.keystring.type_bits import TypeBitsReader, parse_type_bits
from shardstream.resume_token.keystring.value_decoder import decode_value_of_ctype
from shardstream.resume_token.token import (
    DATA_FIELD,
    TYPE_BITS_FIELD,
    ResumeToken,
    hex_to_bytes,
    type_bits_from_value,
)
from shardstream.resume_token.token_data import ResumeTokenData, TokenType

MAX_TOKEN_BYTES: Final = 16 * 1024 * 1024  # a token lives in a BSON document: 16 MiB at most
_MISSING: Final = object()


def decode_token(token: ResumeToken | str) -> ResumeTokenData:
    """Decode a hex token (or just its ``_data`` string) with the server's checks."""
    if isinstance(token, str):
        token = ResumeToken(token)
    if (
        not isinstance(token, ResumeToken)
        or not isinstance(token.data, str)
        or not isinstance(token.type_bits, bytes | None)
    ):
        raise ResumeTokenError(
            f"expected a resume token (_data hex string or ResumeToken), got "
            f"{type(token).__name__} {token!r:.100}"
        )
    if len(token.data) > 2 * MAX_TOKEN_BYTES:
        raise ResumeTokenError(
            f"invalid oversized resume token: expected at most {MAX_TOKEN_BYTES} bytes, "
            f"got {len(token.data) // 2}"
        )
    raw = hex_to_bytes(token.data)
    bits = TypeBitsReader(parse_type_bits(token.type_bits))
    values = _TopLevelValues(raw, bits)
    return _token_data_from_values(values)


def decode_token_document(document: Mapping[str, Any]) -> ResumeTokenData:
    """Decode ``{_data, _typeBits}``, accepting the legacy BinData ``_data`` of 3.6.

    Raises:
        ResumeTokenError: anything about the document or token is invalid.
    """
    if isinstance(document, Mapping) and isinstance(document.get(DATA_FIELD), bytes):
        extra = [name for name in document if name not in (DATA_FIELD, TYPE_BITS_FIELD)]
        if extra:
            raise ResumeTokenError(f"expected only _data and _typeBits, got also {extra!r}")
        legacy: bytes = document[DATA_FIELD]
        if isinstance(legacy, Binary) and legacy.subtype != 0:
            raise ResumeTokenError(
                f"expected legacy _data to be BinData subtype 0, got subtype {legacy.subtype}"
            )
        type_bits = type_bits_from_value(document.get(TYPE_BITS_FIELD))
        return decode_legacy_token(bytes(legacy), type_bits)
    return decode_token(ResumeToken.from_document(document))


class _TopLevelValues:
    """The token's values in order, read lazily so each check sees what it needs."""

    __slots__ = ("_bits", "_reader")

    def __init__(self, raw: bytes, bits: TypeBitsReader) -> None:
        self._reader = ByteReader(raw)
        self._bits = bits

    def next(self) -> Any:
        """Return the next value, or ``_MISSING`` at the end byte."""
        reader = self._reader
        while True:
            code = reader.read_byte()
            if code == ctype.END:
                if not reader.at_end():
                    raise ResumeTokenError(
                        f"invalid resume token: expected the end after byte 04 at offset "
                        f"{reader.pos - 1}, got {reader.remaining} more byte(s)"
                    )
                return _MISSING
            # Discriminators belong to index-seek keys; the server's decoder skips them.
            if code not in (ctype.LESS, ctype.GREATER):
                return decode_value_of_ctype(code, reader, self._bits, 0)


def _token_data_from_values(values: _TopLevelValues) -> ResumeTokenData:
    cluster_time = values.next()
    if cluster_time is _MISSING:
        raise ResumeTokenError("invalid empty resume token: expected a clusterTime, got nothing")
    if not isinstance(cluster_time, Timestamp):
        raise ResumeTokenError(
            f"invalid resume token: expected clusterTime to be a Timestamp, got {cluster_time!r}"
        )
    version = _int32(values.next(), "version")
    if version not in (0, 1, 2):
        raise ResumeTokenError(
            f"invalid resume token: only versions 0, 1 and 2 are supported, got {version}"
        )
    token_type: int = TokenType.EVENT
    if version >= 1:
        token_type = _int32(values.next(), "tokenType")
        if token_type not in (TokenType.EVENT, TokenType.HIGH_WATER_MARK):
            raise ResumeTokenError(
                f"invalid resume token: expected tokenType 0 or 128, got {token_type}"
            )
        token_type = TokenType(token_type)
    txn_op_index = _int32(values.next(), "txnOpIndex")
    if txn_op_index < 0:
        raise ResumeTokenError(
            f"invalid resume token: expected txnOpIndex >= 0, got {txn_op_index}"
        )
    from_invalidate = False
    if version >= 1:
        from_invalidate = values.next()
        if not isinstance(from_invalidate, bool):
            raise ResumeTokenError(
                f"invalid resume token: expected fromInvalidate to be a bool, got "
                f"{_describe(from_invalidate)}"
            )
    fields: dict[str, Any] = {
        "cluster_time": cluster_time,
        "version": version,
        "token_type": token_type,
        "txn_op_index": txn_op_index,
        "from_invalidate": from_invalidate,
    }
    uuid_value = values.next()
    if uuid_value is _MISSING:
        if version >= 2:
            raise ResumeTokenError("invalid resume token: expected a UUID or null, got nothing")
        return ResumeTokenData(**fields)
    if uuid_value is not None:
        fields["uuid"] = _uuid(uuid_value)
    identifier = values.next()
    if identifier is not _MISSING and token_type == TokenType.HIGH_WATER_MARK:
        raise ResumeTokenError(
            f"invalid high water mark token: expected nothing after the uuid slot, got "
            f"{_describe(identifier)}"
        )
    if identifier is _MISSING:
        if token_type == TokenType.EVENT and version >= 2:
            raise ResumeTokenError(
                "invalid resume token: expected an eventIdentifier for a v2 event token, "
                "got nothing"
            )
        return ResumeTokenData(**fields)
    if not isinstance(identifier, dict):
        raise ResumeTokenError(
            f"invalid resume token: expected the eventIdentifier to be an object, got "
            f"{_describe(identifier)}"
        )
    fields["event_identifier" if version >= 2 else "document_key"] = identifier
    trailing = values.next()
    if trailing is not _MISSING and version >= 2:
        fields["fragment_num"] = _int32(trailing, "fragmentNum")
        if fields["fragment_num"] < 0:
            raise ResumeTokenError(
                f"invalid resume token: expected fragmentNum >= 0, got {trailing}"
            )
        trailing = values.next()
    if trailing is not _MISSING:
        raise ResumeTokenError(
            f"invalid oversized resume token: expected the end, got {_describe(trailing)}"
        )
    return ResumeTokenData(**fields)


def decode_legacy_token(raw: bytes, type_bits: bytes | None = None) -> ResumeTokenData:
    """Decode the 3.6 format: BinData KeyString of clusterTime, documentKey?, uuid?.

    A null holds the documentKey slot when a uuid follows but there is no
    documentKey.  The result reads as the server reads it: version 0,
    txnOpIndex 0, an event token, not from an invalidate.
    """
    values = _TopLevelValues(raw, TypeBitsReader(parse_type_bits(type_bits)))
    cluster_time = values.next()
    if not isinstance(cluster_time, Timestamp):
        raise ResumeTokenError(
            f"invalid legacy resume token: expected clusterTime to be a Timestamp, got "
            f"{_describe(cluster_time)}"
        )
    fields: dict[str, Any] = {"cluster_time": cluster_time, "version": 0}
    document_key = values.next()
    if document_key is not _MISSING:
        if document_key is not None and not isinstance(document_key, dict):
            raise ResumeTokenError(
                f"invalid legacy resume token: expected a documentKey object or null, got "
                f"{_describe(document_key)}"
            )
        fields["document_key"] = document_key
        uuid_value = values.next()
        if uuid_value is not _MISSING:
            fields["uuid"] = _uuid(uuid_value)
            trailing = values.next()
            if trailing is not _MISSING:
                raise ResumeTokenError(
                    f"invalid oversized legacy resume token: expected the end, got "
                    f"{_describe(trailing)}"
                )
    return ResumeTokenData(**fields)


def _int32(value: Any, name: str) -> int:
    if value is _MISSING:
        raise ResumeTokenError(f"invalid resume token: expected {name}, got nothing")
    # int32 decodes as a plain int; Int64 and bool are int subclasses and are refused.
    if type(value) is not int:
        raise ResumeTokenError(
            f"invalid resume token: expected {name} to be an int32, got {_describe(value)}"
        )
    return value


def _uuid(value: Any) -> uuid_module.UUID:
    if isinstance(value, Binary) and value.subtype == 4 and len(value) == 16:
        return uuid_module.UUID(bytes=bytes(value))
    raise ResumeTokenError(
        f"invalid resume token: expected a UUID (BinData subtype 4, 16 bytes), got "
        f"{_describe(value)}"
    )


def _describe(value: Any) -> str:
    if value is _MISSING:
        return "nothing"
    return f"{type(value).__name__} {value!r:.100}"
