"""The change log written by Spark's tasks (``ingest --no-mirror``) against its ceiling.

Run from the repository root::

    .venv/bin/python -m benchmarks.changelog_scaling [PER_SHARD] [BATCH]

The benchmark corpus (4 BSON files, ObjectId keys) at PER_SHARD and 2 x PER_SHARD entries
per shard (25,000 by default), perShard, ``maxEventsPerTrigger`` BATCH (50,000: several
batches per run, so that the marginal rate holds per-batch costs too), each run a fresh
process: the ingest with ``--no-mirror`` (``run_ingest``, the tasks write the change log's
Parquet and the driver commits each batch's files) and the source into Spark's ``noop``
sink (``spark_source_bound.py --one``: everything but a sink), on local[1] and local[2].
Marginal rates (the events the larger corpus adds over the time it adds), and the CPU per
event of every process of a run (``timing.process_tree_cpu``) and of the driver's Python
process alone (``time.process_time``), marginal too.  Issue 27's T3: the change log >= 0.8x
the source into noop, and its local[2] >= 1.6x its local[1]; T4: the driver's CPU per event.
"""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.ingest_throughput import SHARDS, corpus_pair, count_events, spark_child_json
from benchmarks.timing import machine_line, process_tree_cpu

MASTERS = ("local[1]", "local[2]")


def _changelog(work: str, master: str, batch: str) -> dict[str, Any]:
    """One ``--no-mirror`` ingest of the corpus in ``work``, in this process."""
    from shardstream.spark.ingest.progress import IngestProgress
    from shardstream.spark.ingest.query import IngestSettings, run_ingest
    from shardstream.spark.ingest.session import build_session

    spark = build_session(master)
    options = {
        "oplog": (Path(work) / "oplog-option").read_text(),
        "partitionMode": "perShard",
        "maxEventsPerTrigger": batch,
    }
    settings = IngestSettings(
        table=Path(work) / f"lake-{master[6]}", source_options=options, bounded=True, mirror=False
    )
    started, cpu, driver = time.perf_counter(), process_tree_cpu(), time.process_time()
    totals = run_ingest(spark, settings, IngestProgress(io.StringIO(), interactive=False))
    wall = time.perf_counter() - started
    cpu, driver = process_tree_cpu() - cpu, time.process_time() - driver
    spark.stop()
    return {"events": totals.events, "wall": wall, "cpu": cpu, "driver": driver}


def _run(work: Path, master: str, sink: str, batch: str) -> dict[str, Any]:
    if sink == "noop":
        args = ["--one", str(work), master, "perShard", batch]
        return spark_child_json("benchmarks.spark_source_bound", args)
    return spark_child_json("benchmarks.changelog_scaling", ["--one", str(work), master, batch])


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        print(json.dumps(_changelog(argv[1], argv[2], argv[3])))
        return
    per_shard = int(argv[0]) if argv else 25_000
    batch = argv[1] if len(argv) > 1 else "50000"
    works = corpus_pair(per_shard, "changelog")
    events = [count_events(work) for work in works]
    added = events[1] - events[0]
    print(machine_line())
    print(
        f"benchmark corpus: {SHARDS} shards x {per_shard:,} and x {2 * per_shard:,} entries "
        f"({events[0]:,} and {events[1]:,} events), perShard, maxEventsPerTrigger {batch}"
    )
    print(
        "| master | sink | wall s (small, large) | marginal events/s | CPU us/event, all "
        "processes (marginal) | driver Python us/event (marginal) |"
    )
    print("|---|---|---|---|---|---|")
    rates: dict[tuple[str, str], float] = {}
    for master in MASTERS:
        for sink in ("noop", "changelog"):
            runs = [_run(work, master, sink, batch) for work in works]
            if [run["events"] for run in runs] != events:
                raise SystemExit(f"expected {events} events, got {[r['events'] for r in runs]}")
            rate = rates[(master, sink)] = added / (runs[1]["wall"] - runs[0]["wall"])
            cpu = (runs[1]["cpu"] - runs[0]["cpu"]) / added * 1e6
            driver = (
                f"{(runs[1]['driver'] - runs[0]['driver']) / added * 1e6:.1f}"
                if "driver" in runs[0]
                else "-"
            )
            print(
                f"| {master} | {sink} | {runs[0]['wall']:.1f}, {runs[1]['wall']:.1f} | "
                f"{rate:,.0f} | {cpu:.1f} | {driver} |"
            )
    for master in MASTERS:
        ratio = rates[(master, "changelog")] / rates[(master, "noop")]
        print(f"T3 {master}: change log / noop = {ratio:.2f}x (target >= 0.8x)")
    speedup = rates[("local[2]", "changelog")] / rates[("local[1]", "changelog")]
    print(f"T3: change log local[2] / local[1] = {speedup:.2f}x (target >= 1.6x)")


if __name__ == "__main__":
    main(sys.argv[1:])
