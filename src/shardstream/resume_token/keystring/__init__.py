"""KeyString V1: BSON values as memcmp-ordered bytes, plus the type bits that keep their types.

The value codec (``codec``, read back by ``value_decoder``) dispatches per canonical type
(``ctype``) to the number, Decimal128 and payload layouts; ``raw_bson`` encodes straight from
raw BSON bytes (the fast path's document keys); ``type_bits`` is the side channel. Server:
key_string.cpp.
"""

from __future__ import annotations

from shardstream.resume_token.keystring.codec import append_value, encode_values
from shardstream.resume_token.keystring.raw_bson import append_raw_document
from shardstream.resume_token.keystring.type_bits import TypeBitsReader, TypeBitsWriter
from shardstream.resume_token.keystring.value_decoder import decode_value_of_ctype

__all__ = [
    "TypeBitsReader",
    "TypeBitsWriter",
    "append_raw_document",
    "append_value",
    "decode_value_of_ctype",
    "encode_values",
]
