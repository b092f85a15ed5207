"""Fast path: one shard's raw oplog to batches of encoded events.

The unit of work a replay (or a worker process) runs per shard: batches of raw
entries in, batches of ``(sort keys, event BSON)`` out, so nothing but bytes ever
crosses to the merge.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
from collections.abc import Generator, Iterable, Iterator
from contextlib import contextmanager
from typing import Final

from bson.timestamp import Timestamp

from shardstream.errors import ChangeStreamHistoryLost
from shardstream.transform.raw.pipeline import FastShardPipeline, timestamp_of, ts_key

# The collector only ever finds garbage cycles, and the fast path makes none; with its
# default gen-0 threshold (700) it still walks every young container many times per
# batch.  Measured in benchmarks/replay_throughput.py.
QUIET_GC_THRESHOLD: Final = 100_000


@dataclasses.dataclass(slots=True)
class EncodedBatch:
    """Events of one batch of entries: sort keys (token ``_data``) and event BSON, in order.

    ``invalidate_key`` is set on the batch that holds the shard's invalidate (its last event).
    """

    keys: list[bytes]
    events: list[bytes]
    invalidate_key: bytes | None = None


def encode_shard(
    batches: Iterable[list[bytes]],
    pipeline: FastShardPipeline,
    *,
    check_order: bool = False,
    start: Timestamp | None = None,
) -> Generator[EncodedBatch, None, None]:
    """Run each batch of raw entries through ``pipeline``.

    Args:
        batches: raw entries, in oplog order, in batches.
        pipeline: the shard's pipeline (fast path with reference fallback).
        check_order: insist on a Timestamp ``ts`` increasing from entry to entry, as a
            shard of a merged stream must (see ``FileOplogSource``).
        start: the stream's start time; the shard's first entry must not be after it.

    Raises:
        OplogError: an entry is not valid BSON, or out of order when ``check_order``.
        ChangeStreamHistoryLost: the oplog starts after ``start``.
    """
    start_key = ts_key(start) if start is not None else None
    last = -1 if check_order else None
    process_batch = pipeline.process_batch
    try:
        for docs in batches:
            keys: list[bytes] = []
            events: list[bytes] = []
            if start_key is not None and docs:  # only the shard's first entry is checked
                ts = process_batch(docs[:1], keys, events, last=last)
                if ts > start_key:
                    raise ChangeStreamHistoryLost(
                        f"Resume of change stream was not possible, as the resume point may "
                        f"no longer be in the oplog: shard {pipeline.name!r} starts at "
                        f"{timestamp_of(ts)!r}, after the stream's start {start!r} (server "
                        "error 286)"
                    )
                start_key = None
                if check_order:
                    last = ts
                docs = docs[1:]
            if docs:
                ts = process_batch(docs, keys, events, last=last)
                if check_order:
                    last = ts
            if pipeline.closed:
                yield EncodedBatch(keys, events, pipeline.invalidate_key)
                return
            yield EncodedBatch(keys, events)
    finally:
        # The reader's file closes now, even when an error's traceback keeps this frame.
        close = getattr(batches, "close", None)
        if close is not None:
            close()


@contextmanager
def quiet_collector() -> Iterator[None]:
    """Keep the cyclic collector out of a hot loop: freeze what exists, collect rarely.

    The collector's settings are the process's: uses that overlap (a sync and its reverse
    in one process, threads) share one quiet period, from the first entry to the last exit,
    after which the thresholds are the ones the first found.
    """
    global _quiet_users, _saved_thresholds
    with _quiet_lock:
        if _quiet_users == 0:
            _saved_thresholds = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(QUIET_GC_THRESHOLD, _saved_thresholds[1], _saved_thresholds[2])
        _quiet_users += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_users -= 1
            if _quiet_users == 0:
                gc.set_threshold(*_saved_thresholds)
                gc.unfreeze()


_quiet_lock = threading.Lock()
_quiet_users = 0
_saved_thresholds: tuple[int, int, int] = gc.get_threshold()
