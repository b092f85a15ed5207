"""``make demo``'s ingest, timed: how long ``run_ingest`` takes after Spark starts.

Run from the repository root::

    .venv/bin/python -m benchmarks.demo_ingest_time [RUNS] [BATCH]

Each run starts a fresh SparkSession (local[2], as the demo), then times ``run_ingest``
on the demo's input and settings (``demo.demo_settings``: the simulated 3-shard cluster's
oplogs, 1,000 operations, seed 7, its 1,742 events, written as files first; 4 buckets)
with ``maxEventsPerTrigger`` BATCH (default: the demo's), into a new lakehouse; it prints
the wall time to each batch's end (the progress's call after the batch's commits) and in
all.  One process per run: the JVM and Spark's Python workers start cold each time, as in
``make demo``.
"""

from __future__ import annotations

import io
import subprocess
import sys
import time

from benchmarks.timing import scratch_directory
from shardstream.sim import SimulatedCluster, SimulationConfig
from shardstream.spark.delta.sink import BatchOutcome
from shardstream.spark.ingest.demo import DEMO_BATCH, demo_settings
from shardstream.spark.ingest.progress import IngestProgress


class _TimedProgress(IngestProgress):
    """The progress, each batch's end time kept."""

    def __init__(self, start: float) -> None:
        super().__init__(io.StringIO(), interactive=False)
        self.start = start
        self.ends: list[float] = []

    def batch(self, outcome: BatchOutcome) -> None:
        self.ends.append(time.perf_counter() - self.start)
        super().batch(outcome)


def _one_run(batch: int) -> None:
    from shardstream.spark.ingest.query import run_ingest
    from shardstream.spark.ingest.session import build_session

    directory = scratch_directory("demo-ingest-time-")
    oplogs = SimulatedCluster(SimulationConfig(seed=7, shards=3, operations=1000)).run()
    settings = demo_settings(directory / "lakehouse", oplogs.write_oplogs(directory), batch=batch)
    spark = build_session("local[2]")
    start = time.perf_counter()
    progress = _TimedProgress(start)
    totals = run_ingest(spark, settings, progress)
    wall = time.perf_counter() - start
    ends = ", ".join(f"{end:.1f}" for end in progress.ends)
    print(f"{totals.events} events in {totals.batches} batches of {batch}: ingest {wall:.1f} s")
    print(f"  batches ended at (s after run_ingest began): {ends}")
    spark.stop()


def main(argv: list[str]) -> None:
    runs = int(argv[0]) if argv else 2
    batch = int(argv[1]) if len(argv) > 1 else DEMO_BATCH
    if runs == 0:  # a child: one run in this process
        _one_run(batch)
        return
    for _ in range(runs):
        child = [sys.executable, "-m", "benchmarks.demo_ingest_time", "0", str(batch)]
        done = subprocess.run(child, capture_output=True, text=True, check=False)
        print(done.stdout, end="")
        if done.returncode != 0:
            raise SystemExit(f"a run failed ({done.returncode}): {done.stderr[-2000:]}")


if __name__ == "__main__":
    main(sys.argv[1:])
