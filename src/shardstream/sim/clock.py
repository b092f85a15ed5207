"""Simulator: a shard's hybrid logical clock, which hands out its oplog timestamps.

Like a replica set primary, a shard stamps each oplog entry with a ``Timestamp``
whose seconds follow the wall clock and whose increment counts entries within that
second, so one shard's timestamps strictly increase.  Shards tick independently,
which is why equal timestamps on different shards are common.  A message from
another node carries the sender's cluster time, and the receiver's clock never
falls behind it afterwards (the hybrid-logical-clock rule).

>>> clock = HybridClock()
>>> clock.tick(100), clock.tick(100), clock.tick(101)
(Timestamp(100, 1), Timestamp(100, 2), Timestamp(101, 1))
>>> clock.observe(Timestamp(101, 7))
>>> clock.tick(101)
Timestamp(101, 8)
"""

from __future__ import annotations

from typing import Final

from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError

_MAX_INCREMENT: Final = 2**32 - 1


class HybridClock:
    """One shard's clock: the last timestamp it handed out, or observed.

    Args:
        start: the clock starts just after this timestamp.
    """

    __slots__ = ("_last",)

    def __init__(self, start: Timestamp | None = None) -> None:
        self._last = start if start is not None else Timestamp(0, 0)

    @property
    def last(self) -> Timestamp:
        """The newest timestamp handed out or observed."""
        return self._last

    def peek(self, wall_secs: int) -> Timestamp:
        """The timestamp :meth:`tick` would hand out at ``wall_secs``, without taking it."""
        last = self._last
        if wall_secs > last.time:
            return Timestamp(wall_secs, 1)
        if last.inc == _MAX_INCREMENT:
            # A full second of increments: borrow from the next second, as the server does.
            return Timestamp(last.time + 1, 1)
        return Timestamp(last.time, last.inc + 1)

    def tick(self, wall_secs: int) -> Timestamp:
        """Hand out the next timestamp at wall time ``wall_secs``.

        Complexity: O(1).
        """
        self._last = self.peek(wall_secs)
        return self._last

    def observe(self, ts: Timestamp) -> None:
        """Receive a message stamped ``ts``: later ticks are above it."""
        if ts > self._last:
            self._last = ts

    def take(self, ts: Timestamp) -> None:
        """Hand out exactly ``ts`` (a two-phase commit's agreed timestamp).

        Raises:
            ConfigurationError: ``ts`` is not above the last timestamp.
        """
        if ts <= self._last:
            raise ConfigurationError(f"expected a timestamp above {self._last!r}, got {ts!r}")
        self._last = ts
