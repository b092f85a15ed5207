"""The raw-BSON KeyString encoder agrees with the value encoder, and keeps folded types."""

from __future__ import annotations

from typing import Any

import bson
import pytest
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from hypothesis import given
from hypothesis import strategies as st

from shardstream.errors import ResumeTokenError
from shardstream.oplog import OPLOG_CODEC_OPTIONS
from shardstream.resume_token import UNDEFINED, DBPointer, Symbol
from shardstream.resume_token.keystring.codec import append_value
from shardstream.resume_token.keystring.raw_bson import append_raw_document
from shardstream.resume_token.keystring.type_bits import TypeBitsWriter
from tests.strategies import NAMES, bson_values


def _by_value(document: Any) -> tuple[bytes, bytes | None]:
    out, bits = bytearray(), TypeBitsWriter()
    append_value(out, bits, document)
    return bytes(out), bits.serialize()


def _by_raw(raw: bytes) -> tuple[bytes, bytes | None]:
    out, bits = bytearray(), TypeBitsWriter()
    append_raw_document(out, bits, raw)
    return bytes(out), bits.serialize()


def _encodable(value: Any) -> bool:
    try:
        bson.encode({"v": value})
    except (bson.errors.InvalidDocument, TypeError, OverflowError):
        return False
    return True


@given(st.dictionaries(NAMES, bson_values(), max_size=4))
def test_raw_bytes_encode_like_the_decoded_value(document: dict[str, Any]) -> None:
    if not _encodable(document):
        return  # Symbol, Undefined and DBPointer have no pymongo encoding; tested below
    raw = bson.encode(document)
    assert _by_raw(raw) == _by_value(bson.decode(raw, codec_options=OPLOG_CODEC_OPTIONS))


def _element(kind: int, name: str, payload: bytes) -> bytes:
    return bytes((kind,)) + name.encode() + b"\x00" + payload


def _document(*elements: bytes) -> bytes:
    body = b"".join(elements) + b"\x00"
    return (len(body) + 4).to_bytes(4, "little") + body


def _string(text: str) -> bytes:
    data = text.encode() + b"\x00"
    return len(data).to_bytes(4, "little") + data


def test_types_pymongo_folds_keep_their_own_encoding() -> None:
    oid = ObjectId("65a1b2c3d4e5f60718293a4b")
    raw = _document(
        _element(0x0E, "s", _string("sym")),
        _element(0x06, "u", b""),
        _element(0x0C, "p", _string("db.c") + oid.binary),
    )
    expected = {"s": Symbol("sym"), "u": UNDEFINED, "p": DBPointer("db.c", oid)}
    assert _by_raw(raw) == _by_value(expected)
    # Decoding first would lose them: pymongo gives str, None and DBRef.
    assert _by_raw(raw) != _by_value(dict(RawBSONDocument(raw)))


@pytest.mark.parametrize(
    "raw",
    [b"", b"\x05\x00\x00\x00", _document(b"\x10a\x00\x01")[:-1], _document(b"\x99a\x00")],
)
def test_malformed_bytes_raise_resume_token_error(raw: bytes) -> None:
    with pytest.raises(ResumeTokenError):
        _by_raw(raw)


@given(st.binary(max_size=40))
def test_random_bytes_only_raise_resume_token_error(data: bytes) -> None:
    raw = (len(data) + 5).to_bytes(4, "little") + data + b"\x00"
    try:
        _by_raw(raw)
    except ResumeTokenError as exc:
        message = str(exc)
    else:
        message = "expected: decoded fine"
    assert "expected" in message
