"""KeyString V1 type bits: the side channel that keeps the exact BSON types.

A KeyString encodes numbers by value (int 1, long 1 and double 1.0 give the same
bytes) and String/Symbol alike, so the original type travels as a bit string,
serialised into the token's ``_typeBits`` BinData.  Bit *k* lives in data byte
*k // 8* at position *k % 8* (least significant first).  The serialised form is:

* nothing at all when every bit is 0 (the field is omitted);
* the single data byte itself when there is one and its high bit is clear;
* ``0x80 | n`` then the *n* data bytes for 1..127 bytes;
* ``0x80``, a 4-byte little-endian *n*, then the data for longer buffers.
"""

from __future__ import annotations

from shardstream.errors import ResumeTokenError

_SHORT_SIZE_LIMIT = 127


class TypeBitsWriter:
    """Collects type bits in encoding order.

    Bits accumulate in one Python int, so appending is O(1) and serialising is a
    single ``int.to_bytes``.
    """

    __slots__ = ("count", "value")

    def __init__(self) -> None:
        self.value = 0
        self.count = 0

    def append_bit(self, bit: int) -> None:
        """Append one bit (0 or 1)."""
        if bit:
            self.value |= 1 << self.count
        self.count += 1

    def append_bits(self, bits: int, width: int) -> None:
        """Append ``width`` bits of ``bits``, most significant first (the server's order)."""
        for shift in range(width - 1, -1, -1):
            self.append_bit((bits >> shift) & 1)

    def serialize(self) -> bytes | None:
        """Return the ``_typeBits`` payload, or None when every bit is 0."""
        if not self.value:
            return None
        return _serialize_type_bits(self.value.to_bytes((self.count + 7) // 8, "little"))


def _serialize_type_bits(data: bytes) -> bytes:
    """Frame raw type-bit data bytes the way the server stores them."""
    size = len(data)
    if size == 1 and not data[0] & 0x80:
        return data
    if size <= _SHORT_SIZE_LIMIT:
        return bytes((0x80 | size,)) + data
    return b"\x80" + size.to_bytes(4, "little") + data


def parse_type_bits(serialized: bytes | None) -> bytes:
    """Return the raw data bytes of a serialised ``_typeBits`` (empty: all zeros).

    Raises:
        ResumeTokenError: the size prefix disagrees with the bytes that follow.
    """
    if not serialized or serialized[0] == 0:
        return b""
    first = serialized[0]
    if not first & 0x80:
        if len(serialized) != 1:
            raise ResumeTokenError(
                f"invalid _typeBits: a single-byte form must be 1 byte long, got "
                f"{len(serialized)} bytes ({serialized.hex().upper()})"
            )
        return serialized
    size = first & 0x7F
    start = 1
    if size == 0:
        if len(serialized) < 5:
            raise ResumeTokenError(
                f"invalid _typeBits: expected a 4-byte size after 0x80, got "
                f"{serialized.hex().upper()}"
            )
        size = int.from_bytes(serialized[1:5], "little")
        start = 5
    data = serialized[start:]
    if len(data) != size:
        raise ResumeTokenError(
            f"invalid _typeBits: the size prefix says {size} data byte(s), "
            f"{len(data)} follow ({serialized.hex().upper()})"
        )
    return data


class TypeBitsReader:
    """Hands out type bits in the order the decoder meets the values."""

    __slots__ = ("_count", "_pos", "_value")

    def __init__(self, data: bytes) -> None:
        self._value = int.from_bytes(data, "little")
        self._count = len(data) * 8
        self._pos = 0

    def read_bit(self) -> int:
        """Return the next bit; an absent ``_typeBits`` reads as all zeros."""
        pos = self._pos
        if not self._count:
            self._pos = pos + 1
            return 0
        if pos >= self._count:
            raise ResumeTokenError(
                f"_typeBits too short: expected bit {pos}, but it holds only {self._count} bits"
            )
        self._pos = pos + 1
        return (self._value >> pos) & 1

    def read_bits(self, width: int) -> int:
        """Read ``width`` bits, most significant first, as an unsigned int."""
        result = 0
        for _ in range(width):
            result = (result << 1) | self.read_bit()
        return result
