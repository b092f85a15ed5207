"""A streaming offset is a position in the merged stream, made of resume tokens.

An offset holds

* ``watermark``: the token (``_data`` hex) of the last event included so far.  Every event
  sorting at or below it has been handed to Spark, none above it.  Empty means "the
  stream's configured start" (``startAtOperationTime``, ``resumeAfter`` ... or the oldest
  oplog entry); a live query's first offset pins a high-water-mark token at the cluster's
  time instead, so every replay starts from the same point.
* ``window`` (only written when true): the batch that ends here is a cluster-time window
  (:mod:`shardstream.spark.source.window_planner`): ``watermark`` is the high-water-mark
  token of the window's end, every event below it is included, and ``shards`` is the
  start's (a window's shard tokens are never read).
* ``shards``: per shard, the token of its last event included ("" while it has none).
  The watermark alone says where a batch ends in the merged order; the shard tokens say
  where each shard's share of it ends, down to an operation inside a transaction (a
  timestamp cannot: a transaction's operations share one).  They let a task stop reading
  a shard exactly at its last event, and skip shards with nothing in the batch.

A token is written as its ``_data`` hex, followed by ``:`` and the hex of its ``_typeBits``
when it has them (a token whose documentKey holds a long or a double cannot be decoded
without them): :func:`token_text` / :func:`token_of_text`.  Comparisons use the ``_data``
part only (:func:`data_of`), which is what orders the stream.

Spark compares offsets as their JSON text, so :meth:`StreamOffset.to_json` always builds
the same key order (``v``, ``watermark``, ``shards`` with shard names sorted): equal
positions must serialise to equal strings, or Spark runs a spurious empty batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Final

from shardstream.errors import ConfigurationError
from shardstream.resume_token import ResumeToken

OFFSET_VERSION: Final = 1
_HEX: Final = frozenset("0123456789ABCDEF")
_TYPE_BITS_SEPARATOR: Final = ":"


def token_text(token: ResumeToken) -> str:
    """A token as an offset holds it.

    >>> token_text(ResumeToken("8201", b"\\x82")), token_text(ResumeToken("8201"))
    ('8201:82', '8201')
    """
    if token.type_bits is None:
        return token.data
    return f"{token.data}{_TYPE_BITS_SEPARATOR}{token.type_bits.hex().upper()}"


def token_of_text(text: str) -> ResumeToken:
    """The token an offset's text stands for (inverse of :func:`token_text`)."""
    data, _, bits = text.partition(_TYPE_BITS_SEPARATOR)
    return ResumeToken(data, bytes.fromhex(bits) if bits else None)


def data_of(text: str) -> str:
    """The ``_data`` part of a token text: the part that orders the stream."""
    return text.partition(_TYPE_BITS_SEPARATOR)[0]


@dataclasses.dataclass(frozen=True, slots=True)
class StreamOffset:
    """A position in the merged stream (see the module docstring).

    >>> offset = StreamOffset("", {"b": "", "a": ""}).advanced("8201", {"b": "8201"})
    >>> offset.to_json()
    {'v': 1, 'watermark': '8201', 'shards': {'a': '', 'b': '8201'}}
    """

    watermark: str
    shards: Mapping[str, str]
    window: bool = False

    @classmethod
    def initial(cls, watermark: str, shard_names: Iterable[str]) -> StreamOffset:
        """The offset before any event: every shard without one yet."""
        return cls(watermark, dict.fromkeys(shard_names, ""))

    def to_json(self) -> dict[str, Any]:
        """The offset as Spark stores it, in the one canonical key order."""
        value: dict[str, Any] = {
            "v": OFFSET_VERSION,
            "watermark": self.watermark,
            "shards": {name: self.shards[name] for name in sorted(self.shards)},
        }
        if self.window:
            value["window"] = True
        return value

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> StreamOffset:
        """Read an offset back (from Spark, or a checkpoint).

        Raises:
            ConfigurationError: not an offset this version wrote.
        """
        if not isinstance(value, Mapping) or value.get("v") != OFFSET_VERSION:
            raise ConfigurationError(
                f"expected a shardstream offset with v={OFFSET_VERSION}, got {value!r:.200}"
            )
        watermark = value.get("watermark")
        shards = value.get("shards")
        if (
            not isinstance(watermark, str)
            or not _is_token(watermark)
            or not isinstance(shards, Mapping)
        ):
            raise ConfigurationError(
                f"expected an offset with a watermark token and a shards object, got {value!r:.200}"
            )
        for name, token in shards.items():
            if not isinstance(name, str) or not isinstance(token, str) or not _is_token(token):
                raise ConfigurationError(
                    f"expected shard {name!r} to map to a token (hex or empty), got {token!r:.80}"
                )
        window = value.get("window", False)
        if not isinstance(window, bool):
            raise ConfigurationError(
                f"expected the offset's window to be a boolean, got {window!r}"
            )
        return cls(watermark, dict(shards), window)

    def advanced(self, watermark: str, last_by_shard: Mapping[str, str]) -> StreamOffset:
        """The offset after a batch ending at ``watermark``, with each shard's new last event."""
        shards = dict(self.shards)
        shards.update(last_by_shard)
        return StreamOffset(watermark, shards)

    def token_of(self, shard: str) -> str:
        """The shard's last included event token ("" when it has none)."""
        return self.shards.get(shard, "")

    def shards_advanced_from(self, start: StreamOffset) -> dict[str, str]:
        """The shards with events after ``start``: shard -> its last event at this offset."""
        return {name: token for name, token in self.shards.items() if token != start.token_of(name)}


def _is_token(value: str) -> bool:
    data, _, bits = value.partition(_TYPE_BITS_SEPARATOR)
    return set(data) <= _HEX and set(bits) <= _HEX and len(bits) % 2 == 0
