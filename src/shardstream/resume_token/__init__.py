"""Resume tokens, byte-identical to the server's (KeyString V1 + type bits).

Imports nothing from the rest of the project.

>>> from bson.timestamp import Timestamp
>>> token = encode_token(high_water_mark(Timestamp(1700000000, 7)))
>>> token.data
'826553F100000000072B0429296E1404'
>>> decode_token(token).cluster_time
Timestamp(1700000000, 7)
"""

from __future__ import annotations

from shardstream.resume_token.bson_values import UNDEFINED, DBPointer, Symbol
from shardstream.resume_token.token import ResumeToken
from shardstream.resume_token.token_data import (
    CLASSIC_OPERATION_TYPES,
    DEFAULT_TOKEN_VERSION,
    ResumeTokenData,
    TokenType,
    event_token_data,
    high_water_mark,
    invalidate_of,
)
from shardstream.resume_token.token_decoder import (
    decode_legacy_token,
    decode_token,
    decode_token_document,
)
from shardstream.resume_token.token_encoder import encode_token

__all__ = [
    "CLASSIC_OPERATION_TYPES",
    "DEFAULT_TOKEN_VERSION",
    "UNDEFINED",
    "DBPointer",
    "ResumeToken",
    "ResumeTokenData",
    "Symbol",
    "TokenType",
    "decode_legacy_token",
    "decode_token",
    "decode_token_document",
    "encode_token",
    "event_token_data",
    "high_water_mark",
    "invalidate_of",
]
