"""Simulator: live-feeding oplog sources over a simulated run's oplogs.

Each source behaves like a shard tailer on a network: a read may find nothing ready
yet (None), or return a batch of any size up to the limit, possibly empty.  A
non-empty batch promises its last entry's ``ts``; an empty one keeps the previous
promise or, sometimes, promises the timestamp just below the next entry, as a tailer
that knows the shard's progress would.  Every choice comes from a seed, so a test
that fails replays identically.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Final

from bson.timestamp import Timestamp

from shardstream.errors import ConfigurationError, OplogError
from shardstream.oplog.source import OplogBatch, OplogSource
from shardstream.sim.result import SimulationResult

DEFAULT_MAX_BATCH: Final = 16
DEFAULT_DELAY: Final = 0.2
_PROGRESS_REPORT: Final = 0.5  # share of empty batches that promise up to the next entry
_MAX_INCREMENT: Final = 2**32 - 1


def just_below(ts: Timestamp) -> Timestamp:
    """The greatest timestamp below ``ts``.

    >>> just_below(Timestamp(10, 3)), just_below(Timestamp(10, 0))
    (Timestamp(10, 2), Timestamp(9, 4294967295))
    """
    if ts.inc > 0:
        return Timestamp(ts.time, ts.inc - 1)
    return Timestamp(ts.time - 1, _MAX_INCREMENT)


class SimulatedOplogSource:
    """One shard's simulated oplog, read as if tailed live (an :class:`OplogSource`).

    Args:
        name: the shard's name.
        entries: its oplog entries, ``ts`` strictly increasing.
        seed: seeds the delays and batch sizes (mixed with ``name``).
        max_batch: the largest batch returned, whatever the caller allows.
        delay: the probability that a read finds nothing ready (returns None).

    Raises:
        ConfigurationError: ``max_batch`` < 1 or ``delay`` outside [0, 1).
    """

    def __init__(
        self,
        name: str,
        entries: Sequence[Mapping[str, Any]],
        *,
        seed: int,
        max_batch: int = DEFAULT_MAX_BATCH,
        delay: float = DEFAULT_DELAY,
    ) -> None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ConfigurationError(f"expected max_batch to be an int >= 1, got {max_batch!r}")
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay < 1:
            raise ConfigurationError(f"expected delay in [0, 1), got {delay!r}")
        self._name = name
        self._entries = list(entries)
        self._by_ts = {entry["ts"]: entry for entry in self._entries}
        # Seeding with a string is stable across processes (it is hashed with SHA-512).
        self._rng = random.Random(f"{seed}:{name}")
        self._max_batch = max_batch
        self._delay = delay
        self._position = 0
        self._promise: Timestamp | None = None
        self._closed = False

    @property
    def name(self) -> str:
        """The shard's name."""
        return self._name

    def next_batch(self, max_entries: int) -> OplogBatch | None:
        """Return the next batch of at most ``max_entries`` entries, or None (not ready yet).

        Raises:
            ConfigurationError: ``max_entries`` is negative.
            OplogError: the source was closed.
        """
        if max_entries < 0:
            raise ConfigurationError(f"expected max_entries >= 0, got {max_entries!r}")
        if self._closed:
            raise OplogError(f"shard {self._name!r}: the simulated source is closed")
        entries = self._entries
        if self._position >= len(entries):
            return OplogBatch((), self._promise, exhausted=True)
        rng = self._rng
        if rng.random() < self._delay:
            return None
        size = rng.randint(0, min(max_entries, self._max_batch))
        batch = entries[self._position : self._position + size]
        self._position += len(batch)
        if batch:
            self._promise = batch[-1]["ts"]
        elif rng.random() < _PROGRESS_REPORT:
            below = just_below(entries[self._position]["ts"])
            if self._promise is None or below > self._promise:
                self._promise = below
        return OplogBatch(tuple(batch), self._promise, exhausted=self._position >= len(entries))

    def fetch_entry(self, ts: Timestamp) -> Mapping[str, Any] | None:
        """The entry at ``ts`` (read back by optime), or None."""
        return self._by_ts.get(ts)

    def close(self) -> None:
        """Stop serving batches."""
        self._closed = True


def simulated_sources(
    result: SimulationResult,
    *,
    seed: int,
    max_batch: int = DEFAULT_MAX_BATCH,
    delay: float = DEFAULT_DELAY,
) -> dict[str, OplogSource]:
    """A live-feeding source per shard of ``result``, keyed by shard name.

    A shard added mid-run gets a source too; its entries start after
    ``result.shard_added[name]``.

    Args:
        result: a simulated run.
        seed: seeds every source's delays and batch sizes.
        max_batch: the largest batch any source returns.
        delay: the probability that a read returns None ("not ready yet").
    """
    return {
        name: SimulatedOplogSource(name, oplog, seed=seed, max_batch=max_batch, delay=delay)
        for name, oplog in result.oplogs.items()
    }
