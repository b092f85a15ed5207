"""An emulated cluster for ``shardstream bench --uri``: preloaded, and optionally written to.

``python -m shardstream.bench.emulated [SHARDS] [ENTRIES_PER_SHARD] [--write-rate N]``
starts an :class:`~shardstream.emulator.EmulatedCluster` (mongos, config server, SHARDS
single-node shards; default 4 x 50,000 entries), preloads every shard with the corpus
of :mod:`shardstream.bench.corpus` (seed = shard number), prints the mongos URI and the
``--start-at-operation-time`` to bench from, and serves until its stdin closes or it is
interrupted.  Run it as its own process, so that its serving threads do not take the
GIL of the process being measured; :func:`preloaded_cluster` is the same cluster
in-process.

The emulated mongos runs no ``$changeStream``: only shardstream's side of a bench runs
against it, and the native side is reported unavailable with the server's error.  It takes
inserts, so ``shardstream bench --uri URI --duration S --write-rate N`` writes through it;
into an unsharded collection they all land on one shard, and each other shard holds them
back until its next periodic no-op (every ``--noop-interval`` seconds, later than every
shard's newest entry, as gossiped cluster time makes a mongod's), so the latency measured
includes up to that interval: 10 s by default, as on mongod; ``--noop-interval 0.2`` keeps
it small.
``--write-rate N`` here writes inside the emulator instead, spread over the shards as a
hashed shard key would spread them (then bench with ``--write-rate 0``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import io
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
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
    return cluster.noop_on_every_shard(floor=CORPUS_START)


class ClusterClock:
    """One hybrid clock for the whole cluster: (wall seconds, increment).

    As if cluster time were gossiped to every shard: a no-op is always later than the
    writes before it, on any shard, so the merge never waits on a stale shard's clock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = Timestamp(0, 0)

    def tick(self, after: Timestamp | None = None) -> Timestamp:
        """The next cluster time: later than every one handed out, and than ``after``."""
        with self._lock:
            now = int(time.time())
            last = self._last if after is None else max(self._last, after)
            self._last = (
                Timestamp(now, 1) if now > last.time else Timestamp(last.time, last.inc + 1)
            )
            return self._last


def log_now(
    shard: EmulatedReplicaSet,
    clock: ClusterClock,
    entry: Callable[[Timestamp], Mapping[str, Any]],
    *,
    after: Timestamp | None = None,
) -> Timestamp:
    """Append ``entry(ts)`` to ``shard``'s oplog at the next cluster time, majority-committed.

    ``ts`` is later than the shard's newest entry and than ``after``.  Chosen and appended
    under the oplog's lock, under which the emulator's own write path (inserts through
    mongos) stamps and appends too, so the two writers never log out of order.
    """
    with shard.oplog.changed:
        newest = max((t for t in (shard.oplog.last_ts, after) if t is not None), default=None)
        ts = clock.tick(after=newest)
        shard.append(entry(ts))
        shard.set_majority(ts)
    return ts


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
        document: dict[str, Any] = {"_id": key, "sent": time.time()}
        if store:
            shard.insert(ns, document)
        log_now(shard, clock, functools.partial(insert_entry, ns, document))
        key += 1
        due += period
        stop.wait(max(0.0, due - time.monotonic()))


def noop_loop(
    shard: EmulatedReplicaSet,
    interval: float,
    clock: ClusterClock,
    stop: threading.Event,
    *,
    cluster: Sequence[EmulatedReplicaSet] = (),
) -> None:
    """A shard's periodic no-op writer (a mongod's ``periodicNoopIntervalSecs``).

    Each no-op is later than the newest entry of every shard of ``cluster`` too, as a
    shard's clock is after the cluster time gossip brought it: so it releases the writes
    another shard logged meanwhile (inserts through mongos all land on the first shard).
    """
    while not stop.wait(interval):
        # Read before taking this shard's lock: each last_ts takes its own shard's lock.
        newest = max((t for t in (peer.oplog.last_ts for peer in cluster) if t), default=None)
        log_now(shard, clock, _noop, after=newest)


class ClusterWriters:
    """:func:`write_loop` over ``busy`` shards and :func:`noop_loop` on each ``idle`` one,
    on threads, from construction until :meth:`stop`.

    Args:
        clock: the cluster's clock.
        busy: the shards the writer inserts into, round-robin.
        rate: inserts/s (0: no writer).
        idle: the shards that log periodic no-ops.
        interval: seconds between each idle shard's no-ops.
        cluster: every shard (each no-op is later than their newest entries).
        write_options: :func:`write_loop`'s keyword options (``ns``, ``store``).
    """

    def __init__(
        self,
        clock: ClusterClock,
        busy: Sequence[EmulatedReplicaSet],
        rate: float,
        idle: Sequence[EmulatedReplicaSet],
        interval: float,
        *,
        cluster: Sequence[EmulatedReplicaSet] = (),
        **write_options: Any,
    ) -> None:
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=noop_loop,
                args=(shard, interval, clock, self._stop),
                kwargs={"cluster": cluster},
                name=f"noop-{shard.name}",
            )
            for shard in idle
        ]
        if rate > 0:
            writer = (busy, rate, clock, self._stop)
            self._threads.append(
                threading.Thread(target=write_loop, args=writer, kwargs=write_options)
            )
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop every writer and wait for it."""
        self._stop.set()
        for thread in self._threads:
            thread.join()


def _noop(ts: Timestamp) -> dict[str, Any]:
    return {"op": "n", "ns": "", "o": {"msg": "periodic noop"}, "ts": ts, "t": Int64(1)}


@contextlib.contextmanager
def preloaded_cluster(
    shards: int = 4,
    entries: int = 50_000,
    *,
    write_rate: float = 0.0,
    namespace: str = BENCH_NAMESPACE,
    noop_interval: float = 10.0,
) -> Iterator[EmulatedCluster]:
    """A running cluster, preloaded, with its no-op writers (and writer) on; stopped after.

    Args:
        shards: emulated shards.
        entries: corpus entries preloaded per shard (:func:`preload`).
        write_rate: inserts/s into ``namespace`` by :func:`write_loop`, spread over the
            shards (0: none).
        namespace: where that writer inserts ("db.coll").
        noop_interval: seconds between each shard's periodic no-ops; a shard that takes
            no writes holds the others' events back for up to this long (10 on mongod).
    """
    with EmulatedCluster(shards=shards) as cluster:
        preload(cluster, [oplog_bytes(entries, seed=n) for n in range(shards)])
        every = cluster.shards
        writers = ClusterWriters(
            ClusterClock(),
            every,
            write_rate,
            every,
            noop_interval,
            cluster=every,
            ns=namespace,
            store=True,
        )
        try:
            yield cluster
        finally:
            writers.stop()


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
    with preloaded_cluster(
        args.shards,
        args.entries,
        write_rate=args.write_rate,
        namespace=args.namespace,
        noop_interval=args.noop_interval,
    ) as cluster:
        start = f"{CORPUS_START.time},{CORPUS_START.inc}"
        sys.stdout.write(f"{cluster.uri} --start-at-operation-time {start}\n")
        if args.write_rate > 0:
            sys.stdout.write(f"writing {args.write_rate:g} inserts/s into {args.namespace}\n")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
