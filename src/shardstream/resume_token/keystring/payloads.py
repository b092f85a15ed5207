"""KeyString V1 payload layouts shared by the value encoder and the raw-BSON encoder.

Each writes the CType-specific bytes the same way whether the value came from a
Python object (:mod:`codec`) or straight from BSON bytes (:mod:`raw_bson`).
"""

from __future__ import annotations

from typing import Final

from shardstream.resume_token.keystring import ctype

DATE_SIGN_FLIP: Final = 1 << 63
_MASK64: Final = (1 << 64) - 1


def append_string_bytes(out: bytearray, utf8: bytes) -> None:
    """Append a string body: NUL escaped as 00 FF, then a terminating 00.

    The escape keeps the terminator the smallest byte, so a prefix sorts first.
    """
    out += utf8.replace(b"\x00", b"\x00\xff")
    out.append(0)


def append_bin_data(out: bytearray, subtype: int, data: bytes) -> None:
    """Append BinData: CType, length (1 byte, or FF + 4 bytes big-endian), subtype, bytes.

    The length precedes the subtype so that shorter BinData sorts first.
    """
    out.append(ctype.BIN_DATA)
    size = len(data)
    if size < 0xFF:
        out.append(size)
    else:
        out.append(0xFF)
        out += size.to_bytes(4, "big")
    out.append(subtype)
    out += data


def append_date(out: bytearray, millis: int) -> None:
    """Append a Date: int64 milliseconds with the sign bit flipped (offset binary)."""
    out.append(ctype.DATE)
    out += ((millis & _MASK64) ^ DATE_SIGN_FLIP).to_bytes(8, "big")
