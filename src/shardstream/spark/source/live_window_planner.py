"""Driver side, per-shard mode on a live cluster: windows planned from the shards' oplog
positions, without a merge.

The windows are :mod:`~shardstream.spark.source.window_planner`'s: ``[S, T)`` slices of
cluster time, each a slice of the merged stream (every event's token begins with its
cluster time), read by one task per shard.  For files the driver finds ``T`` in the files'
``ts`` indexes; here it asks the shards, so no event passes through the driver:

* **where every shard has passed**: each shard's majority commit point
  (``hello.lastWrite.majorityOpTime``, what a tailer promises while idle; mongos waits on
  the same points, through the shards' postBatchResumeTokens).  ``T`` is just past the
  smallest: every entry below it is majority-committed on its shard and no other can
  appear there, so each task reads a fixed, final slice.  The tasks' readers stop at the
  first entry at or past ``T``, or once their shard promises everything below it.
* **quiet clusters**: a window with no entry but no-ops (the periodic no-op writer's) is
  not planned until it spans ``advance_idle_after`` seconds of cluster time (a minute in a
  streaming query), as the merged planner moves a quiet stream's watermark on.
* **sized from the shards' oplogs**: per shard, one aggregation counts the entries that
  make events from ``S`` on (anything but a bare no-op; ``$limit``, then ``$group`` with
  ``$sum`` and ``$bsonSize``: the server counts, the driver gets one document); a shard
  holding more than its share (``maxEventsPerTrigger`` / shards, or ``maxBytesPerTrigger``
  / shards at those entries' average size, and at most :data:`PROBE_ENTRIES`) cuts ``T``
  at its entry past the share (``$skip``).  A window therefore holds about the share per
  shard at most (an ``applyOps`` entry counts once, whatever it holds), and at least one
  such entry: every window advances.

Shards added or removed are not followed here: when the cluster's shards are not the
offset's, :meth:`LiveWindowPlanner.plan` returns None and the merged planner, whose
config.shards monitor follows them, plans that batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from bson.timestamp import Timestamp
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from shardstream.errors import OplogError
from shardstream.oplog.live.discovery import discover_cluster
from shardstream.oplog.live.majority import read_majority
from shardstream.oplog.redaction import redact_text
from shardstream.resume_token import decode_token, encode_token, high_water_mark
from shardstream.spark.source.offsets import StreamOffset, token_of_text, token_text
from shardstream.spark.source.options import SourceSpec
from shardstream.spark.source.shard_inputs import ReadBound, start_time
from shardstream.transform.raw.pipeline import ts_key

# The most entries of one shard a window's sizing counts (and so holds), whatever the
# limits: the count is a scan on the shard, run once per batch.
PROBE_ENTRIES: Final = 100_000
_WAIT_S: Final = 60.0
_POLL_S: Final = 0.05
_PARALLEL: Final = 16  # shards asked at once
_TICK: Final = 1  # one increment: the smallest step between two cluster times
# Entries that make events: anything but a no-op, or a no-op carrying an event (o2).
_NOT_IDLE: Final = {"$or": [{"op": {"$ne": "n"}}, {"o2": {"$exists": True}}]}


class LiveWindowPlanner:
    """Plans one live spec's windows (lives in the driver's stream reader).

    Args:
        spec: a live source in per-shard mode (``window_planner.windows_apply``).
    """

    def __init__(self, spec: SourceSpec) -> None:
        assert spec.uri is not None  # a live spec
        self._spec = spec
        self._clients: dict[str, tuple[str, MongoClient[Any]]] = {}
        self._pool = ThreadPoolExecutor(_PARALLEL, thread_name_prefix="window-plan")

    def plan(
        self,
        start: StreamOffset,
        *,
        max_events: int | None,
        max_bytes: int | None,
        bound: ReadBound | None,
        wait_for_bound: bool = False,
        advance_idle_after: int | None = None,
    ) -> StreamOffset | None:
        """The end of the window that starts at ``start`` (``start``: nothing to read yet).

        Args:
            max_events / max_bytes: the read limits (None: none).
            bound: where the read ends (``availableNow``'s pinned time, ``endAtOperationTime``).
            wait_for_bound: wait (a minute at most) until the shards pass the bound's time,
                not only while they have something ready (``availableNow``).
            advance_idle_after: a window with no event-making entry is planned only once it
                spans this many seconds (None: always).

        Returns:
            None when the cluster's shards are not the offset's (the merge plans the batch).

        Raises:
            OplogError: a shard cannot be asked, or did not reach the bound in time.
        """
        shards = {shard.name: shard.uri for shard in discover_cluster(self._spec.uri or "").shards}
        if set(shards) != set(start.shards):
            return None
        begin = self._begin(start)
        stop = _time_of(bound.stop_before) if bound is not None else None
        deadline = time.monotonic() + _WAIT_S
        while True:
            end = min(map(ts_key, self._each(shards, self._majority).values())) + _TICK
            if stop is not None:
                end = min(end, stop)
            if end > begin or not wait_for_bound or stop is None or begin >= stop:
                break
            if time.monotonic() >= deadline:
                raise OplogError(
                    f"{self._spec.display}: the shards' majority points did not reach the "
                    f"pinned target {_timestamp(stop)} within {_WAIT_S:.0f} s (the lowest "
                    f"is at {_timestamp(end - _TICK)}): "
                    "a shard is lagging, unreachable or idle without a no-op writer"
                )
            time.sleep(_POLL_S)
        if end <= begin:
            return start
        limited = max_events is not None or max_bytes is not None
        short = advance_idle_after is not None and (end >> 32) - (begin >> 32) < advance_idle_after
        if limited or short:
            # One count per shard answers both: is the window quiet, and where is it cut.
            share = _Share(len(shards), max_events, max_bytes)
            probe = share.entries + 1 if limited else 1
            counts = self._each(shards, lambda name, uri: self._count(name, uri, begin, end, probe))
            quiet = not any(n for n, _ in counts.values())
            if short and quiet:
                return start
            if limited and not quiet:
                keeps = {name: share.keep(*counts[name]) for name in shards}
                cuts = self._each(
                    shards, lambda name, uri: self._cut(name, uri, begin, end, keeps[name])
                )
                end = min([end, *(cut for cut in cuts.values() if cut is not None)])
        version = self._spec.stream.default_token_version
        mark = high_water_mark(_timestamp(end), version)
        return StreamOffset(token_text(encode_token(mark)), start.shards, window=True)

    def close(self) -> None:
        """Close the shards' clients and the planning threads."""
        self._pool.shutdown(wait=False)
        for _, client in self._clients.values():
            client.close()
        self._clients.clear()

    def _begin(self, start: StreamOffset) -> int:
        if start.watermark:
            return _time_of(start.watermark)
        configured = start_time(self._spec.stream)
        assert configured is not None  # a live query's first offset pins its start
        return ts_key(configured)

    def _each(self, shards: Mapping[str, str], ask: Callable[[str, str], Any]) -> dict[str, Any]:
        """``ask(name, uri)`` for every shard, in parallel."""
        futures = {name: self._pool.submit(ask, name, uri) for name, uri in shards.items()}
        return {name: future.result() for name, future in futures.items()}

    def _client(self, name: str, uri: str) -> MongoClient[Any]:
        known = self._clients.get(name)
        if known is not None and known[0] == uri:
            return known[1]
        if known is not None:
            known[1].close()  # the shard's members changed: connect to the new ones
        client: MongoClient[Any] = MongoClient(uri, serverSelectionTimeoutMS=10_000)
        self._clients[name] = (uri, client)
        return client

    def _majority(self, name: str, uri: str) -> Timestamp:
        client = self._client(name, uri)
        failures: list[PyMongoError] = []
        found = read_majority(client, client.local["oplog.rs"], failures.append)
        if found is None:
            why = redact_text(str(failures[0])) if failures else "no lastWrite.majorityOpTime"
            raise OplogError(
                f"{self._spec.display}: cannot read shard {name!r}'s majority commit point "
                f"(hello): {why}"
            )
        return found[0]

    def _aggregate(self, name: str, uri: str, pipeline: list[Any]) -> list[Any]:
        try:
            return list(self._client(name, uri).local["oplog.rs"].aggregate(pipeline))
        except PyMongoError as exc:
            raise OplogError(
                f"{self._spec.display}: cannot size shard {name!r}'s oplog: {redact_text(str(exc))}"
            ) from None

    def _count(self, name: str, uri: str, begin: int, end: int, limit: int) -> tuple[int, int]:
        """How many of ``name``'s entries that make events lie in the window (``limit`` at
        most), and their bytes: counted by the shard, one document back."""
        counted = self._aggregate(
            name,
            uri,
            [
                {"$match": _window(begin, end)},
                {"$limit": limit},
                {
                    "$group": {
                        "_id": None,
                        "n": {"$sum": 1},
                        "bytes": {"$sum": {"$bsonSize": "$$ROOT"}},
                    }
                },
            ],
        )
        return (int(counted[0]["n"]), int(counted[0]["bytes"])) if counted else (0, 0)

    def _cut(self, name: str, uri: str, begin: int, end: int, keep: int | None) -> int | None:
        """The time before which ``name`` holds its first ``keep`` such entries (None: it
        keeps all it has up to ``end``)."""
        if keep is None:
            return None
        past = self._aggregate(
            name,
            uri,
            # Only the ts comes back: the entry past the share may be megabytes.
            [
                {"$match": _window(begin, end)},
                {"$skip": keep},
                {"$limit": 1},
                {"$project": {"_id": 0, "ts": 1}},
            ],
        )
        return ts_key(past[0]["ts"]) if past else None


def _window(begin: int, end: int) -> dict[str, Any]:
    """The entries of ``[begin, end)`` that make events."""
    return {"ts": {"$gte": _timestamp(begin), "$lt": _timestamp(end)}, **_NOT_IDLE}


class _Share:
    """One shard's share of a window's limits."""

    def __init__(self, shards: int, max_events: int | None, max_bytes: int | None) -> None:
        self.entries = PROBE_ENTRIES
        if max_events is not None:
            self.entries = max(1, min(PROBE_ENTRIES, -(-max_events // shards)))
        self.bytes = None if max_bytes is None else max(1, max_bytes // shards)

    def keep(self, counted: int, size: int) -> int | None:
        """How many of the shard's first ``counted`` entries (``size`` bytes in all) the
        window keeps; None: all of them, and the shard has no more than that."""
        keep = min(counted, self.entries)
        if self.bytes is not None and size > self.bytes and counted:
            keep = min(keep, max(1, self.bytes * counted // size))
        return None if keep >= counted else keep


def _time_of(token_text_: str) -> int:
    return ts_key(decode_token(token_of_text(token_text_)).cluster_time)


def _timestamp(key: int) -> Timestamp:
    return Timestamp(key >> 32, key & 0xFFFFFFFF)
