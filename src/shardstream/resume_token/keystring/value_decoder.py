"""KeyString V1 values read back with their exact BSON types (server: key_string.cpp's
``toBson``): the CType byte, its payload, and the type bits that say what the bytes dropped
(int vs long vs double, String vs Symbol); ``codec`` is the encoding.

Complexity: O(n) in the encoded size.
"""

from __future__ import annotations

from typing import Any

from bson.binary import Binary
from bson.code import Code
from bson.max_key import MaxKey
from bson.min_key import MinKey
from bson.objectid import ObjectId
from bson.regex import Regex
from bson.timestamp import Timestamp

from shardstream.errors import ResumeTokenError
from shardstream.resume_token.bson_values import UNDEFINED, DBPointer, Symbol, millis_to_date
from shardstream.resume_token.keystring import ctype
from shardstream.resume_token.keystring.byte_reader import ByteReader
from shardstream.resume_token.keystring.codec import generic_ctype
from shardstream.resume_token.keystring.decimal128_decoder import (
    decode_decimal128,
    decode_decimal128_zero,
)
from shardstream.resume_token.keystring.numeric import (
    NEGATIVE_ZERO_SUFFIX,
    TYPE_DECIMAL,
    read_number_of_type,
    zero_of_type,
)
from shardstream.resume_token.keystring.payloads import DATE_SIGN_FLIP
from shardstream.resume_token.keystring.type_bits import TypeBitsReader


def _decode_value(reader: ByteReader, bits: TypeBitsReader, depth: int = 0) -> Any:
    """Read one value (CType and payload) and return it with its exact BSON type.

    Raises:
        ResumeTokenError: a reserved CType, a truncated payload, or type bits that
            contradict the bytes.
    """
    code = reader.read_byte()
    return decode_value_of_ctype(code, reader, bits, depth)


def decode_value_of_ctype(code: int, reader: ByteReader, bits: TypeBitsReader, depth: int) -> Any:
    """Read the payload of a value whose CType byte ``code`` was just consumed."""
    if depth > ctype.MAX_NESTING:
        raise ResumeTokenError(f"KeyString nested deeper than {ctype.MAX_NESTING} levels")
    if ctype.FIRST_NUMERIC <= code <= ctype.LAST_NUMERIC:
        return _read_numeric(code, reader, bits)
    if code == ctype.STRING_LIKE:
        text = _read_string_body(reader)
        return Symbol(text) if bits.read_bit() else text
    if code == ctype.OID:
        return ObjectId(reader.read(12))
    if code == ctype.OBJECT:
        return _read_fields(reader, bits, depth)
    if code == ctype.ARRAY:
        elements = []
        while reader.peek() != 0:
            elements.append(_decode_value(reader, bits, depth + 1))
        reader.read_byte()
        return elements
    simple = _SIMPLE_VALUES.get(code, _NO_VALUE)
    if simple is not _NO_VALUE:
        return simple
    return _read_rare(code, reader, bits, depth)


_NO_VALUE = object()
_SIMPLE_VALUES: dict[int, Any] = {
    ctype.NULL: None,
    ctype.BOOL_FALSE: False,
    ctype.BOOL_TRUE: True,
    ctype.MIN_KEY: MinKey(),
    ctype.MAX_KEY: MaxKey(),
    ctype.UNDEFINED: UNDEFINED,
}


def _read_numeric(code: int, reader: ByteReader, bits: TypeBitsReader) -> Any:
    type_code = bits.read_bits(2)
    if code == ctype.NUMERIC_ZERO:
        if type_code != TYPE_DECIMAL:
            return zero_of_type(type_code)
        suffix = bits.read_bits(3)
        if suffix == NEGATIVE_ZERO_SUFFIX:
            return -0.0
        return decode_decimal128_zero(bits, suffix)
    if type_code == TYPE_DECIMAL:
        return decode_decimal128(code, reader, bits)
    return read_number_of_type(code, reader, type_code)


def _read_rare(code: int, reader: ByteReader, bits: TypeBitsReader, depth: int) -> Any:
    if code == ctype.TIMESTAMP:
        return Timestamp(reader.read_uint_be(4), reader.read_uint_be(4))
    if code == ctype.BIN_DATA:
        size = reader.read_byte()
        if size == 0xFF:
            size = reader.read_uint_be(4)
        subtype = reader.read_byte()
        data = reader.read(size)
        return Binary(data, subtype)
    if code == ctype.DATE:
        millis = reader.read_uint_be(8) ^ DATE_SIGN_FLIP
        return millis_to_date(millis - (1 << 64) if millis >= DATE_SIGN_FLIP else millis)
    if code == ctype.REGEX:
        pattern = _utf8(reader.read_cstring(), "regex pattern")
        return Regex(pattern, _utf8(reader.read_cstring(), "regex flags"))
    if code == ctype.CODE:
        return Code(_read_string_body(reader))
    if code == ctype.CODE_WITH_SCOPE:
        source = _read_string_body(reader)
        return Code(source, _read_fields(reader, bits, depth))
    if code == ctype.DB_REF:
        size = reader.read_uint_be(4)
        namespace = _utf8(reader.read(size), "DBPointer namespace")
        return DBPointer(namespace, ObjectId(reader.read(12)))
    raise ResumeTokenError(
        f"invalid KeyString: expected a CType byte at offset {reader.pos - 1}, got {code:#04x}"
    )


def _read_fields(reader: ByteReader, bits: TypeBitsReader, depth: int) -> dict[str, Any]:
    document: dict[str, Any] = {}
    while True:
        generic = reader.read_byte()
        if generic == 0:
            return document
        name = _utf8(reader.read_cstring(), "field name")
        value_code = reader.read_byte()
        value = decode_value_of_ctype(value_code, reader, bits, depth + 1)
        if generic_ctype(value) != generic:
            raise ResumeTokenError(
                f"invalid KeyString: field {name!r} announces CType {generic:#04x} but holds "
                f"CType {value_code:#04x}"
            )
        if name in document:
            raise ResumeTokenError(f"invalid KeyString: field {name!r} appears twice")
        document[name] = value


def _read_string_body(reader: ByteReader) -> str:
    chunks = []
    while True:
        chunk = reader.read_cstring()
        chunks.append(chunk)
        if reader.remaining and reader.peek() == 0xFF:
            reader.read_byte()
            chunks.append(b"\x00")
            continue
        return _utf8(b"".join(chunks), "string")


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResumeTokenError(
            f"invalid KeyString: expected a UTF-8 {what}, got {raw!r:.80}"
        ) from exc
