"""An emulated cluster for ``shardstream bench --uri``: preloaded, and optionally written to.

``python -m shardstream.bench.emulated [SHARDS] [ENTRIES_PER_SHARD] [--write-rate N]``
starts an :class:`~shardstream.emulator.EmulatedCluster` (mongos, config server, SHARDS
single-node shards; default 4 x 50,000 entries), preloads every shard with the corpus
of :mod:`shardstream.bench.corpus` (seed = shard number), prints the mongos URI and the
``--start-at-operation-time`` to bench from, and serves until its stdin closes or it is
interrupted.  Run it as its own process, so that its serving threads do not take the
GIL of the process being measured.  (The emulated mongos has no ``aggregate``, so
only shardstream's side of the bench can run against it, and its inserts all land on
the first shard, so writes are made here, by :func:`write_loop`, spread over the
shards, for ``bench --write-rate 0 --duration S``.)
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import bson
from bson.int64 import Int64
from bson.raw_bson import RawBSONDocument
from bson.timestamp import Timestamp

from shardstream.bench.corpus import oplog_bytes
from shardstream.emulator import EmulatedCluster, EmulatedReplicaSet

CORPUS_START = Timestamp(1_700_000_000, 1)  # the corpus's first ts
BENCH_NAMESPACE = "shardstream_bench.events"  # where bench writers insert
_RAW = bson.CodecOptions(document_class=RawBSONDocument)
_UUID = bson.Binary(bytes(range(16)), 4)


def preload(cluster: EmulatedCluster, oplogs: Sequence[bytes]) -> Timestamp:
    """Append ``oplogs[n]`` (concatenated BSON) to shard n, then one no-op on every shard.

    The no-op, one second after the newest entry of any shard, is what a periodic
    no-op writer would log: every shard's promise passes the corpus's last ``ts``, so the
    last events leave the merge gate, and the cluster time (the end of a bench window)
    is that no-op's.  Everything is majority-committed.  Returns the no-op's ``ts``.
    """
    shards = cluster.shards
    if len(oplogs) != len(shards):
        raise ValueError(f"expected {len(shards)} oplogs (one per shard), got {len(oplogs)}")
    for shard, data in zip(shards, oplogs, strict=True):
        for entry in bson.decode_file_iter(io.BytesIO(data), _RAW):
            shard.append(entry)
    newest = max((shard.oplog.last_ts or CORPUS_START).time for shard in shards)
    end = Timestamp(newest + 1, 1)
    for shard in shards:
        shard.append({"op": "n", "ns": "", "o": {"msg": "periodic noop"}, "ts": end})
        shard.set_majority(end)
    return end


class ClusterClock:
    """One hybrid clock for the whole cluster: (wall seconds, increment).

    As if cluster time were gossiped to every shard: a no-op is always later than the
    writes before it, on any shard, so the merge never waits on a stale shard's clock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = Timestamp(0, 0)

    def tick(self) -> Timestamp:
        """The next cluster time (never earlier than one already handed out)."""
        with self._lock:
            now = int(time.time())
            last = self._last
            self._last = (
                Timestamp(now, 1) if now > last.time else Timestamp(last.time, last.inc + 1)
            )
            return self._last


def insert_entry(ns: str, document: Mapping[str, Any], ts: Timestamp) -> dict[str, Any]:
    """The oplog entry of inserting ``document`` into ``ns`` at ``ts``, logged now."""
    return {
        "op": "i", "ns": ns, "ui": _UUID, "o": document, "o2": {"_id": document["_id"]},
        "ts": ts, "t": Int64(1), "v": Int64(2), "wall": datetime.datetime.now(datetime.UTC),
    }  # fmt: skip


def write_loop(
    shards: Sequence[EmulatedReplicaSet],
    per_second: float,
    clock: ClusterClock,
    stop: threading.Event,
    *,
    ns: str = "shop.orders",
    store: bool = False,
) -> None:
    """Insert ``per_second`` documents a second, round-robin over ``shards``, until ``stop``.

    Each document is ``{_id: n, sent: time.time()}``: its insert time on a clock that
    every process of the machine shares, for latency = out of the stream - ``sent``.
    The oplog entry's ``wall`` is the wall clock too (as a mongod's), and the majority
    point moves at once, so an entry is readable as soon as it is logged.  With
    ``store``, the document is also kept in the shard's collection ``ns``, so that a
    ``find`` through mongos counts what was written (as after a real insert).
    """
    period, due, key = 1 / per_second, time.monotonic(), 0
    while not stop.is_set():
        shard = shards[key % len(shards)]
        ts = clock.tick()
        document: dict[str, Any] = {"_id": key, "sent": time.time()}
        if store:
            shard.insert(ns, document)
        shard.append(insert_entry(ns, document, ts))
        shard.set_majority(ts)
        key += 1
        due += period
        stop.wait(max(0.0, due - time.monotonic()))


def noop_loop(
    shard: EmulatedReplicaSet, interval: float, clock: ClusterClock, stop: threading.Event
) -> None:
    """A shard's periodic no-op writer (a mongod's ``periodicNoopIntervalSecs``)."""
    while not stop.wait(interval):
        ts = clock.tick()
        shard.append({"op": "n", "ns": "", "o": {"msg": "periodic noop"}, "ts": ts, "t": Int64(1)})
        shard.set_majority(ts)


def main(argv: Sequence[str]) -> int:
    """Serve a preloaded cluster until stdin closes; print its URI and start time."""
    parser = argparse.ArgumentParser(prog="python -m shardstream.bench.emulated")
    parser.add_argument("shards", nargs="?", type=int, default=4)
    parser.add_argument("entries", nargs="?", type=int, default=50_000, help="per shard")
    parser.add_argument(
        "--write-rate", type=float, default=0.0, metavar="N", help="inserts/s over all shards"
    )
    parser.add_argument("--namespace", default=BENCH_NAMESPACE, metavar="DB.COLL")
    parser.add_argument(
        "--noop-interval", type=float, default=10.0, metavar="S", help="per shard (10)"
    )
    args = parser.parse_args(argv)
    with EmulatedCluster(shards=args.shards) as cluster:
        preload(cluster, [oplog_bytes(args.entries, seed=n) for n in range(args.shards)])
        clock, stop = ClusterClock(), threading.Event()
        threads = [
            threading.Thread(target=noop_loop, args=(shard, args.noop_interval, clock, stop))
            for shard in cluster.shards
        ]
        if args.write_rate > 0:
            options = {"ns": args.namespace, "store": True}
            writer = (cluster.shards, args.write_rate, clock, stop)
            threads.append(threading.Thread(target=write_loop, args=writer, kwargs=options))
        for thread in threads:
            thread.start()
        start = f"{CORPUS_START.time},{CORPUS_START.inc}"
        sys.stdout.write(f"{cluster.uri} --start-at-operation-time {start}\n")
        if args.write_rate > 0:
            sys.stdout.write(f"writing {args.write_rate:g} inserts/s into {args.namespace}\n")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            sys.stdin.read()
        stop.set()
        for thread in threads:
            thread.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
