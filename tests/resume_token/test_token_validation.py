"""The server's decoding and encoding rules (resume_token.cpp), one case each.

Every malformed token raises ResumeTokenError whose message names what was
expected and what arrived.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from bson.binary import Binary
from bson.int64 import Int64
from bson.timestamp import Timestamp

from shardstream.errors import ResumeTokenError, ShardstreamError
from shardstream.resume_token import (
    ResumeToken,
    ResumeTokenData,
    TokenType,
    decode_token,
    decode_token_document,
    encode_token,
    high_water_mark,
)
from shardstream.resume_token.keystring.codec import encode_values
from shardstream.resume_token.keystring.type_bits import TypeBitsWriter

TIME = Timestamp(1700000000, 7)
UUID = uuid.UUID("0123abcd-4567-489a-8bcd-ef0123456789")
UUID_BIN = Binary(UUID.bytes, 4)
KEY = {"operationType": "insert", "documentKey": {"_id": 1}}


def _raw_token(*values: Any) -> ResumeToken:
    """A token made of arbitrary values, bypassing the encoder's own checks."""
    out, bits = bytearray(), TypeBitsWriter()
    encode_values(values, out, bits)
    out.append(0x04)
    return ResumeToken(out.hex().upper(), bits.serialize())


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ((), "expected a clusterTime"),
        (("x", 2), "clusterTime to be a Timestamp"),
        ((TIME,), "expected version"),
        ((TIME, 3), "versions 0, 1 and 2"),
        ((TIME, Int64(2)), "version to be an int32"),
        ((TIME, 2.0), "version to be an int32"),
        ((TIME, 2), "expected tokenType"),
        ((TIME, 2, 5), "tokenType 0 or 128"),
        ((TIME, 2, 128), "expected txnOpIndex"),
        ((TIME, 2, 128, -1), "txnOpIndex >= 0"),
        ((TIME, 2, 128, Int64(0)), "txnOpIndex to be an int32"),
        ((TIME, 2, 128, 0), "expected fromInvalidate"),
        ((TIME, 2, 128, 0, 1), "fromInvalidate to be a bool"),
        ((TIME, 2, 128, 0, False), "expected a UUID or null"),
        ((TIME, 2, 128, 0, False, "not-a-uuid"), "expected a UUID"),
        ((TIME, 1, 128, 0, False, Binary(b"short", 4)), "expected a UUID"),
        ((TIME, 2, 0, 0, False, None, KEY), "high water mark"),
        ((TIME, 2, 128, 0, False, UUID_BIN), "expected an eventIdentifier"),
        ((TIME, 2, 128, 0, False, UUID_BIN, "str"), "eventIdentifier to be an object"),
        ((TIME, 1, 128, 0, False, UUID_BIN, [1]), "eventIdentifier to be an object"),
        ((TIME, 2, 128, 0, False, UUID_BIN, KEY, -1), "fragmentNum >= 0"),
        ((TIME, 2, 128, 0, False, UUID_BIN, KEY, "x"), "fragmentNum to be an int32"),
        ((TIME, 2, 128, 0, False, UUID_BIN, KEY, 0, 1), "oversized"),
        ((TIME, 1, 128, 0, False, UUID_BIN, {"_id": 1}, 0), "oversized"),
        ((TIME, 0, 0, UUID_BIN, {"_id": 1}, 0), "oversized"),
    ],
)
def test_decoder_enforces_server_rules(values: tuple[Any, ...], message: str) -> None:
    with pytest.raises(ResumeTokenError, match=message):
        decode_token(_raw_token(*values))


def test_v0_and_v1_allow_no_uuid_and_no_key() -> None:
    assert decode_token(_raw_token(TIME, 1, 128, 0, False)).uuid is None
    assert decode_token(_raw_token(TIME, 0, 0)).document_key is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("", "empty"),
        ("8", "odd length"),
        ("82 0", "character ' '"),
        ("ZZ", "character 'Z'"),
        ("82", "expected 4 more byte"),
        ("82000000010000000007", "0x07"),
        ("8200000001000000002B0229296E0404", "expected the end"),
    ],
)
def test_hex_and_bytes_errors_name_expected_and_got(data: str, message: str) -> None:
    with pytest.raises(ResumeTokenError, match=message):
        decode_token(data)


def test_lower_case_hex_decodes_like_upper_case() -> None:
    token = "82644F2A8D000000012B0429296E1404"
    assert decode_token(token.lower()) == decode_token(token)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({}, "'_data' to be a hex string"),
        ({"_data": 5}, "'_data' to be a hex string"),
        ({"_data": "82", "extra": 1}, "got also \\['extra'\\]"),
        ({"_data": "82644F2A8D000000012B0429296E1404", "_typeBits": "x"}, "BinData subtype 0"),
        (
            {"_data": "82644F2A8D000000012B0429296E1404", "_typeBits": Binary(b"\x01", 4)},
            "subtype 0",
        ),
        (["_data"], "expected a resume token document"),
    ],
)
def test_token_document_errors(document: Any, message: str) -> None:
    with pytest.raises(ResumeTokenError, match=message):
        decode_token_document(document)


@pytest.mark.parametrize(
    ("type_bits", "message"),
    [
        (b"\x82\x80", "size prefix says 2"),
        (b"\x40\x00", "single-byte form"),
        (b"\x80\x01", "4-byte size"),
    ],
)
def test_malformed_type_bits(type_bits: bytes, message: str) -> None:
    with pytest.raises(ResumeTokenError, match=message):
        decode_token(ResumeToken("82644F2A8D000000012B0429296E1404", type_bits))


def test_type_bits_too_short_for_the_values() -> None:
    # The _id's two type bits are bits 7 and 8; these type bits end after bit 7.
    with pytest.raises(ResumeTokenError, match="_typeBits too short"):
        decode_token(
            ResumeToken(
                "826553F100000000072B042C0100296E5A10040123ABCD4567489A8BCDEF0123456789463C6F70"
                "65726174696F6E54797065003C696E736572740046646F63756D656E744B657900461E5F696400"
                "2B020004",
                b"\x81\x80",
            )
        )


def test_type_bits_that_contradict_the_bytes() -> None:
    # 1.5 encoded with all-zero type bits would be an int32 with a fraction.
    token = encode_token(
        ResumeTokenData(
            cluster_time=TIME,
            uuid=UUID,
            event_identifier={"operationType": "insert", "documentKey": {"_id": 1.5}},
        )
    )
    with pytest.raises(ResumeTokenError, match="fractional number cannot have type int32"):
        decode_token(ResumeToken(token.data))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (ResumeTokenData(cluster_time=TIME, version=3), "version 0, 1 or 2"),
        (ResumeTokenData(cluster_time=TIME, token_type=7), "token_type 0 or 128"),
        (ResumeTokenData(cluster_time=TIME, txn_op_index=-1), "txn_op_index to be an int32"),
        (
            ResumeTokenData(cluster_time=TIME, version=1, fragment_num=0, uuid=UUID),
            "cannot have a fragmentNum",
        ),
        (
            ResumeTokenData(
                cluster_time=TIME, token_type=TokenType.HIGH_WATER_MARK, txn_op_index=1
            ),
            "invalid high water mark",
        ),
        (ResumeTokenData(cluster_time=TIME), "expected an event_identifier document"),
        (
            ResumeTokenData(cluster_time=TIME, version=1, document_key={"_id": 1}),
            "needs a uuid",
        ),
        (
            ResumeTokenData(cluster_time=TIME, version=1, event_identifier=KEY, uuid=UUID),
            "carries its identifier in document_key",
        ),
        (
            ResumeTokenData(cluster_time=TIME, version=0, from_invalidate=True),
            "version 0 tokens cannot encode",
        ),
        (
            ResumeTokenData(cluster_time=TIME, event_identifier={"_id": object()}),
            "expected a BSON value",
        ),
        (
            ResumeTokenData(cluster_time=TIME, event_identifier={"_id": 2**64}),
            "int64 range",
        ),
    ],
)
def test_encoder_enforces_server_rules(data: ResumeTokenData, message: str) -> None:
    with pytest.raises(ResumeTokenError, match=message):
        encode_token(data)


def test_resume_token_error_is_a_value_error_and_a_shardstream_error() -> None:
    with pytest.raises(ValueError, match="hex") as caught:
        decode_token("nope")
    assert isinstance(caught.value, ShardstreamError)


def test_high_water_mark_tokens_match_real_ones() -> None:
    assert encode_token(high_water_mark(Timestamp(1682909837, 1))).data == (
        "82644F2A8D000000012B0429296E1404"
    )
    assert encode_token(high_water_mark(Timestamp(1683817976, 1), version=1)).data == (
        "82645D05F8000000012B0229296E04"
    )
