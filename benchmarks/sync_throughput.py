"""``shardstream sync``'s apply rate into an emulated target, with 1, 2, 4 and 8 writers.

Run: ``.venv/bin/python -m benchmarks.sync_throughput [ENTRIES_PER_SHARD] [--profile]``
(default 10000: 40,000 oplog entries over 4 shards).

In one run, on the seeded corpus (``benchmarks/corpus.py``: inserts, ``$v:2`` updates,
deletes, 2-4-op transactions):

* ``shardstream replay --output-format bson`` of the four shards' files (a subprocess,
  start-up included, one core): the merge's own rate;
* ``shardstream.watch(URI)`` of the same entries served by an emulated 4-shard source
  cluster (its own process), read to the last event with the sync's options (expanded
  events, raw update descriptions), each event decoded as the sync decodes it: what the
  sync can read;
* the sync (phase 2 only: ``start_at`` the corpus's first ``ts``, so the target starts
  empty and every event is applied) into a fresh emulated 2-shard target (its own process)
  with each writer count; events applied per second, from ``SyncJob.run()`` to the last
  applied batch (the run's idle exit is subtracted; the start-up, cluster discovery and
  opening the stream, are included), and CPU seconds per event of this process (the sync),
  the source and the target.  Each target's final data is compared, document bytes and
  all, with the corpus's merged events applied in order (``sim.apply_events``);
* the same syncs into a target whose mongos only acknowledges the corpus database's writes
  (``EmulatedMongos.acknowledge_only``): the sync's own CPU per event without a Python
  server taking each write on the same two cores (issue 28's target: <= 40 us; its
  stage-by-stage figures are ``sync_cpu_stages.py``'s), over the whole run and, beside it,
  marginal: the CPU of the same sync of a 500-entries-per-shard corpus (its own emulated
  source) taken off, so the start (discovery, connections, opening the stream: ~0.15 s)
  and the idle exit's second do not count.

``--profile`` also runs the 2-writer sync under cProfile, every thread of this process
profiled (the main thread, the read-ahead, the writers, the tailers), and prints where the
sync's CPU went; wall time waiting (locks, sockets) shows as such.
Writes ``benchmarks/results/sync_throughput.json``.
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bson
import pymongo
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

import shardstream
from benchmarks.cluster_process import ClusterProcess
from benchmarks.corpus import oplog_bytes
from benchmarks.timing import machine_line
from shardstream.bench.emulated import CORPUS_START
from shardstream.cluster_sync import SyncJob, SyncOptions
from shardstream.cluster_sync.batch_reader import STEP_S
from shardstream.cluster_sync.event_planner import EventPlanner
from shardstream.cluster_sync.namespace_map import NamespaceMap
from shardstream.oplog.file_reader import OPLOG_CODEC_OPTIONS
from shardstream.sim.apply_events import apply_events, encoded_state
from shardstream.sim.emulated_source import cluster_state
from shardstream.sim.reference_events import merged_oplog_events

SOURCE_SHARDS = 4
TARGET_SHARDS = 2
WRITERS = (1, 2, 4, 8)
IDLE_EXIT_S = 1.0
SMALL_PER_SHARD = 500  # the corpus whose sync's CPU is taken off for the marginal figure
CORPUS_DATABASE = "shop"  # every write of the corpus (shardstream.bench.corpus)
RESULTS = Path(__file__).parent / "results" / "sync_throughput.json"
_RAW = CodecOptions(document_class=RawBSONDocument)


def replay_bson(paths: list[Path]) -> dict[str, float]:
    """``shardstream replay --output-format bson`` as a subprocess: seconds and events."""
    shards = [f"--shard=shard{n}={path}" for n, path in enumerate(paths)]
    command = [sys.executable, "-m", "shardstream", "replay", *shards, "--output-format", "bson"]
    began = time.perf_counter()
    output = subprocess.run(command, check=True, capture_output=True).stdout
    seconds = time.perf_counter() - began
    events = sum(1 for _ in bson.decode_file_iter(io.BytesIO(output), _RAW))
    return {"seconds": seconds, "events": events, "rate": events / seconds}


def expected_contents(paths: list[Path]) -> dict[Any, dict[bytes, bytes]]:
    """The corpus's events applied in the merged order: what every target must hold.

    Found without the merger the sync runs (a plain sort of each shard's events).
    """
    oplogs = {
        f"shard{n}": bson.decode_all(path.read_bytes(), OPLOG_CODEC_OPTIONS)
        for n, path in enumerate(paths)
    }
    return encoded_state(apply_events(merged_oplog_events(oplogs)))


def target_contents(uri: str) -> dict[Any, dict[bytes, bytes]]:
    """Every user document of the target, keyed as :func:`expected_contents` keys them."""
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(uri)
    with client:
        return dict(cluster_state(client))


def read_only(uri: str, events: int) -> dict[str, float]:
    """``watch(URI)`` with the sync's options, read to the ``events``-th event and each
    event taken and planned as the sync's reader does (``take_decoded`` with an
    ``EventPlanner``'s two halves)."""
    planner = EventPlanner(NamespaceMap())
    cpu, began, count = time.process_time(), time.perf_counter(), 0
    with shardstream.watch(
        uri,
        start_at_operation_time=CORPUS_START,
        show_expanded_events=True,  # the sync's options
        show_raw_update_description=True,
    ) as stream:
        while count < events:  # bounded: the source holds ``events`` events
            taken = len(stream.take_decoded(planner.raw, 1000, planner.document))
            if not taken:
                time.sleep(STEP_S)  # as the reader looks again
            count += taken
    seconds = time.perf_counter() - began
    return {"seconds": seconds, "rate": count / seconds, "cpu": time.process_time() - cpu}


@contextlib.contextmanager
def every_thread_profiled() -> Iterator[list[cProfile.Profile]]:
    """Profile this thread and every thread started meanwhile, each with its own profiler.

    cProfile follows one thread; the sync reads, plans and writes on several.
    """
    profiles = [cProfile.Profile()]
    original = threading.Thread.run

    def profiled_run(thread: threading.Thread) -> None:
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.runcall(original, thread)

    threading.Thread.run = profiled_run  # type: ignore[method-assign,assignment]
    profiles[0].enable()
    try:
        yield profiles
    finally:
        profiles[0].disable()
        threading.Thread.run = original  # type: ignore[method-assign]


def one_sync(source: ClusterProcess, writers: int, *, acknowledge_only: bool) -> dict[str, Any]:
    """A sync of the whole corpus into a fresh target with ``writers`` writers.

    ``acknowledge_only``: the target answers the corpus's writes without applying them
    (its contents are then not read).
    """
    ignored = (CORPUS_DATABASE,) if acknowledge_only else ()
    with ClusterProcess(TARGET_SHARDS, acknowledge_only=ignored) as target:
        options = SyncOptions(
            source=source.uri,
            target=target.uri,
            writers=writers,
            start_at=CORPUS_START,
            idle_exit_s=IDLE_EXIT_S,
        )
        source_cpu, target_cpu, cpu = source.cpu(), target.cpu(), time.process_time()
        began = time.perf_counter()
        result = SyncJob(options).run()
        seconds = time.perf_counter() - began - IDLE_EXIT_S
        run: dict[str, Any] = {
            "writers": writers,
            "events": result.applied,
            "seconds": seconds,
            "rate": result.applied / seconds,
            "cpu_sync": time.process_time() - cpu,
            "cpu_source": source.cpu() - source_cpu,
            "cpu_target": target.cpu() - target_cpu,
        }
        if not acknowledge_only:
            run["contents"] = target_contents(target.uri)
    return run


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    per_shard = int(args[0]) if args else 10_000
    print(machine_line())
    datas = [oplog_bytes(per_shard, seed=n) for n in range(SOURCE_SHARDS)]
    report: dict[str, Any] = {"entries_per_shard": per_shard, "source_shards": SOURCE_SHARDS}
    with tempfile.TemporaryDirectory() as directory:
        paths = [Path(directory) / f"shard{n}.bson" for n in range(SOURCE_SHARDS)]
        for path, data in zip(paths, datas, strict=True):
            path.write_bytes(data)
        replay = report["replay_bson"] = replay_bson(paths)
        expected = expected_contents(paths)
    print(
        f"{SOURCE_SHARDS} source shards x {per_shard:,} entries -> {replay['events']:,.0f} events;"
        f" emulated {TARGET_SHARDS}-shard target; sync from the corpus's start (no copy)"
    )
    print(f"  {'replay --output-format bson':32s} {replay['rate']:9,.0f} events/s")
    with ClusterProcess(SOURCE_SHARDS, datas) as source:
        read = report["watch"] = read_only(source.uri, int(replay["events"]))
        print(
            f"  {'watch(URI), sync options':32s} {read['rate']:9,.0f} events/s "
            f"({read['rate'] / replay['rate']:.2f}x replay; CPU "
            f"{read['cpu'] / replay['events'] * 1e6:.0f} us/event)"
        )
        print(
            f"  {'sync into':17s} {'writers':>7s} {'events/s':>9s} {'x replay':>9s} {'x watch':>8s}"
            f" {'CPU us/event: sync':>19s} {'marginal':>8s} {'source':>7s} {'target':>7s}"
            "  target = expected"
        )
        runs = report["sync"] = []
        small_datas = [oplog_bytes(SMALL_PER_SHARD, seed=n) for n in range(SOURCE_SHARDS)]
        with ClusterProcess(SOURCE_SHARDS, small_datas) as small:
            for acknowledge_only in (False, True):
                for writers in WRITERS:
                    run = one_sync(source, writers, acknowledge_only=acknowledge_only)
                    run["target"] = "acknowledge only" if acknowledge_only else "emulated"
                    equal = run.pop("contents") == expected if "contents" in run else None
                    run["target_equals_expected"] = equal
                    if acknowledge_only:  # the start and the idle exit taken off
                        base = one_sync(small, writers, acknowledge_only=True)
                        run["cpu_sync_marginal"] = (run["cpu_sync"] - base["cpu_sync"]) / (
                            run["events"] - base["events"]
                        )
                    runs.append(run)
                    per_event = {
                        k: run[f"cpu_{k}"] / run["events"] * 1e6
                        for k in ("sync", "source", "target")
                    }
                    marginal = run.get("cpu_sync_marginal")
                    print(
                        f"  {run['target']:17s} {writers:7d} {run['rate']:9,.0f}"
                        f" {run['rate'] / replay['rate']:9.3f} {run['rate'] / read['rate']:8.2f}"
                        f" {per_event['sync']:19.0f}"
                        f" {'-' if marginal is None else f'{marginal * 1e6:.0f}':>8s}"
                        f" {per_event['source']:7.0f} {per_event['target']:7.0f}"
                        f"  {'-' if equal is None else equal}"
                    )
        if "--profile" in argv:
            with every_thread_profiled() as profiles:
                one_sync(source, 2, acknowledge_only=True)
            print(
                "cProfile of the 2-writer sync into the acknowledging target "
                "(every thread of this process; tottime):"
            )
            stats = pstats.Stats(profiles[0])
            for profile in profiles[1:]:
                stats.add(profile)
            stats.sort_stats("tottime").print_stats(25)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"load average at the end {os.getloadavg()[0]:.1f}; wrote {RESULTS}")
    return 0 if all(run["target_equals_expected"] is not False for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
