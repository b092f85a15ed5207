"""ResumeToken: the wire form of a resume token (``{_data, _typeBits}``).

``_data`` is the upper-case hex of the KeyString, so comparing ``_data`` strings
orders tokens exactly as their bytes (and as mongos merges them).  ``_typeBits``
is BinData subtype 0, present only when some type bit is 1; token equality
ignores it, as on the server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bson.binary import Binary

from shardstream.errors import ResumeTokenError

DATA_FIELD = "_data"
TYPE_BITS_FIELD = "_typeBits"
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


@dataclasses.dataclass(frozen=True, slots=True, order=False)
class ResumeToken:
    """A resume token as it travels: hex KeyString plus optional type bits.

    Tokens compare and hash by ``data`` only, and sort by it.

    Attributes:
        data: the ``_data`` hex string (upper case when produced by the encoder).
        type_bits: the serialised ``_typeBits`` bytes, or None.
    """

    data: str
    type_bits: bytes | None = dataclasses.field(default=None, compare=False)

    @property
    def sort_key(self) -> str:
        """The key mongos sorts events by (``_id._data``); O(1), compares in O(len)."""
        return self.data

    def __lt__(self, other: ResumeToken) -> bool:
        return self.data < other.data

    def __le__(self, other: ResumeToken) -> bool:
        return self.data <= other.data

    def __gt__(self, other: ResumeToken) -> bool:
        return self.data > other.data

    def __ge__(self, other: ResumeToken) -> bool:
        return self.data >= other.data

    def to_document(self) -> dict[str, Any]:
        """Return the token as the server emits it: ``{_data[, _typeBits]}``."""
        if self.type_bits is None:
            return {DATA_FIELD: self.data}
        return {DATA_FIELD: self.data, TYPE_BITS_FIELD: Binary(self.type_bits, 0)}

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> ResumeToken:
        """Build a token from ``{_data: <hex string>[, _typeBits: <BinData 0>]}``.

        Raises:
            ResumeTokenError: a field is missing, has the wrong type, or is unknown;
                legacy BinData ``_data`` is accepted by ``decode_token_document`` only.
        """
        if not isinstance(document, Mapping):
            raise ResumeTokenError(
                f"expected a resume token document {{_data: ...}}, got "
                f"{type(document).__name__} {document!r:.100}"
            )
        unknown = [name for name in document if name not in (DATA_FIELD, TYPE_BITS_FIELD)]
        if unknown:
            raise ResumeTokenError(
                f"expected only {DATA_FIELD!r} and {TYPE_BITS_FIELD!r} in a resume token, "
                f"got also {unknown!r}"
            )
        data = document.get(DATA_FIELD)
        if not isinstance(data, str):
            raise ResumeTokenError(
                f"expected {DATA_FIELD!r} to be a hex string, got "
                f"{type(data).__name__} {data!r:.100}"
            )
        return cls(data, type_bits_from_value(document.get(TYPE_BITS_FIELD)))


def type_bits_from_value(value: Any) -> bytes | None:
    """Validate a ``_typeBits`` value: absent, or BinData of subtype 0."""
    if value is None:
        return None
    if isinstance(value, Binary):
        if value.subtype != 0:
            raise ResumeTokenError(
                f"expected {TYPE_BITS_FIELD!r} to be BinData subtype 0, got subtype {value.subtype}"
            )
        return bytes(value)
    if isinstance(value, bytes):
        return value
    raise ResumeTokenError(
        f"expected {TYPE_BITS_FIELD!r} to be BinData subtype 0, got "
        f"{type(value).__name__} {value!r:.100}"
    )


def hex_to_bytes(data: str) -> bytes:
    """Decode ``_data`` hex strictly: an even number of hex digits, nothing else.

    ``bytes.fromhex`` would accept spaces; the server's hex validation does not.
    """
    if not data:
        raise ResumeTokenError("invalid empty resume token: expected hex digits, got ''")
    if len(data) % 2 or not _HEX_DIGITS.issuperset(data):
        bad = next((ch for ch in data if ch not in _HEX_DIGITS), None)
        got = f"the character {bad!r}" if bad is not None else f"an odd length {len(data)}"
        raise ResumeTokenError(
            f"resume token _data is not a valid hex string: expected pairs of hex digits, "
            f"got {got} in {data!r:.120}"
        )
    return bytes.fromhex(data)
