"""KeyString V1 canonical-type (CType) bytes, as in the server's key_string.cpp.

A KeyString value is one CType byte then a payload; the CType orders values of
different BSON types before their payloads are compared.
"""

from __future__ import annotations

from typing import Final

# The deepest nesting the codecs write or read (codec, value_decoder, raw_bson): deeper than
# BSON's own limit (100); it stops runaway recursion on garbage.
MAX_NESTING: Final = 200
MIN_KEY: Final = 0x0A
UNDEFINED: Final = 0x0F
NULL: Final = 0x14
NUMERIC: Final = 0x1E  # the generic CType of every number inside an embedded document
NUMERIC_NAN: Final = 0x1E
NUMERIC_NEGATIVE_LARGE_MAGNITUDE: Final = 0x1F  # |x| >= 2**63, includes -inf
NUMERIC_NEGATIVE_8_BYTE_INT: Final = 0x20
NUMERIC_NEGATIVE_1_BYTE_INT: Final = 0x27
NUMERIC_NEGATIVE_SMALL_MAGNITUDE: Final = 0x28  # 0 < |x| < 1
NUMERIC_ZERO: Final = 0x29
NUMERIC_POSITIVE_SMALL_MAGNITUDE: Final = 0x2A
NUMERIC_POSITIVE_1_BYTE_INT: Final = 0x2B
NUMERIC_POSITIVE_8_BYTE_INT: Final = 0x32
NUMERIC_POSITIVE_LARGE_MAGNITUDE: Final = 0x33
STRING_LIKE: Final = 0x3C  # String and Symbol
OBJECT: Final = 0x46
ARRAY: Final = 0x50
BIN_DATA: Final = 0x5A
OID: Final = 0x64
BOOL_FALSE: Final = 0x6E
BOOL_TRUE: Final = 0x6F
DATE: Final = 0x78
TIMESTAMP: Final = 0x82
REGEX: Final = 0x8C
DB_REF: Final = 0x96  # BSON DBPointer
CODE: Final = 0xA0
CODE_WITH_SCOPE: Final = 0xAA
MAX_KEY: Final = 0xF0

END: Final = 0x04  # ends every resume token
LESS: Final = 0x01  # discriminators: index-seek keys only, skipped by the decoder
GREATER: Final = 0xFE

FIRST_NUMERIC: Final = NUMERIC_NAN
LAST_NUMERIC: Final = NUMERIC_POSITIVE_LARGE_MAGNITUDE
