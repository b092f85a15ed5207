"""Ingest throughput: a 4-shard simulated corpus through Spark into the Delta tables.

Not part of the test suite (timings only).  Run from the repository root::

    .venv/bin/python -m benchmarks.ingest_throughput [--entries 10000] [--batch 5000]

What it measures:

* **Spark ingest**, for each of merged / per-shard partitions and ``local[1]`` /
  ``local[2]``: ``readStream.format("shardstream")`` over the corpus's oplog files →
  ``foreachBatch`` → change log + mirror.  Each configuration runs in a fresh process
  (one SparkSession per master) on a fresh table.  Reported: total wall time of the
  query, and the steady rate: events after the first micro-batch divided by the time
  from the first batch's end to the last's (the first one pays Python worker start-up).
* **Mirror write strategy** (no Spark, ``--strategies ROWS``): on a synthetic mirror of
  ROWS documents, batches of 5,000 changed documents written by the sink's MERGE versus
  delta-rs overwrite-by-predicate (delete the keys, append the rows, one commit).
* **Sinks alone** (no Spark; :mod:`benchmarks.sink_phases`): the same events as Arrow
  batches into the sink, phase by phase, with and without mirror worker processes.
  The Spark runs compact nothing (``optimize_every=0``) and report their file counts.

The corpus is written once as ``<shard>.oplog.bson`` files, so every Spark task reads
files rather than re-running the simulator.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.sink_phases import sinks_alone
from benchmarks.timing import scratch_directory
from shardstream.merger import MergedStream
from shardstream.oplog.file_source import FileOplogSource
from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.spark.delta.commits import BatchCommit
from shardstream.spark.delta.maintenance import active_files
from shardstream.spark.delta.sink import BatchOutcome
from shardstream.spark.ingest import DEFAULT_MIRROR_WORKERS
from shardstream.spark.ingest.progress import IngestProgress
from shardstream.transform import ChangeStreamOptions

SHARDS = 4
CONFIGS = [(master, mode) for master in ("local[1]", "local[2]") for mode in ("merged", "perShard")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=10_000, help="simulated operations")
    parser.add_argument("--batch", type=int, default=5_000, help="maxEventsPerTrigger")
    parser.add_argument(
        "--one", nargs=3, metavar=("ORACLE", "MASTER", "MODE"), help=argparse.SUPPRESS
    )
    parser.add_argument("--strategies", type=int, metavar="ROWS", help="only the MERGE test")
    parser.add_argument(
        "--repeat", type=int, default=1, help="--marginal: runs per size (median wall time)"
    )
    parser.add_argument(
        "--marginal",
        type=int,
        metavar="PER_SHARD",
        help="the benchmark corpus (ObjectId keys) at PER_SHARD and 2 x PER_SHARD entries per "
        "shard: marginal ingest rates next to replay --output-format bson --workers 2",
    )
    args = parser.parse_args()
    if args.strategies:
        _mirror_strategies(args.strategies, 5_000)
        return
    if args.one:
        print(json.dumps(_one_ingest(Path(args.one[0]), args.one[1], args.one[2], args.batch)))
        return
    if args.marginal:
        _marginal(args.marginal, args.batch, args.repeat)
        return
    work = scratch_directory("shardstream-bench-")
    config = SimulationConfig(seed=1, shards=SHARDS, operations=args.entries)
    started = time.perf_counter()
    paths = SimulatedCluster(config).run().write_oplogs(work / "oplogs")
    print(
        f"corpus: {SHARDS} shards, {args.entries} operations, simulated in "
        f"{time.perf_counter() - started:.1f} s; files in {work / 'oplogs'}"
    )
    oplog = ",".join(f"{name}={path}" for name, path in paths.items())
    (work / "oplog-option").write_text(oplog)
    sinks_alone(oplog, args.batch, work / "sinks-alone")
    print(f"\nSpark ingest, maxEventsPerTrigger {args.batch}:")
    print(
        "| master | partitions | events | batches | wall s | steady events/s | files log, mirror |"
    )
    print("|---|---|---|---|---|---|---|")
    for master, mode in CONFIGS:
        result = _ingest_in_new_process(work, master, mode, args.batch)
        print(
            f"| {master} | {mode} | {result['events']} | {result['batches']} | "
            f"{result['wall']:.1f} | {result['steady']:,.0f} | "
            f"{result['files']['changelog']}, {result['files']['mirror']} |"
        )


def _ingest_in_new_process(work: Path, master: str, mode: str, batch: int) -> dict[str, Any]:
    args = ["--batch", str(batch), "--one", str(work), master, mode]
    return spark_child_json("benchmarks.ingest_throughput", args)


def spark_child_json(module: str, args: list[str]) -> dict[str, Any]:
    """Run ``python -m module args`` in a fresh process set up for local Spark; its stdout
    is one JSON object."""
    env = {
        **os.environ,
        "TZ": "UTC",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    command = [sys.executable, "-m", module, *args]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


SOURCE_OPTIONS = "source-options.json"  # a work directory's live source (see ingest_scaling)


def source_options(work: Path) -> dict[str, str]:
    """The source's options for the corpus in ``work``: its files, or the live cluster a
    benchmark serves it from (``source-options.json``, written by the benchmark)."""
    live = work / SOURCE_OPTIONS
    if live.exists():
        options: dict[str, str] = json.loads(live.read_text())
        return options
    return {"oplog": (work / "oplog-option").read_text()}


def corpus_pair(per_shard: int, label: str) -> list[Path]:
    """Two work directories holding the benchmark corpus at ``per_shard`` and twice that
    many entries per shard, each with its ``oplog-option`` file (the source's option)."""
    from shardstream.bench.corpus import corpus_files

    works = []
    for size in (per_shard, 2 * per_shard):
        work = scratch_directory(f"shardstream-{label}-{size}-")
        (work / "oplog-option").write_text(corpus_files(work / "oplogs", size, SHARDS))
        works.append(work)
    return works


def _marginal(per_shard: int, batch: int, repeat: int) -> None:
    """Ingest and replay of the benchmark corpus at two sizes: the marginal rates.

    A run's time is the query's (after its SparkSession is up) or the replay's (the
    subprocess's whole wall time); the marginal rate is the events the larger corpus adds
    over the time it adds, so start-up (Python workers, the first batch) cancels out.
    """
    sizes = (per_shard, 2 * per_shard)
    works = corpus_pair(per_shard, "marginal")
    print(
        f"benchmark corpus (ObjectId keys): {SHARDS} shards x {sizes[0]:,} and x {sizes[1]:,} "
        f"entries; maxEventsPerTrigger {batch}; ingest runs per size: {repeat}"
    )
    sinks_alone((works[1] / "oplog-option").read_text(), batch, works[1] / "sinks-alone")
    print()
    replays = [replay_seconds(work) for work in works]
    events = [count_events(work) for work in works]
    replay_rate = (events[1] - events[0]) / (replays[1] - replays[0])
    print(
        f"replay --output-format bson --workers 2: {events[0]:,} events {replays[0]:.2f} s, "
        f"{events[1]:,} events {replays[1]:.2f} s; marginal {replay_rate:,.0f} events/s"
    )
    print(
        "| master | partitions | wall s (small, large) | last-batch events/s | "
        "marginal events/s | / replay |"
    )
    print("|---|---|---|---|---|---|")
    for master, mode in CONFIGS:
        runs = []
        for work in works:  # each size run `repeat` times; its median wall time counts
            tries = [_ingest_in_new_process(work, master, mode, batch) for _ in range(repeat)]
            if {run["events"] for run in tries} != {tries[0]["events"]}:
                raise SystemExit(f"expected equal runs, got {[r['events'] for r in tries]}")
            runs.append({**tries[-1], "wall": statistics.median(r["wall"] for r in tries)})
        if [run["events"] for run in runs] != events:
            raise SystemExit(
                f"expected {events} events ingested, got {[r['events'] for r in runs]}"
            )
        rate = (events[1] - events[0]) / (runs[1]["wall"] - runs[0]["wall"])
        print(
            f"| {master} | {mode} | {runs[0]['wall']:.1f}, {runs[1]['wall']:.1f} | "
            f"{runs[1]['steady']:,.0f} | {rate:,.0f} | {rate / replay_rate:.3f}x |"
        )


def replay_seconds(work: Path) -> float:
    """The median wall time of five ``replay --output-format bson --workers 2`` runs."""
    return statistics.median(_one_replay(work) for _ in range(5))


def _one_replay(work: Path) -> float:
    command = [sys.executable, "-m", "shardstream", "replay", "--output-format", "bson"]
    command += ["--workers", "2"]
    for part in (work / "oplog-option").read_text().split(","):
        command += ["--shard", part]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def count_events(work: Path) -> int:
    sources = {
        name: FileOplogSource(name, path, raw_entries=True)
        for name, path in (
            part.split("=", 1) for part in (work / "oplog-option").read_text().split(",")
        )
    }
    stream = MergedStream(sources, ChangeStreamOptions())
    count = 0
    while not stream.exhausted:
        count += len(stream.next_batch(10_000)[0])
    return count


def _mirror_strategies(rows: int, changed: int) -> None:
    from deltalake import DeltaTable, write_deltalake

    from shardstream.spark.delta.mirror.prepare import (
        MIRROR_SCHEMA,
        PreparedBatch,
        load_rows,
        merge_source,
        sql_literal,
    )
    from shardstream.spark.delta.mirror.state import BatchNeeds, MirrorRow
    from shardstream.spark.delta.mirror.table import DeltaMirror

    def document(index: int, revision: int) -> MirrorRow:
        key = f'{{"_id": {{"$numberInt": "{index}"}}}}'
        text = json.dumps({"_id": index, "rev": revision, "pad": "x" * 200})
        return MirrorRow(
            "shop",
            "orders",
            f'{{"$numberInt":"{index}"}}',
            key,
            f"{revision:08X}",
            {"t": revision, "i": index},
            text,
        )

    rng = random.Random(1)
    base = merge_source({row.key: row for row in (document(i, 0) for i in range(rows))})
    print(f"mirror write strategies: {rows:,} documents, batches of {changed:,} changed ones")
    for strategy in ("MERGE", "overwrite by predicate"):
        root = scratch_directory("shardstream-strategy-")
        write_deltalake(str(root / "mirror"), base.drop_columns(["_delete"]).cast(MIRROR_SCHEMA))
        mirror = DeltaMirror(root)
        reads, writes = [], []
        for revision in range(1, 4):
            keys = rng.sample(range(rows), changed)
            started = time.perf_counter()
            needs = BatchNeeds(
                frozenset(document(k, 0).key for k in keys), frozenset(), frozenset()
            )
            load_rows(mirror.path, needs)  # what a batch of updates reads first
            loaded = time.perf_counter()
            changes: dict[tuple[str, str, str], MirrorRow | None] = {
                row.key: row for row in (document(k, revision) for k in keys)
            }
            if strategy == "MERGE":
                commit = BatchCommit(app_id="bench", batch_id=revision, watermark=f"{revision:08X}")
                mirror.write(PreparedBatch(changed, changed, merge_source(changes)), commit)
            else:
                source = merge_source(changes).drop_columns(["_delete"]).cast(MIRROR_SCHEMA)
                ids = ", ".join(sql_literal(row.document_id) for row in changes.values() if row)
                predicate = f'"_documentId" IN ({ids})'
                write_deltalake(
                    DeltaTable(str(root / "mirror")), source, mode="overwrite", predicate=predicate
                )
            reads.append(loaded - started)
            writes.append(time.perf_counter() - loaded)
        print(
            f"  {strategy:24} read {statistics.median(reads) * 1000:5.0f} ms, "
            f"write {statistics.median(writes) * 1000:5.0f} ms (median of 3)"
        )


class _RecordingProgress(IngestProgress):
    """Keeps each batch's end time and size instead of drawing a line."""

    def __init__(self) -> None:
        super().__init__(sys.stderr, interactive=False)
        self.marks: list[tuple[float, int]] = []

    def batch(self, outcome: BatchOutcome) -> None:
        self.totals.add(outcome)
        self.marks.append((time.perf_counter(), outcome.events))

    def finish(self) -> None:
        pass


def _one_ingest(work: Path, master: str, mode: str, batch: int) -> dict[str, Any]:
    from shardstream.spark.ingest.query import run_ingest
    from shardstream.spark.ingest.session import build_session
    from shardstream.spark.ingest.settings import IngestSettings

    spark = build_session(master)
    options = {
        "oplog": (work / "oplog-option").read_text(),
        "partitionMode": mode,
        "maxEventsPerTrigger": str(batch),
    }
    root = Path(tempfile.mkdtemp(prefix=f"lake-{master[6]}-{mode}-", dir=work))  # fresh per run
    progress = _RecordingProgress()
    started = time.perf_counter()
    settings = IngestSettings(
        table=root,
        source_options=options,
        bounded=True,
        optimize_every=0,
        mirror_workers=DEFAULT_MIRROR_WORKERS,  # as shardstream ingest runs by default
    )
    run_ingest(spark, settings, progress)
    wall = time.perf_counter() - started
    spark.stop()
    marks = progress.marks
    steady_events = sum(events for _, events in marks[1:])
    steady_time = marks[-1][0] - marks[0][0] if len(marks) > 1 else float("nan")
    return {
        "events": progress.totals.events,
        "batches": progress.totals.batches,
        "wall": wall,
        "steady": steady_events / steady_time if steady_time else float("nan"),
        "files": {name: active_files(root / name) for name in ("changelog", "mirror")},
    }


if __name__ == "__main__":
    main()
