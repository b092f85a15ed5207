"""An emulated cluster in a process of its own, driven over a pipe, for the sync benchmarks.

The serving threads of an :class:`~shardstream.emulator.EmulatedCluster` would take the GIL
of the process being measured; in their own process they cost what a server costs: CPU
on another core, which :meth:`ClusterProcess.cpu` reports so a benchmark can say where
the time went.  Commands (the child answers each one):

* ``cpu``: the child's CPU seconds so far;
* ``live (busy, rate, noop_s, ns)``: a no-op on every shard at a fresh cluster time (the
  answer: that time, a start for a stream), then ``rate`` inserts/s into ``ns`` spread over
  the first ``busy`` shards and a periodic no-op every ``noop_s`` seconds on every shard,
  as mongod's ``periodicNoopIntervalSecs`` writer does;
* ``quiet``: stop the writers; ``exit``.

``acknowledge_only`` databases: mongos answers their writes without applying them
(:mod:`shardstream.emulator.acknowledge_only`), a target that costs only the answer.
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

from shardstream.bench.emulated import ClusterClock, ClusterWriters, preload


def _serve(
    conn: Connection, shards: int, oplogs: list[bytes], acknowledge_only: tuple[str, ...]
) -> None:
    from shardstream.emulator import EmulatedCluster  # only this process serves

    with EmulatedCluster(shards=shards) as cluster:
        if acknowledge_only:
            cluster.mongos.acknowledge_only(acknowledge_only)
        if oplogs:
            preload(cluster, oplogs)
        conn.send(cluster.uri)
        clock = ClusterClock()
        writers: ClusterWriters | None = None
        while True:  # bounded: the parent always ends with "exit"
            command, args = conn.recv()
            reply: Any = None
            if command == "cpu":
                reply = time.process_time()
            elif command == "live":
                busy, rate, noop_s, ns = args
                # Past every shard's newest entry: a sync's idle-shard nudges go through
                # the emulator's own write path, which this clock never hears of.
                newest = [shard.oplog.last_ts for shard in cluster.shards if shard.oplog.last_ts]
                start = clock.tick(after=max(newest, default=None))
                for shard in cluster.shards:
                    shard.append({"op": "n", "ns": "", "o": {"msg": "bench start"}, "ts": start})
                    shard.set_majority(start)
                writers = ClusterWriters(
                    clock, cluster.shards[:busy], rate, cluster.shards, noop_s, ns=ns
                )
                reply = (start.time, start.inc)
            elif command == "quiet" and writers is not None:
                writers.stop()
                writers = None
            elif command == "exit":
                break
            conn.send(reply)


class ClusterProcess:
    """An emulated cluster of ``shards`` shards, preloaded with ``oplogs`` (one per shard)."""

    def __init__(
        self,
        shards: int,
        oplogs: list[bytes] | None = None,
        *,
        acknowledge_only: tuple[str, ...] = (),
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(child, shards, oplogs or [], acknowledge_only), daemon=True
        )
        self._process.start()
        self.uri: str = self._conn.recv()

    def ask(self, command: str, args: Any = None) -> Any:
        """Send one command and return the child's answer."""
        self._conn.send((command, args))
        return self._conn.recv()

    def cpu(self) -> float:
        """The cluster process's CPU seconds so far."""
        return float(self.ask("cpu"))

    def close(self) -> None:
        """Stop the cluster and its process."""
        if self._process.is_alive():
            self._conn.send(("exit", None))
            self._process.join(10)
        if self._process.is_alive():
            self._process.kill()

    def __enter__(self) -> ClusterProcess:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
