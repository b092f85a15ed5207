"""Helpers for the live-source tests: entries, polling a source, thread checks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bson.timestamp import Timestamp

from shardstream.emulator import EmulatedCluster, EmulatedReplicaSet
from shardstream.oplog.live.tailer import LiveOplogSource
from shardstream.oplog.source import OplogBatch

AWAIT_MS = 50


def noop(second: int) -> dict[str, Any]:
    """A noop oplog entry at ``Timestamp(second, 1)``."""
    return {"ts": Timestamp(second, 1), "op": "n", "ns": "", "o": {"msg": f"n{second}"}}


def load_committed(
    cluster: EmulatedCluster, oplogs: Mapping[str, Sequence[Mapping[str, Any]]]
) -> None:
    """Append each shard's entries and make them all majority-committed."""
    for name, entries in oplogs.items():
        append_committed(cluster.shard(name), entries)


def append_committed(shard: EmulatedReplicaSet, entries: Sequence[Mapping[str, Any]]) -> None:
    """Append entries to one shard and majority-commit them (up to the last one)."""
    for entry in entries:
        shard.append(entry)
    shard.set_majority(entries[-1]["ts"])


def fill(shard: EmulatedReplicaSet, first: int, last: int, *, commit: bool = True) -> None:
    """Append noops ``first..last`` and (by default) make them majority-committed."""
    for second in range(first, last + 1):
        shard.append(noop(second))
    if commit:
        shard.set_majority(Timestamp(last, 1))


def poll(
    source: LiveOplogSource,
    until: Callable[[list[OplogBatch]], bool],
    timeout: float = 5.0,
    max_entries: int = 100,
) -> list[OplogBatch]:
    """Call ``next_batch`` until ``until(batches)`` holds; fail after ``timeout`` seconds."""
    batches: list[OplogBatch] = []
    deadline = time.monotonic() + timeout
    while not until(batches):
        if time.monotonic() > deadline:
            seen = [b.promise for b in batches]
            raise AssertionError(f"condition not met in {timeout}s; promises {seen}")
        batch = source.next_batch(max_entries)
        if batch is None:
            time.sleep(0.005)  # bounded by the deadline above
        else:
            batches.append(batch)
    return batches


def seconds(batches: list[OplogBatch]) -> list[int]:
    """The ``ts.time`` of every delivered entry, in delivery order."""
    return [entry["ts"].time for batch in batches for entry in batch.entries]


def reaches(last: int) -> Callable[[list[OplogBatch]], bool]:
    """A ``poll`` condition: the entry at ``Timestamp(last, 1)`` was delivered."""
    return lambda batches: bool(seconds(batches)) and seconds(batches)[-1] >= last


def promised(ts: Timestamp) -> Callable[[list[OplogBatch]], bool]:
    """A ``poll`` condition: some batch promised at least ``ts``."""
    return lambda batches: any(b.promise is not None and b.promise >= ts for b in batches)


def tailer_threads() -> list[threading.Thread]:
    """Reader threads of live sources still running."""
    return [t for t in threading.enumerate() if t.name.startswith("oplog-tail-")]


def get_mores(shard: EmulatedReplicaSet) -> int:
    """How many getMore commands the shard has received."""
    return shard.commands_seen.count("getmore")


def wait_for_get_more(shard: EmulatedReplicaSet, count: int, timeout: float = 3.0) -> None:
    """Wait until the shard has received at least ``count`` getMores."""
    deadline = time.monotonic() + timeout
    while get_mores(shard) < count:
        assert time.monotonic() < deadline, "the tailer stopped sending getMores"
        time.sleep(0.005)  # bounded by the deadline
