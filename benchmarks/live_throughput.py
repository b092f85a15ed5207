"""Live mode: ``shardstream.watch(URI)`` against an emulated 4-shard cluster on loopback.

Run: ``.venv/bin/python -m benchmarks.live_throughput [ENTRIES_PER_SHARD] [NOOP_INTERVALS]``
(e.g. ``50000 0.5,2,10``), with ``--lag-only`` or ``--throughput-only`` to run one part.

The emulated cluster (mongos, config server, 4 shards) runs in a process of its own, so
its serving threads do not take the reader's GIL: what is timed is shardstream, not the
emulator competing with it inside one interpreter.

1. Throughput: every shard preloaded with the seeded corpus (``benchmarks/corpus.py``,
   majority-committed); ``watch(uri, start_at_operation_time=first ts)`` read to the last
   event with ``tailer="thread"`` and ``tailer="process"``; median and spread of 3 runs,
   next to decode-only of the same bytes and a merged replay of them from files.
2. Idle-shard lag: 3 shards take inserts at a steady rate, the 4th is idle and only
   writes a periodic no-op every N seconds (a real mongod's ``periodicNoopIntervalSecs``,
   10 s by default). Every insert carries its append time; the latency is append ->
   the event leaving ``watch()``, over the events after a 1 s warm-up.

All writes and no-ops take their ``ts`` from one cluster clock (wall seconds, increment),
as if cluster time were gossiped to every shard, so a no-op is always later than the
writes before it (``shardstream.bench.emulated``'s writers, shared with ``shardstream bench``).
Insert times are ``time.time()``, one clock for every process here.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

import bson
from bson.raw_bson import RawBSONDocument

import shardstream
from benchmarks.corpus import oplog_bytes
from benchmarks.timing import machine_line, median_rate
from shardstream.bench.emulated import CORPUS_START, ClusterClock, ClusterWriters, preload
from shardstream.merger import MergedStream
from shardstream.oplog import OPLOG_CODEC_OPTIONS
from shardstream.oplog.file_source import FileOplogSource
from shardstream.transform import ChangeStreamOptions

SHARDS = 4
REPEATS = 3
START = CORPUS_START
WRITES_PER_SHARD_S = 100
LAG_SECONDS = 8.0
WARM_UP_S = 1.0
_RAW = bson.CodecOptions(document_class=RawBSONDocument)


# -- the emulator process ----------------------------------------------------------------


def _emulator_main(conn: Connection) -> None:
    from shardstream.emulator import EmulatedCluster  # only this process serves

    with EmulatedCluster(shards=SHARDS) as cluster:
        # Plus a later no-op on every shard, so the corpus's last events leave the gate.
        preload(cluster, [conn.recv_bytes() for _ in cluster.shards])
        conn.send((cluster.uri, time.process_time()))
        clock = ClusterClock()
        writers: ClusterWriters | None = None
        while True:  # bounded: the parent always ends with "exit"
            command, args = conn.recv()
            if command == "live":
                busy, interval = args
                rate = WRITES_PER_SHARD_S * busy
                writers = ClusterWriters(
                    clock, cluster.shards[:busy], rate, cluster.shards[busy:], interval
                )
            elif command == "quiet" and writers is not None:
                writers.stop()
                writers = None
            elif command == "exit":
                break
            conn.send(time.process_time())


# -- the reader (this process) -----------------------------------------------------------


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _read_all(uri: str, tailer: str, expected: int) -> dict[str, float]:
    """Open watch() and read ``expected`` events; timings and CPU seconds."""
    cpu, children, opened = time.process_time(), _cpu_children(), time.perf_counter()
    count, first = 0, 0.0
    with shardstream.watch(uri, start_at_operation_time=START, tailer=tailer) as stream:
        for _event in stream:
            count += 1
            if count == 1:
                first = time.perf_counter()
            if count == expected:
                break
        last = time.perf_counter()
    return {
        "startup": first - opened,
        "rate": (count - 1) / (last - first),
        "overall": count / (last - opened),
        "cpu_reader": time.process_time() - cpu,
        "cpu_children": _cpu_children() - children,
    }


def throughput(emulator: Connection, uri: str, datas: list[bytes], directory: Path) -> None:
    entries = sum(1 for data in datas for _ in bson.decode_file_iter(io.BytesIO(data), _RAW))

    def decode() -> int:
        return sum(
            1
            for data in datas
            for _ in bson.decode_file_iter(io.BytesIO(data), OPLOG_CODEC_OPTIONS)
        )

    paths = []
    for n, data in enumerate(datas):
        paths.append(directory / f"shard{n:02d}.bson")
        paths[-1].write_bytes(data)

    def replay() -> int:
        sources = {p.stem: FileOplogSource(p.stem, str(p)) for p in paths}
        stream = MergedStream(sources, ChangeStreamOptions(start_at_operation_time=START))
        count = 0
        while not stream.exhausted:
            count += len(stream.next_batch(1000)[0])
        return count

    decode_rate, spread, _ = median_rate(decode, REPEATS)
    size = sum(map(len, datas)) / entries
    print(f"{SHARDS} shards, {entries:,} entries, {size:.0f} bytes/entry, median of {REPEATS}")
    print(
        f"  {'decode_file_iter to dicts':34s} {decode_rate:9,.0f} entries/s  spread {spread:5.1%}"
    )
    replay_rate, spread, expected = median_rate(replay, REPEATS)
    print(
        f"  {'merged replay from files':34s} {replay_rate:9,.0f} events/s   spread {spread:5.1%}"
        f"  ({expected:,} events; {replay_rate / decode_rate:.2f}x decode)"
    )
    for tailer in ("thread", "process"):
        emulator.send(("cpu", None))
        emulator_cpu = emulator.recv()
        runs = [_read_all(uri, tailer, expected) for _ in range(REPEATS)]
        emulator.send(("cpu", None))
        emulator_cpu = (emulator.recv() - emulator_cpu) / REPEATS
        rates = [run["rate"] for run in runs]
        rate = statistics.median(rates)
        med = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        print(
            f"  {'watch(URI), tailer=' + tailer:34s} {rate:9,.0f} events/s   spread "
            f"{(max(rates) - min(rates)) / rate:5.1%}  ({rate / decode_rate:.2f}x decode, "
            f"{rate / replay_rate:.2f}x replay)"
        )
        print(
            f"      first event after {med['startup']:.2f}s, {med['overall']:,.0f} events/s from "
            f"watch(); CPU s per run: reader {med['cpu_reader']:.1f}, tailer processes "
            f"{med['cpu_children']:.1f}, emulator {emulator_cpu:.1f}"
        )


def _lag(uri: str, seconds: float, max_await_ms: int, tailer: str, monitor: bool) -> list[float]:
    latencies: list[float] = []
    with shardstream.watch(
        uri, max_await_time_ms=max_await_ms, tailer=tailer, monitor_shards=monitor
    ) as stream:
        began = time.monotonic()
        while time.monotonic() - began < seconds:  # bounded by the clock
            event = stream.try_next()
            if event is not None and time.monotonic() - began > WARM_UP_S:
                latencies.append(time.time() - event["fullDocument"]["sent"])
    return latencies


def idle_lag(emulator: Connection, uri: str, intervals: list[float]) -> None:
    print(
        f"idle-shard lag: {SHARDS - 1} shards x {WRITES_PER_SHARD_S} inserts/s, append -> event "
        f"out of watch(), ms; {LAG_SECONDS:.0f} s per row after a {WARM_UP_S:.0f} s warm-up"
    )
    print(f"  {'idle shards':>11s} {'noop every':>10s} {'await ms':>8s} {'tailer':>7s}"
          f" {'monitor':>7s} {'events':>6s} {'p50':>7s} {'p95':>7s} {'max':>7s}")  # fmt: skip
    rows = [(0, 0.0, await_ms, "thread", True) for await_ms in (100, 1000)]
    rows += [(0, 0.0, 1000, "thread", False)]
    for every in intervals:
        rows += [(1, every, await_ms, "thread", True) for await_ms in (100, 1000)]
    rows += [(1, intervals[0], 1000, "thread", False), (1, intervals[0], 1000, "process", True)]
    for idle, every, await_ms, tailer, monitor in rows:
        emulator.send(("live", (SHARDS - idle, every)))
        emulator.recv()
        seconds = max(LAG_SECONDS, 4 * every) + WARM_UP_S
        lat = sorted(_lag(uri, seconds, await_ms, tailer, monitor))
        emulator.send(("quiet", None))
        emulator.recv()
        p50, p95 = lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.95)] * 1000
        noop = f"{every:.1f} s" if idle else "-"
        print(
            f"  {idle:11d} {noop:>10s} {await_ms:8d} {tailer:>7s} {'on' if monitor else 'off':>7s} "
            f"{len(lat):6d} {p50:7.0f} "
            f"{p95:7.0f} {lat[-1] * 1000:7.0f}"
        )


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    per_shard = int(args[0]) if args else 50_000
    intervals = [float(x) for x in args[1].split(",")] if len(args) > 1 else [0.5, 1.0, 2.0]
    print(machine_line())
    datas = [oplog_bytes(per_shard, seed=n) for n in range(SHARDS)]
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    emulator = context.Process(target=_emulator_main, args=(child,), daemon=True)
    emulator.start()
    for data in datas:
        parent.send_bytes(data)
    uri, _ = parent.recv()
    try:
        if "--lag-only" not in argv:
            with tempfile.TemporaryDirectory() as directory:
                throughput(parent, uri, datas, Path(directory))
        if "--throughput-only" not in argv:
            idle_lag(parent, uri, intervals)
    finally:
        parent.send(("exit", None))
        emulator.join(10)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
