"""A cursor over KeyString bytes that reports truncation as a ResumeTokenError."""

from __future__ import annotations

from shardstream.errors import ResumeTokenError


class ByteReader:
    """Reads a bytes object front to back.

    Every read past the end raises :class:`ResumeTokenError` naming how many bytes
    were wanted and how many were left, so a truncated token never escapes as an
    ``IndexError``.
    """

    __slots__ = ("_data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self._data = data
        self.pos = pos

    @property
    def remaining(self) -> int:
        """Number of unread bytes."""
        return len(self._data) - self.pos

    def at_end(self) -> bool:
        """Return whether every byte has been read."""
        return self.pos >= len(self._data)

    def peek(self) -> int:
        """Return the next byte without consuming it."""
        if self.pos >= len(self._data):
            raise self._truncated(1)
        return self._data[self.pos]

    def read_byte(self) -> int:
        """Consume and return one byte."""
        pos = self.pos
        if pos >= len(self._data):
            raise self._truncated(1)
        self.pos = pos + 1
        return self._data[pos]

    def read(self, count: int) -> bytes:
        """Consume and return exactly ``count`` bytes."""
        pos = self.pos
        end = pos + count
        if end > len(self._data):
            raise self._truncated(count)
        self.pos = end
        return self._data[pos:end]

    def read_uint_be(self, count: int) -> int:
        """Consume ``count`` bytes and return them as an unsigned big-endian integer."""
        return int.from_bytes(self.read(count), "big")

    def read_cstring(self) -> bytes:
        """Consume bytes up to a NUL terminator (not escaped) and return them without it."""
        end = self._data.find(b"\x00", self.pos)
        if end < 0:
            raise ResumeTokenError(
                f"truncated KeyString: expected a NUL-terminated string at byte {self.pos}, "
                f"found end of data after {self.remaining} bytes"
            )
        value = self._data[self.pos : end]
        self.pos = end + 1
        return value

    def _truncated(self, wanted: int) -> ResumeTokenError:
        return ResumeTokenError(
            f"truncated KeyString: expected {wanted} more byte(s) at offset {self.pos}, "
            f"found {max(self.remaining, 0)}"
        )
