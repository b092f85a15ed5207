"""The ingest's sinks against their ceiling, the source into Spark's ``noop``, and how each
scales from one task slot to two.

Run from the repository root::

    .venv/bin/python -m benchmarks.ingest_scaling [PER_SHARD] [BATCH] [SINK,...]

The benchmark corpus (4 BSON files, ObjectId keys) at PER_SHARD and 2 x PER_SHARD entries
per shard (25,000 by default), perShard, ``maxEventsPerTrigger`` BATCH (50,000: several
batches per run, so that the marginal rate holds per-batch costs too), each run a fresh
process, on local[1] and local[2], into each SINK (default all):

- ``noop``: the source into Spark's ``noop`` sink (``spark_source_bound.py --one``);
- ``changelog``: ``ingest --no-mirror`` (the tasks write the change log, the driver commits);
- ``bucketed``: ``ingest --mirror-layout bucketed`` (the tasks also rewrite the mirror's
  buckets, 16; the driver commits both tables);
- ``single``: ``ingest --mirror-layout single`` (the rows collected to the driver, which
  writes both tables: the design the executors' writers replace).

Marginal rates (the events the larger corpus adds over the time it adds), and the CPU per
event of every process of a run (``timing.process_tree_cpu``) and of the driver's Python
process alone (``time.process_time``), marginal too.  Issue 27's T1 (a full ingest >= 0.5x
noop), T3 (the change log >= 0.8x noop, local[2] >= 1.6x local[1]), T4 (the driver's CPU per
event) and T6 (a full ingest's local[2] >= 1.5x its local[1]).
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
SINKS = ("noop", "changelog", "bucketed", "single")


def _ingest(work: str, master: str, batch: str, sink: str) -> dict[str, Any]:
    """One ingest of the corpus in ``work`` into ``sink``'s tables, in this process."""
    from shardstream.spark.ingest import MirrorLayout
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
        table=Path(work) / f"lake-{sink}-{master[6]}",
        source_options=options,
        bounded=True,
        mirror=sink != "changelog",
        mirror_layout=MirrorLayout.SINGLE if sink == "single" else MirrorLayout.BUCKETED,
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
    return spark_child_json("benchmarks.ingest_scaling", ["--one", str(work), master, batch, sink])


def main(argv: list[str]) -> None:
    if argv[:1] == ["--one"]:
        print(json.dumps(_ingest(argv[1], argv[2], argv[3], argv[4])))
        return
    per_shard = int(argv[0]) if argv else 25_000
    batch = argv[1] if len(argv) > 1 else "50000"
    sinks = argv[2].split(",") if len(argv) > 2 else list(SINKS)
    if "noop" not in sinks or not set(sinks) <= set(SINKS):
        raise SystemExit(f"expected sinks among {SINKS}, noop included, got {sinks}")
    works = corpus_pair(per_shard, "scaling")
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
        for sink in sinks:
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
    for sink in sinks[1:]:
        for master in MASTERS:
            ratio = rates[(master, sink)] / rates[(master, "noop")]
            print(f"{sink} {master}: / noop = {ratio:.2f}x (T1 >= 0.5x full, T3 >= 0.8x log)")
        speedup = rates[("local[2]", sink)] / rates[("local[1]", sink)]
        print(f"{sink}: local[2] / local[1] = {speedup:.2f}x (T3 >= 1.6x log, T6 >= 1.5x full)")


if __name__ == "__main__":
    main(sys.argv[1:])
